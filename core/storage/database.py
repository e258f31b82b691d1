"""One SQLite database through aiosqlite: WAL, foreign keys, versioned migrations."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from core.storage.errors import StorageError, StorageFullError, is_storage_full
from core.storage.schema import Migration
from core.storage.sqlite_connection import (
    SQL_FUNCTION,
    _commit,
    _group_transaction,
    _is_busy,
    _read_connection,
    _rollback,
    _write_connection,
)
from core.storage.write_lock import ProcessWriteLock
from core.storage.writer_process import NotLoadable, WriterGone, WriterProcess, encode_batch

__all__ = [
    "Database",
    "Migration",
    "StorageError",
    "StorageFullError",
    "_commit",
    "_group_transaction",
    "_rollback",
    "_write_connection",
    "is_storage_full",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

CHECKPOINT_EVERY_S = 1.0  # the write-ahead log is copied into the database at most this often
# A log longer than this (in pages) is made to start over (see Database._checkpoint).
RESTART_FRAMES = 4096
# What the write-ahead log file is cut back to when it starts over.
WAL_SIZE_LIMIT = 64 * 1024 * 1024
# A log file this many times WAL_SIZE_LIMIT has not started over for a while: writes wait
# for a checkpoint before they add to it (see Database._log_caught_up).
WAL_HOLD_FACTOR = 2
# How long a restart waits for readers still on the old log before it gives up until
# the next checkpoint: it holds back every write meanwhile.
CHECKPOINT_WAIT_MS = 200
# How long opening the file waits for a lock held by a process that does not take our
# write lock (our own processes queue on that lock instead, without a time limit).
BUSY_TIMEOUT_MS = 5000


class Database:
    """Owns the connection. Writes go through :meth:`transaction` or :meth:`run`, which
    serialise them (SQLite has one writer) so concurrent users never interleave half-done
    writes.

    With ``writer_process=True`` the group commits of :meth:`run` go to a child process
    (:mod:`core.storage.writer_process`) once it has started; what follows about the
    loop's write connection is then true only until it is ready, for a batch holding a
    write function that cannot be pickled, and after the child died.

    aiosqlite runs :meth:`transaction` (migrations, bulk changes, forgetting) on its worker
    thread. The hot path is :meth:`run`: the write functions queued during one loop turn
    go in one transaction (group commit), run right on the event loop's own write
    connection. On a thread, every statement of theirs hands the GIL to that thread and
    back, and each hand-off waits for the loop: paired runs at 1000 users x 5 measured
    overhead p99 0.45-0.68 s inline against 1.4-1.7 s on the thread while another process
    kept one core busy (on an idle machine, about the same; p50 lower inline). The loop's
    connection never waits for a lock: when another process holds the write lock, the
    batch goes to aiosqlite's thread, which may wait; and it never checkpoints (copying
    the log into the database file, with an fsync): :meth:`_checkpoint` does that on a
    thread of its own, at most once a second. Reads go to :class:`_ReadWorker` threads in
    batches (see there), except lookups (``lookup=True``: a few rows found by an index),
    which run right away on the event loop's own read connection: a hop to a thread and
    back costs two thread switches, more than such a query itself (~20-60 µs). Never mark
    a scan as a lookup: while it runs, the loop serves nobody else."""

    def __init__(self, path: Path | str, *, readers: int = 3, writer_process: bool = False) -> None:
        self.path = Path(path)
        # Group commits in a process of their own (see core.storage.writer_process) once
        # it is ready; until then, and for batches that cannot be pickled, on the loop.
        self.writer_process = writer_process
        self._process: WriterProcess | None = None
        # Group commits made by the writer process, and those it was ready for but could
        # not take (a write function that does not pickle: it ran on the loop).
        self.batches_in_process = 0
        self.unpicklable_batches = 0
        self._conn: aiosqlite.Connection | None = None
        # Reads go to other connections (a thread each, taken in turn): under WAL they see
        # every committed write and never wait behind a batch of writes being committed.
        # Several, because each read ends by waiting for the GIL to build its rows: one
        # reader thread would serialise every person's reads behind those waits.
        self.readers = max(0, readers)
        self._readers: list[_ReadWorker] = []
        self._next_reader = 0
        # Reads asked for during one turn of the event loop, handed over as one batch.
        self._read_batch: list[_Job[Any]] = []
        self._lookups: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None  # the loop's, for group commits
        self._checkpointer: asyncio.Task[None] | None = None
        # Its own thread: behind other reads it would hold back the writes even longer.
        self._checkpoints: _ReadWorker | None = None
        self._last_checkpoint = 0.0
        self._wal_path = f"{self.path}-wal"
        self.log_holds = 0  # group commits that waited for a checkpoint (observability)
        self._write_lock = asyncio.Lock()
        # Other processes on the same file (engine workers, a CLI command) wait for this
        # one's writes in the kernel's queue, not by SQLite's sleep-and-retry.
        self._process_lock = ProcessWriteLock(self.path) if str(path) != ":memory:" else None
        # Group commit: writes queued by :meth:`run` while the database is busy go in one
        # transaction, so 1000 people cost a commit per batch.
        self._pending: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._drainer: asyncio.Task[None] | None = None

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id while it runs (None: writes run on the loop)."""
        return self._process.pid if self._process is not None and self._process.alive else None

    async def wait_writer(self) -> bool:
        """Wait until the writer process takes batches; False without one."""
        return self._process is not None and await self._process.wait_ready()

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StorageError("database is not open")
        return self._conn

    async def open(self, migrations: Iterable[Migration]) -> None:
        try:
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._process_lock is not None:
                self._process_lock.open()
            self._conn = await aiosqlite.connect(self.path, isolation_level=None)
            self._conn.row_factory = aiosqlite.Row
            await self._conn.create_function(*SQL_FUNCTION, deterministic=True)
            # First: a process that does not take our write lock (someone's sqlite3
            # shell) may hold the lock that switching to WAL or migrating needs.
            await self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            await self._conn.execute("PRAGMA foreign_keys=ON")
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            # Under the write lock, in the kernel's queue: the other processes on this
            # file (engine workers starting together, a CLI command beside the running
            # bot) write under it too. Two connections switching a new file to WAL at
            # once can deadlock on SQLite's locks, and SQLite then says "database is
            # locked" without waiting (an engine worker failed to start so in CI).
            async with self._writing():
                await self._conn.execute("PRAGMA journal_mode=WAL")
                await self._migrate(sorted(migrations, key=lambda m: m.version))
            if str(self.path) != ":memory:":  # an in-memory database is per connection
                for number in range(self.readers):
                    self._readers.append(_ReadWorker(self.path, f"akira-db-reader-{number}"))
                if self.readers:
                    # Never waits for a lock: blocking here would stop the whole loop.
                    self._lookups = _read_connection(self.path, busy_timeout_ms=0)
                self._writer = _write_connection(self.path, wal_size_limit=WAL_SIZE_LIMIT)
                self._checkpoints = _ReadWorker(
                    self.path, "akira-db-checkpoint", busy_timeout_ms=CHECKPOINT_WAIT_MS
                )
                if self.writer_process:
                    await self._start_writer_process()
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc

    async def _start_writer_process(self) -> None:
        """Start the writer process; where processes cannot be started (a sandbox, no
        ``pass_fds`` on this platform), say so and write on the loop."""
        process = WriterProcess(self.path)
        try:
            await process.start()
        except (OSError, ValueError, NotImplementedError) as exc:
            log.warning("no database writer process (%s): writing on the event loop", exc)
            return
        self._process = process

    async def _migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply the migrations not applied yet; the caller holds the write lock."""
        versions = [m.version for m in migrations]
        if len(set(versions)) != len(versions):
            raise StorageError(f"duplicate migration versions: {versions}")
        await self.conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        async with self.conn.execute("SELECT version FROM schema_migrations") as cur:
            applied = {row[0] for row in await cur.fetchall()}
        for migration in migrations:
            if migration.version in applied:
                continue
            async with self._begin_commit() as conn:
                # Asked again inside the transaction: where there is no process lock
                # (no fcntl), processes opening a new file at once would otherwise both
                # apply it, and one would fail.
                async with conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
                ) as cur:
                    if await cur.fetchone() is not None:
                        continue
                log.info("applying migration %s %s", migration.version, migration.name)
                for statement in _split_sql(migration.sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, unixepoch())",
                    (migration.version, migration.name),
                )

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """The write lock: this process's writers in turn, then the other processes'."""
        async with self._write_lock:
            if self._process_lock is None:
                yield
                return
            await self._process_lock.acquire()
            try:
                yield
            finally:
                self._process_lock.release()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        await self._log_caught_up()
        async with self._writing(), self._begin_commit() as conn:
            yield conn

    @asynccontextmanager
    async def _begin_commit(self) -> AsyncIterator[aiosqlite.Connection]:
        """One transaction on the loop's connection; the caller holds the write lock."""
        conn = self.conn
        await conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        else:
            try:
                await conn.execute("COMMIT")
            except aiosqlite.Error as exc:
                await conn.execute("ROLLBACK")
                raise StorageError(f"commit failed: {exc}") from exc

    async def _call(
        self, fn: Callable[[sqlite3.Connection], T], *, read: bool = False, lookup: bool = False
    ) -> T:
        """``fn(raw connection)``: a lookup right here on the loop's read connection; other
        reads on a reader thread; writes (or everything, for ``:memory:``) on aiosqlite's
        writer thread, each in one round trip."""
        if read and lookup and self._lookups is not None:
            try:
                return fn(self._lookups)
            except sqlite3.OperationalError as exc:
                # Rare under WAL (recovery, a checkpoint resetting the log): wait for the
                # lock on a reader thread instead of here.
                if not _is_busy(exc):
                    raise
        if read and self._readers:
            future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
            self._read_batch.append((fn, future))
            if len(self._read_batch) == 1:
                asyncio.get_running_loop().call_soon(self._send_reads)
            return await future
        conn = self.conn
        # aiosqlite's documented-in-source queueing primitive: the partial runs on the
        # connection's own thread, where the raw sqlite3 connection may be used.
        return await conn._execute(lambda: fn(conn._conn))  # type: ignore[no-any-return]

    def _send_reads(self) -> None:
        """Hand this loop turn's reads to the next reader, as one batch."""
        batch, self._read_batch = self._read_batch, []
        if not batch:  # already sent by close()
            return
        if not self._readers:  # closed in between
            closed = StorageError("database is not open")
            _settle([(future, False, closed) for _, future in batch])
            return
        self._next_reader = (self._next_reader + 1) % len(self._readers)
        self._readers[self._next_reader].submit(batch)

    async def run(
        self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True, lookup: bool = False
    ) -> T:
        """Run ``fn(raw sqlite3 connection)`` on the database thread in one round trip.

        ``write=True``: atomically, inside ``BEGIN IMMEDIATE`` ... ``COMMIT``, serialised
        with :meth:`transaction` by the write lock; when ``fn`` raises, nothing it wrote
        is kept and the error is re-raised here. Writes that queue up while another batch
        runs share one transaction, and one caller's failure rolls back only its own
        writes; the call returns after the COMMIT. To keep that promise a write ``fn``
        may run twice (see :func:`_group_transaction`): it must only write through the
        connection it is given. With the writer process it runs there, so it should be
        picklable (a module-level function, or a ``functools.partial`` of one with
        picklable arguments, passed by keyword) and return something picklable; a batch
        that cannot be pickled runs on the loop instead.
        ``write=False``: a plain read (no lock, no transaction of its own). ``fn`` must not
        await or block on the event loop: it runs on another thread, or, with
        ``lookup=True`` (see the class), on the loop itself."""
        if not write:
            return await self._call(fn, read=True, lookup=lookup)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((fn, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await self._log_caught_up()
            async with self._writing():
                batch = [(fn, f) for fn, f in self._pending if not f.done()]
                self._pending = []
                if not batch:
                    continue
                fns = [fn for fn, _ in batch]
                futures = [future for _, future in batch]
                try:
                    results = await self._write_batch(fns, futures)
                except Exception as exc:  # begin/commit failed, or the database is closed
                    _settle([(future, False, exc) for _, future in batch])
                    continue
                except BaseException as exc:  # cancelled (shutdown): no waiter may hang
                    interrupted = StorageError(f"write interrupted: {exc!r}")
                    _settle([(future, False, interrupted) for _, future in batch])
                    raise
            _settler(futures)(results)  # those the writer process settled are skipped

    async def _write_batch(
        self,
        fns: Sequence[Callable[[sqlite3.Connection], Any]],
        futures: Sequence[asyncio.Future[Any]] = (),
    ) -> list[tuple[bool, Any]]:
        """One group commit: in the writer process (whose reply settles ``futures`` the
        moment it is read); else on the loop's write connection when the write lock is
        free right now, else on aiosqlite's thread (which waits for it)."""
        process = self._process
        if process is not None and process.ready:
            message = encode_batch(fns)
            if message is not None:
                try:
                    results = await process.run(message, _settler(futures) if futures else None)
                except WriterGone as exc:
                    log.error("%s; writing on the event loop from now on", exc)
                    self._process = None
                    await process.close()  # reap it
                    raise StorageError(str(exc)) from exc
                except NotLoadable as exc:
                    log.warning("a write batch ran on the event loop: %s", exc)
                else:
                    self.batches_in_process += 1
                    self._maybe_checkpoint()
                    return results
            self.unpicklable_batches += 1
        writer = self._writer
        if writer is not None:
            try:
                writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
            else:
                try:
                    results = _group_transaction(writer, fns, begun=True)
                except sqlite3.OperationalError as exc:
                    # Only the savepointed re-run begins again, and another process
                    # took the lock in between: nothing was committed, wait for it below.
                    if not _is_busy(exc):
                        raise
                else:
                    self._maybe_checkpoint()
                    return results
        return await self._call(functools.partial(_group_transaction, fns=fns))

    def _maybe_checkpoint(self) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._last_checkpoint < CHECKPOINT_EVERY_S:
            return
        if self._checkpoints is None or (
            self._checkpointer is not None and not self._checkpointer.done()
        ):
            return
        self._start_checkpoint()

    def _start_checkpoint(self) -> asyncio.Task[None]:
        """A checkpoint started now, on schedule or for a log that ran away."""
        loop = asyncio.get_running_loop()
        self._last_checkpoint = loop.time()
        self._checkpointer = loop.create_task(self._checkpoint())
        return self._checkpointer

    async def _log_caught_up(self) -> None:
        """Back-pressure on a log that runs away. A checkpoint copies the log while writes
        go on, and a restart needs it to have caught up; when its thread is starved of
        CPU (both cores busy) or readers keep it from restarting, a stream of commits
        outruns it and the log file grows past the size it is cut back to. Past
        ``WAL_HOLD_FACTOR`` times that size, the next group commit or transaction waits
        for a checkpoint (the running one, or one started now) instead of adding to the
        log."""
        if self._checkpoints is None:
            return
        try:
            size = os.stat(self._wal_path).st_size
        except OSError:  # no log yet, or an in-memory database
            return
        if size <= WAL_HOLD_FACTOR * WAL_SIZE_LIMIT:
            return
        running = self._checkpointer
        if running is None or running.done():
            running = self._start_checkpoint()
        self.log_holds += 1
        # Shielded: a cancelled write (shutdown) must not cancel the checkpoint, which
        # logs its own failures and never raises them.
        await asyncio.shield(running)

    async def _checkpoint(self) -> None:
        """Copy the write-ahead log into the database file; when the log is long, make
        it start over.

        First a PASSIVE checkpoint, which holds nobody back. Racing a stream of commits
        it never reaches the log's end, though, and a log that is never wholly copied
        never starts over: it grew without bound (2.2 GB after 8,000 messages, every page
        read then searching its whole index). So past ``RESTART_FRAMES`` pages, a second
        PASSIVE copies what the first one raced, then writes
        are held back (they queue up for the next group commit) while a RESTART copies
        the little that is left and waits for the readers still on the old log (at most
        ``CHECKPOINT_WAIT_MS``, else it tries again next time); the next commit writes
        from the start of the file and cuts it to ``WAL_SIZE_LIMIT``. On a reader thread
        of its own: a read-only connection may checkpoint, and a reader outlives its
        event loop, where aiosqlite's thread would die answering a closed one."""
        try:
            _, frames, _ = await self._run_checkpoint("PASSIVE")
            if frames >= RESTART_FRAMES:
                # What was written during that pass (~40 ms of commits under load) is
                # copied by a second one, not while every write is held back: the
                # restart then holds them ~10 ms instead of ~17 (a fixed ~12 ms of
                # syncing, and 0.02 ms for each page still to copy).
                await self._run_checkpoint("PASSIVE")
                async with self._writing():
                    await self._run_checkpoint("RESTART")
        except (aiosqlite.Error, sqlite3.Error, StorageError, ValueError) as exc:
            log.warning("checkpoint failed: %s", exc)

    async def _run_checkpoint(self, mode: str) -> tuple[int, int, int]:
        """(busy, pages in the log, pages copied) of one checkpoint on its thread."""
        if self._checkpoints is None:  # closed meanwhile
            return (0, 0, 0)
        done: asyncio.Future[tuple[int, int, int]] = asyncio.get_running_loop().create_future()
        statement = f"PRAGMA wal_checkpoint({mode})"
        self._checkpoints.submit([(lambda raw: tuple(raw.execute(statement).fetchone()), done)])
        return await done

    async def fetchall(
        self, sql: str, params: Sequence[Any] = (), *, lookup: bool = False
    ) -> list[aiosqlite.Row]:
        return await self._call(
            lambda raw: raw.execute(sql, params).fetchall(), read=True, lookup=lookup
        )

    async def fetchone(
        self, sql: str, params: Sequence[Any] = (), *, lookup: bool = False
    ) -> aiosqlite.Row | None:
        def one(raw: sqlite3.Connection) -> aiosqlite.Row | None:
            cur = raw.execute(sql, params)
            try:
                row: aiosqlite.Row | None = cur.fetchone()
                return row
            finally:
                cur.close()

        return await self._call(one, read=True, lookup=lookup)

    async def close(self) -> None:
        if self._checkpointer is not None:
            checkpointer, self._checkpointer = self._checkpointer, None
            if not checkpointer.done() and checkpointer.get_loop() is asyncio.get_running_loop():
                await asyncio.wait([checkpointer])
        if self._writer is not None or self._process is not None:
            async with self._write_lock:  # a batch in flight ends first
                writer, self._writer = self._writer, None
                process, self._process = self._process, None
                if writer is not None:
                    writer.close()
                if process is not None:
                    await process.close()
        if self._lookups is not None:
            lookups, self._lookups = self._lookups, None
            lookups.close()
        readers, self._readers = self._readers, []
        if self._checkpoints is not None:
            readers.append(self._checkpoints)
            self._checkpoints = None
        if self._read_batch:
            self._send_reads()  # fails them: no reader is left
        for reader in readers:
            try:
                await asyncio.to_thread(reader.close)
            except sqlite3.Error:
                log.exception("error closing a database reader")
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.close()
            except aiosqlite.Error:  # closing a broken connection must not mask the cause
                log.exception("error closing database")
        if self._process_lock is not None:
            self._process_lock.close()


_Job = tuple[Callable[[sqlite3.Connection], T], "asyncio.Future[T]"]


class _ReadWorker:
    """A read-only connection (``query_only``) on its own thread, fed whole batches.

    Why not aiosqlite here: it costs a queue put (a thread wake-up) and a
    ``call_soon_threadsafe`` (a write to the loop's self-pipe, and a wake-up of the loop)
    for every single read, and under load those hand-offs cost the event loop more than
    most of the queries they carry. Here every read asked for during one loop turn goes
    over in one batch, and the batch's results come back in one wake-up: the more people
    are talking at once, the less each read costs."""

    def __init__(self, path: Path, name: str, *, busy_timeout_ms: int = 5000) -> None:
        # Opened here, so a failure surfaces in ``open``; used only by the thread below.
        self._conn = _read_connection(path, busy_timeout_ms=busy_timeout_ms)
        self._jobs: queue.SimpleQueue[list[_Job[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, batch: list[_Job[Any]]) -> None:
        self._jobs.put(batch)

    def _serve(self) -> None:
        while (batch := self._jobs.get()) is not None:
            done: list[tuple[asyncio.Future[Any], bool, Any]] = []
            for fn, future in batch:
                try:
                    done.append((future, True, fn(self._conn)))
                except BaseException as exc:  # delivered to the caller, never lost here
                    done.append((future, False, exc))
            # A batch comes from one turn of one loop: its callers' loop gets the results.
            try:
                batch[0][1].get_loop().call_soon_threadsafe(_settle, done)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                continue

    def close(self) -> None:
        """Finish the batches already queued, then close (blocking: call off the loop)."""
        self._jobs.put(None)
        self._thread.join()
        self._conn.close()


def _settler(
    futures: Sequence[asyncio.Future[Any]],
) -> Callable[[Sequence[tuple[bool, Any]]], None]:
    """What settles ``futures`` from a batch's (ok, result or exception) list."""

    def settle(results: Sequence[tuple[bool, Any]]) -> None:
        _settle([(f, ok, v) for f, (ok, v) in zip(futures, results, strict=True)])

    return settle


def _settle(done: Sequence[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """Give each waiting caller its (ok, result or exception); a caller that was
    cancelled meanwhile is skipped."""
    for future, ok, value in done:
        if future.done():  # its caller was cancelled meanwhile
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


def _split_sql(script: str) -> list[str]:
    """Split a migration script into complete statements (trigger bodies stay whole)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
