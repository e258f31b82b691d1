"""Group commits in the writer process: real child process, real SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.storage import SQLiteStorage
from core.storage.database import Database, Migration, StorageError
from tests.conftest import ask, make_message

MIGRATION = Migration(1, "items", "CREATE TABLE items (k TEXT PRIMARY KEY, v INTEGER NOT NULL);")


# Write functions are module-level: a batch crosses to the child pickled, by name.
def _put(raw: sqlite3.Connection, k: str, v: int) -> int:
    raw.execute("INSERT INTO items VALUES (?, ?)", (k, v))
    return os.getpid()


def _slow_put(raw: sqlite3.Connection, k: str, v: int, seconds: float) -> int:
    time.sleep(seconds)
    return _put(raw, k, v)


async def _open(path: Path) -> Database:
    db = Database(path, writer_process=True)
    await db.open([MIGRATION])
    assert await db.wait_writer()
    return db


@contextlib.asynccontextmanager
async def _opened(path: Path) -> AsyncIterator[Database]:
    db = await _open(path)
    try:
        yield db
    finally:
        await db.close()


async def _count(db: Database) -> int:
    return int((await db.fetchall("SELECT count(*) FROM items"))[0][0])


async def test_group_commits_run_in_the_writer_process(tmp_path: Path) -> None:
    async with _opened(tmp_path / "t.db") as db:
        child = db.writer_pid
        assert child is not None and child != os.getpid()
        pids = await asyncio.gather(
            *(db.run(functools.partial(_put, k=f"k{i}", v=i)) for i in range(200))
        )
        assert set(pids) == {child}
        # Committed before each call returned: every read sees them.
        assert await _count(db) == 200
        row = await db.fetchone("SELECT v FROM items WHERE k = 'k199'", lookup=True)
        assert row is not None and row[0] == 199


async def test_a_failing_write_in_the_process_loses_only_its_own_rows(tmp_path: Path) -> None:
    async with _opened(tmp_path / "t.db") as db:
        await db.run(functools.partial(_put, k="taken", v=0))
        results = await asyncio.gather(
            db.run(functools.partial(_put, k="a", v=1)),
            db.run(functools.partial(_put, k="taken", v=2)),  # primary key: fails
            db.run(functools.partial(_put, k="b", v=3)),
            return_exceptions=True,
        )
        assert isinstance(results[1], sqlite3.IntegrityError)
        assert results[0] == results[2] == db.writer_pid
        rows = await db.fetchall("SELECT k, v FROM items ORDER BY k")
        assert [tuple(r) for r in rows] == [("a", 1), ("b", 3), ("taken", 0)]


async def test_a_write_that_cannot_be_pickled_runs_on_the_loop(tmp_path: Path) -> None:
    async with _opened(tmp_path / "t.db") as db:
        pid = await db.run(lambda raw: _put(raw, "closure", 1))
        assert pid == os.getpid()
        assert await _count(db) == 1
        # And the process goes on taking the batches it can.
        assert await db.run(functools.partial(_put, k="next", v=2)) == db.writer_pid


async def test_close_commits_what_is_queued_and_ends_the_process(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    db = await _open(path)
    child = db.writer_pid
    assert child is not None
    writes = [
        asyncio.ensure_future(db.run(functools.partial(_put, k=f"k{i}", v=i))) for i in range(50)
    ]
    await asyncio.sleep(0)  # queued, not yet committed
    await asyncio.gather(*writes)
    await db.close()
    with pytest.raises(ProcessLookupError):  # exited and reaped
        os.kill(child, 0)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 50


async def test_a_dead_writer_fails_its_batch_and_writing_goes_on_on_the_loop(
    tmp_path: Path,
) -> None:
    async with _opened(tmp_path / "t.db") as db:
        child = db.writer_pid
        assert child is not None
        in_flight = asyncio.ensure_future(
            db.run(functools.partial(_slow_put, k="lost?", v=1, seconds=1.0))
        )
        await asyncio.sleep(0.3)  # the child is inside the batch
        os.kill(child, signal.SIGKILL)
        # Whether it committed is unknown: the caller is told, never left hanging.
        with pytest.raises(StorageError, match="writer process"):
            await asyncio.wait_for(in_flight, 10)
        assert db.writer_pid is None
        assert await db.run(functools.partial(_put, k="after", v=2)) == os.getpid()
        row = await db.fetchone("SELECT v FROM items WHERE k = 'after'")
        assert row is not None and row[0] == 2


async def test_the_writer_ignores_ctrl_c_so_shutdown_can_still_commit(tmp_path: Path) -> None:
    async with _opened(tmp_path / "t.db") as db:
        child = db.writer_pid
        assert child is not None
        # A Ctrl-C in a terminal reaches the whole process group, the child included.
        os.kill(child, signal.SIGINT)
        os.kill(child, signal.SIGTERM)
        await asyncio.sleep(0.2)
        assert await db.run(functools.partial(_put, k="k", v=1)) == child


@pytest.mark.parametrize("writer_process", [False, True], ids=["loop", "process"])
async def test_profile_edits_are_never_lost(tmp_path: Path, writer_process: bool) -> None:
    path = tmp_path / "akira.db"
    async with SQLiteStorage(path, writer_process=writer_process) as storage:
        if writer_process:
            assert await storage.db.wait_writer()
        users = storage.users
        await users.ensure("telegram:1", display_name="Ana")

        def bump(value: int | None) -> int:
            return (value or 0) + 1

        # Many edits of one profile at once: each made on the row it read, stored only
        # if nobody changed the profile meanwhile, else made again.
        results = await asyncio.gather(
            *(users.change_profile("telegram:1", "count", bump) for _ in range(20))
        )
        assert sorted(results) == list(range(1, 21))
        # Another program changes the profile behind the kept row's back...
        with sqlite3.connect(path) as other:
            other.execute(
                "UPDATE users SET profile = ? WHERE key = 'telegram:1'",
                (json.dumps({"count": 20, "note": "set elsewhere"}),),
            )
        # ...the next edit finds out, reads it again and keeps that change too.
        assert await users.change_profile("telegram:1", "count", bump) == 21
        user = await users.get("telegram:1")
        assert user is not None
        assert user.profile == {"count": 21, "note": "set elsewhere"}
        with pytest.raises(KeyError):
            await users.change_profile("telegram:404", "count", bump)


async def test_closing_before_the_writer_is_ready_kills_it_at_once(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db", writer_process=True)
    await db.open([MIGRATION])
    process = db._process
    assert process is not None and not process.ready  # still importing
    await db.run(functools.partial(_put, k="k", v=1))  # on the loop meanwhile
    started = time.perf_counter()
    await db.close()
    assert time.perf_counter() - started < 0.15  # its imports alone take ~0.3 s
    assert process._process is None  # reaped
    with sqlite3.connect(tmp_path / "t.db") as conn:
        assert conn.execute("SELECT v FROM items").fetchall() == [(1,)]


async def test_where_no_process_can_start_writes_run_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError("process creation is not allowed here")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", refused)
    db = Database(tmp_path / "t.db", writer_process=True)
    await db.open([MIGRATION])
    try:
        assert "writing on the event loop" in caplog.text
        assert db.writer_pid is None and not await db.wait_writer()
        assert await db.run(functools.partial(_put, k="k", v=1)) == os.getpid()
    finally:
        await db.close()


@pytest.mark.sqlite_itself("SQLite's writer process")
async def test_every_write_of_a_turn_crosses_to_the_writer_process(engine_factory: Any) -> None:
    """The hot path's writes are all picklable: none falls back to the loop."""

    engine, _ = await engine_factory(["Entendo.", "Claro!", "Sure."], storage={"writer": "process"})
    db = engine.services.storage.db
    assert await db.wait_writer()
    # A new person (user row), a Portuguese line with a strong emotion (profile, the
    # node's emotion), replies stored with their links, then English (language).
    for text in ["Você é inútil! Essa resposta é ridícula!", "Fico nervoso em grupos", "hello?"]:
        await ask(engine, make_message(text, user="7"))
    assert db.batches_in_process >= 6
    assert db.unpicklable_batches == 0
    user = await engine.services.storage.users.get("telegram:7")
    assert user is not None and user.language == "en"
    assert user.profile["emotion"]["is_hostile"] is True
    assert await engine.services.storage.nodes.count("telegram:7") == 6


async def test_a_write_the_child_cannot_import_runs_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function the parent pickles by name but the child cannot load (a module on a
    path added after the child started, or a bot script's ``__main__``): the batch runs
    on the loop, and nobody in it loses a write."""
    async with _opened(tmp_path / "t.db") as db:
        plugins = tmp_path / "late_plugins"
        plugins.mkdir()
        (plugins / "late_plugin_writes.py").write_text(
            "import os\n"
            "def put(raw, k, v):\n"
            "    raw.execute('INSERT INTO items VALUES (?, ?)', (k, v))\n"
            "    return os.getpid()\n"
        )
        monkeypatch.syspath_prepend(str(plugins))
        import late_plugin_writes  # type: ignore[import-not-found]

        pids = await asyncio.gather(
            db.run(functools.partial(late_plugin_writes.put, k="plugin", v=1)),
            db.run(functools.partial(_put, k="core", v=2)),  # same batch
        )
        assert pids == [os.getpid(), os.getpid()]
        assert db.unpicklable_batches == 1 and db.writer_pid is not None
        assert await _count(db) == 2
        # The child is still there for the batches it can load.
        assert await db.run(functools.partial(_put, k="next", v=3)) == db.writer_pid
