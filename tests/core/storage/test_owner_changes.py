"""Changes one process makes to a person's data reach the caches of the others sharing the
database file: two SQLiteStorage on one file stand for two processes (and one test runs a
real second process)."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.embeddings import HashingEmbedder
from core.memory.base import PlainMemory
from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage
from core.storage import owner_changes as changes
from core.storage.database import Database
from core.storage.owner_changes import EVERY_OWNER, KEEP_CHANGES_S, NOBODY, record_change

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=1)
OWNER = "telegram:1"
OTHER = "telegram:2"
EMBEDDER = HashingEmbedder()
QUERY = EMBEDDER.embed_query("message about cats")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "akira.db"


@pytest.fixture
async def a(path: Path) -> AsyncIterator[SQLiteStorage]:
    """The bot: serves OWNER and OTHER, keeps their caches."""
    async with SQLiteStorage(path) as storage:
        memory = GraphMemory(storage, EMBEDDER)
        for owner in (OWNER, OTHER):
            await storage.users.ensure(owner)
            for i in range(3):
                assert await memory.store(make_node(i, owner))
        yield storage


@pytest.fixture
async def b(path: Path, a: SQLiteStorage) -> AsyncIterator[SQLiteStorage]:
    """Another process on the same file (``akira-bot memory forget`` / ``import``)."""
    async with SQLiteStorage(path) as storage:
        yield storage


def make_node(i: int, owner: str = OWNER, text: str = "message about cats") -> MemoryNode:
    return MemoryNode(
        id=f"{owner}-n{i}",
        owner=owner,
        content=f"{text} {i}",
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=i),
        chat_id="dm-1",
        source_id=f"src-{owner}-{i}",
    )


async def seen_by(storage: SQLiteStorage, owner: str = OWNER) -> tuple[list[str], list[str]]:
    """The owner's latest node ids and vector hits, as the storage answers them (from what
    it keeps, once warm)."""
    recent = [n.id for n in await storage.nodes.recent(owner, limit=50)]
    hits = [node_id for node_id, _ in await storage.graph.vector_search(owner, QUERY, k=50)]
    return recent, sorted(hits)


async def warm(storage: SQLiteStorage) -> None:
    for owner in (OWNER, OTHER):
        await seen_by(storage, owner)
        assert await storage.users.get(owner) is not None
    assert {OWNER, OTHER} <= set(storage.graph._cache) & set(storage.nodes._latest)


async def warm_other(storage: SQLiteStorage) -> None:
    assert len(await storage.nodes.recent(OTHER, limit=50)) == 3


async def change_rows(storage: SQLiteStorage) -> list[tuple[int, str]]:
    rows = await storage.db.fetchall("SELECT seq, owner FROM owner_changes ORDER BY seq")
    return [(int(r[0]), str(r[1])) for r in rows]


async def test_a_forget_elsewhere_reaches_the_caches_after_catch_up(
    a: SQLiteStorage, b: SQLiteStorage
) -> None:
    await warm(a)
    before = await seen_by(a)
    assert len(before[0]) == 3 and len(before[1]) == 3

    await b.forget_owner(OWNER)

    # Without catching up, A answers from what it keeps: the forgotten person's turns.
    assert await seen_by(a) == before
    assert await a.users.get(OWNER) is not None

    assert await a.catch_up() == [OWNER]
    assert await seen_by(a) == ([], [])
    assert await a.users.get(OWNER) is None
    assert await a.graph.latest_node(OWNER, at=LATER) is None
    # Only that person's caches went; the other's answers are unchanged.
    assert OTHER in a.graph._cache and OTHER in a.nodes._latest
    assert len((await seen_by(a, OTHER))[0]) == 3
    assert await a.catch_up() == []  # seen once


async def test_an_import_elsewhere_shows_up_after_catch_up(
    a: SQLiteStorage, b: SQLiteStorage
) -> None:
    await warm(a)
    before = await seen_by(a)
    a_count = await a.graph._document_count(OWNER)

    stored = await GraphMemory(b, EMBEDDER).store_many([make_node(10, text="imported cats")])
    assert stored == [True]

    assert await seen_by(a) == before  # A's kept latest nodes and vectors miss it
    assert await a.catch_up() == [OWNER]
    recent, hits = await seen_by(a)
    assert recent[-1] == f"{OWNER}-n10" and len(recent) == 4
    assert f"{OWNER}-n10" in hits and len(hits) == 4
    assert await a.graph._document_count(OWNER) == a_count + 1


async def test_a_plain_import_and_its_emotion_profile_are_announced(
    a: SQLiteStorage, b: SQLiteStorage
) -> None:
    await warm(a)
    assert await PlainMemory(b).store_many([make_node(11)]) == [True]
    await b.users.change_profile(OWNER, "emotion", lambda _: {"state": "feliz"}, announce=True)

    assert f"{OWNER}-n11" not in (await seen_by(a))[0]
    assert "emotion" not in (await a.users.get(OWNER) or pytest.fail()).profile
    assert await a.catch_up() == [OWNER]
    assert f"{OWNER}-n11" in (await seen_by(a))[0]
    user = await a.users.get(OWNER)
    assert user is not None and user.profile["emotion"] == {"state": "feliz"}


@pytest.mark.parametrize("part", ["graph", "nodes", "memories", "users"])
async def test_each_part_s_erasure_is_announced_alone(
    a: SQLiteStorage, b: SQLiteStorage, part: str
) -> None:
    await getattr(b, part).delete_owner(OWNER)
    assert [owner for _, owner in await change_rows(b)] == [OWNER]
    assert await a.catch_up() == [OWNER]


async def test_the_serving_process_s_own_writes_are_not_announced(
    a: SQLiteStorage, b: SQLiteStorage
) -> None:
    """The hot path (a message's node and graph rows, emotion, profile, language) comes
    from the process serving the person: it writes no change row."""
    memory = GraphMemory(b, EMBEDDER)
    assert await memory.store(make_node(20))
    assert await b.nodes.add(make_node(21))
    await b.nodes.set_emotion(OWNER, f"{OWNER}-n20", "triste", 0.7)
    await b.users.change_profile(OWNER, "emotion", lambda _: {"state": "triste"})
    await b.users.update_profile(OWNER, note="x")
    await b.users.set_language(OWNER, "pt")
    await b.users.ensure(OWNER, display_name="Ana")
    await b.memories.upsert(OWNER, "fact", "pet", "a cat")
    assert await change_rows(b) == []
    assert await a.catch_up() == []


async def test_a_deleted_structured_memory_is_announced(a: SQLiteStorage, b: SQLiteStorage) -> None:
    memory, _ = await a.memories.upsert(OWNER, "fact", "pet", "a cat")
    assert [m.id for m in await a.memories.entries(OWNER)] == [memory.id]
    assert await b.memories.delete(OWNER, memory.id)
    # Nothing keeps structured memories in memory: gone at once, announced all the same.
    assert await a.memories.get(OWNER, memory.id) is None
    assert await a.catch_up() == [OWNER]
    assert not await b.memories.delete(OWNER, memory.id)  # nothing deleted: no change
    assert await a.catch_up() == []


async def test_a_freshly_opened_storage_does_not_replay_old_changes(
    path: Path, a: SQLiteStorage, b: SQLiteStorage
) -> None:
    await b.forget_owner(OWNER)
    async with SQLiteStorage(path) as fresh:
        await warm_other(fresh)
        assert await fresh.catch_up() == []
        assert OTHER in fresh.nodes._latest  # nothing dropped
        assert await a.catch_up() == [OWNER]  # the one open before still sees it
        await b.forget_owner(OTHER)
        assert await fresh.catch_up() == [OTHER]
        assert await fresh.nodes.recent(OTHER) == []


async def test_catch_up_with_nothing_changed_never_waits(a: SQLiteStorage) -> None:
    """One lookup right on the event loop: the coroutine finishes without suspending."""
    coro = a.catch_up()
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value == []
    else:
        coro.close()
        pytest.fail("catch_up waited for another thread")


async def test_many_changes_at_once_drop_every_cache(
    a: SQLiteStorage, b: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes, "MAX_OWNERS_PER_CATCH_UP", 2)
    await warm(a)
    for owner in ("telegram:7", "telegram:8", "telegram:9"):
        await b.db.run(functools.partial(record_change, owner=owner, at=time.time()))
    assert await a.catch_up() == [EVERY_OWNER]
    assert not a.graph._cache and not a.nodes._latest and not a.users._rows
    assert await a.catch_up() == []


async def test_re_embedding_elsewhere_drops_every_cache(a: SQLiteStorage, b: SQLiteStorage) -> None:
    await warm(a)
    await GraphMemory(b, EMBEDDER).reembed()
    assert await a.catch_up() == [EVERY_OWNER]
    assert not a.graph._cache and not a.nodes._latest
    assert len((await seen_by(a))[1]) == 3


async def test_pruned_changes_a_reader_missed_drop_every_cache(
    path: Path, a: SQLiteStorage, b: SQLiteStorage
) -> None:
    async with SQLiteStorage(path) as c:
        # A change of OWNER older than the bound: C sees it, A does not look yet.
        old = time.time() - KEEP_CHANGES_S - 60
        await b.db.run(functools.partial(record_change, owner=OWNER, at=old))
        assert await c.catch_up() == [OWNER]
        # The next change prunes it: A never saw it, cannot tell whose it was.
        await b.forget_owner(OTHER)
        assert [owner for _, owner in await change_rows(b)] == [OTHER]
        await warm_other(a)
        assert await a.catch_up() == [EVERY_OWNER]
        assert not a.nodes._latest
        assert await c.catch_up() == [OTHER]  # C missed nothing


async def test_opening_prunes_old_changes_and_readers_notice(
    path: Path, a: SQLiteStorage, b: SQLiteStorage
) -> None:
    old = time.time() - KEEP_CHANGES_S - 60
    await b.db.run(functools.partial(record_change, owner=OWNER, at=old))
    async with SQLiteStorage(path) as fresh:
        # The forgotten person's key is gone from the file; a marker row stands in.
        assert [owner for _, owner in await change_rows(fresh)] == [NOBODY]
        assert await fresh.catch_up() == []
        assert await a.catch_up() == [EVERY_OWNER]
        assert await a.catch_up() == []
    async with SQLiteStorage(path) as again:  # nothing old left: opening writes nothing
        rows = await change_rows(again)
    assert [owner for _, owner in rows] == [NOBODY]


@pytest.mark.parametrize("read", ["run", "fetchall"])  # the vectors' load, the nodes'
async def test_a_load_in_flight_when_the_change_is_seen_is_not_kept(
    a: SQLiteStorage, b: SQLiteStorage, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """The load reads the person's rows, then (before it keeps them) the other process
    forgets the person and this one catches up: what was read is used once, not kept."""
    a.drop_cached(None)
    original = getattr(a.db, read)
    calls = 0

    async def read_then_forget(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        rows = await original(*args, **kwargs)
        if calls == 1:
            await b.forget_owner(OWNER)
            assert await a.catch_up() == [OWNER]
        return rows

    monkeypatch.setattr(a.db, read, read_then_forget)
    recent, hits = await seen_by(a)
    assert calls >= 1
    monkeypatch.undo()
    assert OWNER not in a.graph._cache and OWNER not in a.nodes._latest
    assert (len(recent) == 3) if read == "fetchall" else (len(hits) == 3)  # read before
    assert await seen_by(a) == ([], [])


async def test_a_database_from_before_owner_changes_upgrades(path: Path) -> None:
    storage = SQLiteStorage(path)
    earlier = [m for m in storage._migrations if m.version != changes.MIGRATIONS[0].version]
    db = Database(path)
    await db.open(earlier)
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO users(key, platform, external_id, created_at, last_seen_at)"
            " VALUES (?, 'telegram', '1', 0, 0)",
            (OWNER,),
        )
    await db.close()
    async with storage, SQLiteStorage(path) as other:
        assert await storage.users.get(OWNER) is not None
        assert await storage.catch_up() == []
        await other.forget_owner(OWNER)
        assert await storage.catch_up() == [OWNER]
        assert await storage.users.get(OWNER) is None
        versions = await storage.db.fetchall("SELECT version FROM schema_migrations")
        assert changes.MIGRATIONS[0].version in {row[0] for row in versions}


async def test_a_forget_in_another_os_process(path: Path, a: SQLiteStorage) -> None:
    await warm(a)
    script = (
        "import asyncio, sys\n"
        "from core.storage import SQLiteStorage\n"
        "async def main():\n"
        "    async with SQLiteStorage(sys.argv[1]) as storage:\n"
        "        await storage.forget_owner(sys.argv[2])\n"
        "asyncio.run(main())\n"
    )
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(path), OWNER, cwd=ROOT
    )
    assert await asyncio.wait_for(child.wait(), 60) == 0
    assert len((await seen_by(a))[0]) == 3  # still kept here
    assert await a.catch_up() == [OWNER]
    assert await seen_by(a) == ([], [])
    assert await a.users.get(OWNER) is None
    # The child's forget really reached the file.
    assert await a.nodes.count(OWNER) == 0
