"""The database: reads on their own connection, writes grouped, on a real SQLite file."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.storage import SQLiteStorage
from core.storage.database import Database, Migration

REPO = Path(__file__).resolve().parents[3]
MIGRATION = Migration(1, "items", "CREATE TABLE items (k TEXT PRIMARY KEY, v INTEGER NOT NULL);")


async def test_reads_see_every_committed_write_and_cannot_write(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    try:

        def put(i: int) -> Callable[[sqlite3.Connection], object]:
            return lambda raw: raw.execute("INSERT INTO items VALUES (?, ?)", (f"k{i}", i))

        # Writes of many callers at once share transactions; each is visible to reads
        # as soon as its own call returns.
        for i in range(50):
            await db.run(put(i))
            row = await db.fetchone("SELECT v FROM items WHERE k = ?", (f"k{i}",))
            assert row is not None and row[0] == i
        await asyncio.gather(*(db.run(put(i)) for i in range(50, 200)))
        rows = await db.fetchall("SELECT count(*) FROM items")
        assert rows[0][0] == 200
        # The read path is read-only: a write slipped into it fails loudly.
        with pytest.raises(sqlite3.OperationalError):
            await db.run(put(999), write=False)
        assert (await db.fetchall("SELECT count(*) FROM items"))[0][0] == 200
    finally:
        await db.close()
    assert db._readers == [] and db._conn is None


async def test_in_memory_database_uses_one_connection() -> None:
    db = Database(":memory:")
    await db.open([MIGRATION])
    try:
        await db.run(lambda raw: raw.execute("INSERT INTO items VALUES ('a', 1)"))
        assert (await db.fetchall("SELECT v FROM items"))[0][0] == 1
    finally:
        await db.close()


async def test_ensure_writes_last_seen_at_most_once_a_minute(tmp_path: Path) -> None:
    t0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    async with SQLiteStorage(tmp_path / "akira.db") as storage:
        users = storage.users
        first = await users.ensure("telegram:1", display_name="Ana", seen_at=t0)
        assert first.last_seen_at == t0
        again = await users.ensure(
            "telegram:1", display_name="Ana", seen_at=t0 + timedelta(seconds=30)
        )
        assert again.last_seen_at == t0  # a read only
        renamed = await users.ensure(
            "telegram:1", display_name="Ana Paula", seen_at=t0 + timedelta(seconds=40)
        )
        assert renamed.display_name == "Ana Paula"
        assert renamed.last_seen_at == t0 + timedelta(seconds=40)
        later = await users.ensure("telegram:1", seen_at=t0 + timedelta(minutes=5))
        assert later.last_seen_at == t0 + timedelta(minutes=5)
        assert later.display_name == "Ana Paula"
        # Replayed history (older timestamps) never moves last_seen_at back.
        old = await users.ensure("telegram:1", seen_at=t0 - timedelta(days=3))
        assert old.last_seen_at == t0 + timedelta(minutes=5)


async def test_lookups_run_on_the_loop_and_see_committed_writes(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    try:
        for i in range(20):
            await db.run(
                lambda raw, i=i: raw.execute("INSERT INTO items VALUES (?, ?)", (f"k{i}", i))
            )
            row = await db.fetchone("SELECT v FROM items WHERE k = ?", (f"k{i}",), lookup=True)
            assert row is not None and row[0] == i
        # A lookup runs on the calling thread (no hop to a reader thread).
        seen: list[str] = []

        def where(raw: sqlite3.Connection) -> int:
            seen.append(threading.current_thread().name)
            return int(raw.execute("SELECT count(*) FROM items").fetchone()[0])

        assert await db.run(where, write=False, lookup=True) == 20
        assert await db.run(where, write=False) == 20
        assert seen[0] == threading.current_thread().name
        assert seen[1].startswith("akira-db-reader")
        # Lookups are read-only too.
        with pytest.raises(sqlite3.OperationalError):
            await db.run(
                lambda raw: raw.execute("INSERT INTO items VALUES ('x', 0)"),
                write=False,
                lookup=True,
            )
    finally:
        await db.close()


async def test_a_lookup_that_finds_the_database_locked_waits_on_a_reader_thread(
    tmp_path: Path,
) -> None:
    """The loop's connection never waits for a lock (that would stall every person): a
    lookup that meets SQLite's "database is locked" is retried on a reader thread, which
    may wait. Any other error is the caller's."""
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    loop_thread = threading.current_thread().name
    attempts: list[str] = []
    try:
        await db.run(lambda raw: raw.execute("INSERT INTO items VALUES ('a', 1)"))

        def read(raw: sqlite3.Connection) -> int:
            attempts.append(threading.current_thread().name)
            if threading.current_thread().name == loop_thread:
                raise sqlite3.OperationalError("database is locked")
            return int(raw.execute("SELECT v FROM items").fetchone()[0])

        assert await db.run(read, write=False, lookup=True) == 1
        assert attempts[0] == loop_thread and attempts[1].startswith("akira-db-reader")

        def broken(raw: sqlite3.Connection) -> None:
            raw.execute("SELECT v FROM nowhere")

        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await db.run(broken, write=False, lookup=True)
    finally:
        await db.close()


async def test_one_failing_write_loses_only_its_own_rows(tmp_path: Path) -> None:
    """Writes queued together share a transaction; when one raises, the others are still
    committed and only the failing caller's rows (even those written before it raised)
    are gone."""
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    try:
        await db.run(lambda raw: raw.execute("INSERT INTO items VALUES ('busy', 0)"))

        def put(key: str, value: int) -> Callable[[sqlite3.Connection], str]:
            def write(raw: sqlite3.Connection) -> str:
                raw.execute("INSERT INTO items VALUES (?, ?)", (key, value))
                return key

            return write

        def half_then_fail(raw: sqlite3.Connection) -> None:
            raw.execute("INSERT INTO items VALUES ('half', 1)")
            raw.execute("INSERT INTO items VALUES ('busy', 2)")  # primary key taken

        results = await asyncio.gather(
            db.run(put("a", 1)),
            db.run(half_then_fail),
            db.run(put("b", 2)),
            return_exceptions=True,
        )
        assert results[0] == "a" and results[2] == "b"
        assert isinstance(results[1], sqlite3.IntegrityError)
        rows = await db.fetchall("SELECT k FROM items ORDER BY k")
        assert [r[0] for r in rows] == ["a", "b", "busy"]
        # The next writes go straight through again.
        assert await db.run(put("c", 3)) == "c"
    finally:
        await db.close()


def test_reads_answer_the_event_loop_that_asked(tmp_path: Path) -> None:
    """A database opened under one event loop keeps serving reads when a later loop uses
    it (a CLI running several ``asyncio.run`` calls), and closes cleanly from there."""
    db = Database(tmp_path / "t.db")

    async def first() -> None:
        await db.open([MIGRATION])
        await db.run(lambda raw: raw.execute("INSERT INTO items VALUES ('a', 1)"))
        assert (await db.fetchone("SELECT v FROM items"))[0] == 1  # type: ignore[index]

    async def second() -> int:
        try:
            rows = await asyncio.wait_for(db.fetchall("SELECT count(*) FROM items"), 5)
            return int(rows[0][0])
        finally:
            await db.close()

    asyncio.run(first())
    assert asyncio.run(second()) == 1


async def test_group_commits_run_on_the_loop_and_wait_for_another_writer(
    tmp_path: Path,
) -> None:
    """Writes run on the event loop's own connection; when another process holds the
    write lock they wait for it on aiosqlite's thread, and the loop serves others
    meanwhile."""
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    try:
        threads: list[str] = []

        def put(key: str, value: int) -> Callable[[sqlite3.Connection], object]:
            def write(raw: sqlite3.Connection) -> object:
                threads.append(threading.current_thread().name)
                return raw.execute("INSERT INTO items VALUES (?, ?)", (key, value))

            return write

        await db.run(put("a", 1))
        assert threads == [threading.current_thread().name]

        other.execute("BEGIN IMMEDIATE")  # another process writing
        other.execute("INSERT INTO items VALUES ('o', 0)")
        waiting = asyncio.create_task(db.run(put("b", 2)))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        # The loop is free: a lookup is answered while the write waits.
        row = await db.fetchone("SELECT v FROM items WHERE k = 'a'", lookup=True)
        assert row is not None and row[0] == 1
        other.execute("COMMIT")
        await asyncio.wait_for(waiting, 10)
        assert threads[-1] != threading.current_thread().name  # it waited on a thread
        rows = await db.fetchall("SELECT k FROM items ORDER BY k")
        assert [r[0] for r in rows] == ["a", "b", "o"]
        await db.run(put("c", 3))  # and the next one is back on the loop
        assert threads[-1] == threading.current_thread().name
    finally:
        other.close()
        await db.close()


async def test_the_log_starts_over_while_writes_and_reads_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits one after another with reads in between: a checkpoint that races them
    never copies the whole log, and a log never wholly copied never starts over (it grew
    to 2.2 GB after 8,000 messages). Past twice its size limit the writes wait for a
    checkpoint, so however starved the checkpoint's thread, the log stays near that."""
    monkeypatch.setattr("core.storage.database.CHECKPOINT_EVERY_S", 0.0)
    monkeypatch.setattr("core.storage.database.WAL_SIZE_LIMIT", 256 * 1024)
    monkeypatch.setattr("core.storage.database.RESTART_FRAMES", 32)
    path = tmp_path / "t.db"
    log_path = tmp_path / "t.db-wal"
    db = Database(path)
    await db.open([MIGRATION])
    largest = 0
    writing = True
    blob = "x" * 4000

    async def write() -> None:
        nonlocal largest, writing
        for i in range(3000):  # ~12 MB in all
            await db.run(
                lambda raw, k=f"k{i}": raw.execute(
                    "INSERT INTO items VALUES (?, length(?))", (k, blob)
                )
            )
            largest = max(largest, log_path.stat().st_size)
        writing = False

    async def read() -> None:
        while writing:
            await db.fetchall("SELECT count(*) FROM items")

    try:
        await asyncio.gather(write(), read(), read())
        assert (await db.fetchall("SELECT count(*) FROM items"))[0][0] == 3000
    finally:
        await db.close()
    # Near twice the limit (512 KB), not near all that was written (12 MB): one group
    # commit's frames over it at most. Before writes waited, a starved checkpoint
    # thread let it reach 6.2 MB.
    assert largest < 1024 * 1024, f"the log grew to {largest} bytes"


@pytest.mark.parametrize("way", ["group commit", "transaction"])
async def test_writes_held_for_a_log_that_cannot_start_over_still_go_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """A reader that keeps its snapshot keeps the log from starting over, however often
    it is checkpointed. Past twice its size limit each group commit then waits for one
    checkpoint, and goes on: slower, never stuck."""
    monkeypatch.setattr("core.storage.database.CHECKPOINT_EVERY_S", 0.0)
    monkeypatch.setattr("core.storage.database.WAL_SIZE_LIMIT", 64 * 1024)
    monkeypatch.setattr("core.storage.database.RESTART_FRAMES", 8)
    monkeypatch.setattr("core.storage.database.CHECKPOINT_WAIT_MS", 10)
    path = tmp_path / "t.db"
    db = Database(path)
    await db.open([MIGRATION])
    reader = sqlite3.connect(path, isolation_level=None)
    blob = "x" * 4000
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM items").fetchone()  # holds its snapshot

        async def put(key: str) -> None:
            if way == "transaction":
                async with db.transaction() as conn:
                    await conn.execute("INSERT INTO items VALUES (?, length(?))", (key, blob))
            else:
                await db.run(
                    lambda raw: raw.execute("INSERT INTO items VALUES (?, length(?))", (key, blob))
                )

        for i in range(80):  # ~320 KB: five times the limit
            await asyncio.wait_for(put(f"k{i}"), 10)
        assert db.log_holds > 0
        assert (await db.fetchall("SELECT count(*) FROM items"))[0][0] == 80
        reader.execute("COMMIT")
    finally:
        reader.close()
        await db.close()


async def test_the_log_is_copied_into_the_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop's connection never checkpoints; a checkpoint on a reader thread copies
    committed writes from the write-ahead log into the database file."""
    monkeypatch.setattr("core.storage.database.CHECKPOINT_EVERY_S", 0.0)
    path = tmp_path / "t.db"
    db = Database(path)
    await db.open([MIGRATION])
    try:
        await asyncio.gather(
            *(
                db.run(
                    lambda raw, i=i: raw.execute("INSERT INTO items VALUES (?, ?)", (f"k{i}", i))
                )
                for i in range(30)
            )
        )
        assert db._checkpointer is not None
        await db._checkpointer
        # The database file alone (the log ignored) holds the rows.
        alone = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            assert alone.execute("SELECT count(*) FROM items").fetchone()[0] == 30
        finally:
            alone.close()
    finally:
        await db.close()
    assert db._writer is None


async def test_processes_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """Engine workers start together on a database nobody made yet: each process must
    open it (the schema made once), none may fail with "table already exists"."""
    # Imports take a while: every process waits for one moment, then opens.
    opener = (
        "import asyncio, sys, time; from core.storage import SQLiteStorage\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "async def main():\n"
        "    async with SQLiteStorage(sys.argv[1]):\n"
        "        pass\n"
        "asyncio.run(main())\n"
    )
    for attempt in range(3):
        path = tmp_path / f"fresh-{attempt}.db"
        at = time.time() + 2.0
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                opener,
                str(path),
                str(at),
                cwd=REPO,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(4)
        ]
        results = [await proc.communicate() for proc in procs]
        failures = [
            err.decode() for (_, err), p in zip(results, procs, strict=True) if p.returncode
        ]
        assert not failures, failures[0]
        conn = sqlite3.connect(path)
        try:
            versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
        finally:
            conn.close()
        assert len(versions) == len(set(versions)) and versions


def test_many_opening_a_new_file_at_the_same_instant_all_open_it(tmp_path: Path) -> None:
    """Two connections switching a new file to WAL at once can deadlock on SQLite's
    locks, and SQLite then answers "database is locked" at once, whatever busy_timeout
    says: an engine worker failed to start that way in CI. Threads (each its own
    Database, as each process has) released together by a barrier hit that race in about
    one file in a hundred; the switch is made under the write lock now."""
    failures: list[str] = []

    def open_when_released(path: Path, barrier: threading.Barrier) -> None:
        async def main() -> None:
            db = Database(path)
            barrier.wait()
            try:
                await db.open([MIGRATION])
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            finally:
                await db.close()

        asyncio.run(main())

    for attempt in range(150):
        barrier = threading.Barrier(6)
        threads = [
            threading.Thread(target=open_when_released, args=(tmp_path / f"{attempt}.db", barrier))
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures, failures[:3]


class _FullDiskConnection(sqlite3.Connection):
    """A real connection whose COMMIT meets a full disk, as the WAL write at commit does
    on a filled filesystem (SQLite's page cap fails the statement instead)."""

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        if sql == "COMMIT":
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise error
        return super().execute(sql, *args)


def test_a_commit_on_a_full_disk_is_storage_full_even_across_processes(tmp_path: Path) -> None:
    import pickle

    from core.storage import StorageError, StorageFullError, is_storage_full
    from core.storage.database import _commit

    raw = sqlite3.connect(tmp_path / "full.db", factory=_FullDiskConnection)
    raw.isolation_level = None
    raw.execute("CREATE TABLE t(x)")
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(StorageFullError) as raised:
        _commit(raw)
    assert not raw.in_transaction  # rolled back
    # The writer process sends the error pickled: its cause does not cross, its class does.
    crossed = pickle.loads(pickle.dumps(raised.value))
    assert crossed.__cause__ is None and is_storage_full(crossed)
    assert not is_storage_full(StorageError("commit failed: database is locked"))
    raw.close()
