"""wait=False writes of a person served by this process (the emotional state, the
emotion read in the message, the language) and the additions to their learned profile's
counters ride on the statement that lets go of the person's lock
(core.storage.postgres.pending): none is a statement of its own, and the next holder of
the lock, in another process, finds them stored; the counters come with the lock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.storage.postgres import PostgresStorage, profiles
from core.storage.profile_records import ProfileCount
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.conftest import statements_sent

A = "telegram:1"
OWNERS = [A]
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def message(node_id: str) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=A,
        content="que dia bom",
        type=NodeType.USER_MESSAGE,
        timestamp=T0,
        chat_id="c1",
        scope="dm",
    )


async def test_background_writes_ride_on_the_release_and_the_next_holder_sees_them(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    await first.nodes.add(message("n1"))
    async with first.serving(A, sent_at=T0):
        await first.users.ensure(A, seen_at=T0)  # the lock's own row: no statement
        await first.nodes.recent(A, limit=1)  # the person's latest nodes, kept from now
        with statements_sent(first.db) as statements:
            await first.users.change_profile(A, "mood", lambda _: "calma", wait=False)
            await first.nodes.set_emotion(A, "n1", "alegria", 0.7, wait=False)
            await first.users.set_language(A, "en", wait=False)
            (kept,) = await first.nodes.recent(A, limit=1)  # kept: says it at once
            assert kept.emotion == "alegria"
        assert statements == []
        # Not stored before the release.
        assert await second.db.fetchval("SELECT language FROM users WHERE key = $1", A) is None
    assert first.db.pending == {} and first.db.held == {}
    async with second.serving(A, sent_at=T0 + timedelta(minutes=1)):
        user = await second.users.ensure(A, seen_at=T0 + timedelta(minutes=1))
        assert user.profile == {"mood": "calma"} and user.language == "en"
        (stored,) = await second.nodes.recent(A, limit=1)
        assert (stored.emotion, stored.id) == ("alegria", "n1")
    # The emotion read moved the node version in the release: the first process's kept
    # rows, which said it at once, are current.
    async with first.serving(A, sent_at=T0 + timedelta(minutes=2)):
        (again,) = await first.nodes.recent(A, limit=1)
        assert again.emotion == "alegria"


async def stored_counters(store: PostgresStorage) -> list[tuple[str, float, float]]:
    """The counters as PostgreSQL holds them (nothing kept)."""
    rows = await store.db.fetch(
        "SELECT name, weight, total FROM profile_counters WHERE owner = $1 ORDER BY name", A
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def test_counters_of_a_person_served_ride_on_the_release_and_are_kept(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    # Weights whose sums depend on the order they are added in (0.1 + 0.2 + 0.3).
    work = [ProfileCount("topic", "work", w, 1.0, T0) for w in (0.1, 0.2)]
    async with first.serving(A, sent_at=T0):
        with statements_sent(first.db) as statements:
            await first.profiles.add(A, work[:1])
            await first.profiles.add(A, work[1:])
            # Another process adds between (an import): seen by the next message, as if
            # the read came first.
            await second.profiles.add(A, [ProfileCount("topic", "food", 1.0, 1.0, T0)])
            read = [(c.name, c.weight, c.total) for c in await first.profiles.counters(A)]
            assert read == [("work", 0.1 + 0.2, 2.0)]
        assert statements == []  # the counters came with the lock; the additions wait
        assert await stored_counters(second) == [("food", 1.0, 1.0)]  # not before the release
    stored = await stored_counters(second)
    assert stored == [("food", 1.0, 1.0), ("work", 0.1 + 0.2, 2.0)]
    async with second.serving(A, sent_at=T0 + timedelta(minutes=1)):
        with statements_sent(second.db) as statements:
            await second.profiles.add(A, [ProfileCount("topic", "work", 0.3, 1.0, T0)])
            kept = [(c.name, c.weight, c.total) for c in await second.profiles.counters(A)]
        assert statements == []
    # What the kept counters said is what PostgreSQL added, bit for bit.
    assert (
        kept == await stored_counters(first) == [("food", 1.0, 1.0), ("work", 0.1 + 0.2 + 0.3, 3.0)]
    )
    # Beyond the lock, additions and reads are statements of their own.
    await second.profiles.add(A, [ProfileCount("topic", "work", 1.0, 1.0, T0)])
    totals = [(c.name, c.total) for c in await first.profiles.counters(A)]
    assert totals == [("food", 1.0), ("work", 4.0)]
    async with first.serving(A, sent_at=T0 + timedelta(minutes=2)):
        with statements_sent(first.db) as statements:
            totals = [(c.name, c.total) for c in await first.profiles.counters(A)]
        assert statements == [] and totals == [("food", 1.0), ("work", 4.0)]


async def test_the_counters_kept_are_bounded_the_least_recently_served_dropped_first(
    two_processes: tuple[PostgresStorage, PostgresStorage], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = two_processes
    monkeypatch.setattr(profiles, "MAX_KEPT_ROWS", 2)
    b = "telegram:2"
    await first.users.ensure(b)
    for owner in (A, b):
        await first.profiles.add(owner, [ProfileCount("topic", t, 1.0, 1.0, T0) for t in "xy"])
    for minutes, owner in enumerate((A, b)):
        async with first.serving(owner, sent_at=T0 + timedelta(minutes=minutes)):
            assert len(await first.profiles.counters(owner)) == 2
    # Two counters each, two at most: only the person served last is kept.
    assert list(first.profiles._kept) == [b] and first.profiles._kept_rows == 2
    async with first.serving(A, sent_at=T0 + timedelta(minutes=5)):
        with statements_sent(first.db) as statements:
            assert [c.name for c in await first.profiles.counters(A)] == ["x", "y"]
        assert statements == []  # they came with the lock again
