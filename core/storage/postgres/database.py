"""One PostgreSQL database through asyncpg: a connection pool, versioned migrations run
at open (under an advisory lock, so processes starting together apply each once), and
every driver error that means "the server is away" turned into
:class:`~core.storage.errors.StorageUnavailableError` (a full disk into
:class:`~core.storage.errors.StorageFullError`), which the engine answers politely.

The connection string may carry a password: it is never put in a message or a log line
here; errors say what happened, not where."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any

import asyncpg
import numpy as np

from core.storage.errors import StorageError, StorageFullError, StorageUnavailableError
from core.storage.postgres.pending import FLUSH, PendingWrites
from core.storage.records import MemoryNode
from core.storage.schema import Migration

log = logging.getLogger(__name__)

# Advisory-lock namespace (the first of the two-int keys): "AK".
LOCK_NAMESPACE = 0x414B
MIGRATION_LOCK = 0  # the key, in that namespace, held while migrating
CONNECT_TIMEOUT_S = 5.0  # a server that is down is told quickly, not after a minute
COMMAND_TIMEOUT_S = 30.0
MAX_SERVING = 100_000  # people whose node version this process remembers
# PostgreSQL's own choice of plans is kept (a custom plan for a prepared statement's
# first executions, generic after when it looks as good): forcing generic plans saved
# planning, but a full-text search of a person with far more nodes than most then walked
# all their nodes (docs/storage.md).

# For the lock's own connections (Database.connect): they write only what nothing is
# acknowledged on (arrivals, last seen), so their commits need not wait for the disk.
_NO_FLUSH_WAIT = {"synchronous_commit": "off"}

# What a driver raises when the server is gone, restarting or unreachable.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable (ConnectionError is one)
    TimeoutError,
    asyncpg.PostgresConnectionError,  # class 08
    asyncpg.CannotConnectNowError,  # 57P03: starting up or shutting down
    asyncpg.AdminShutdownError,  # 57P01
    asyncpg.CrashShutdownError,  # 57P02
    asyncpg.TooManyConnectionsError,  # 53300
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InterfaceError,  # "connection is closed", a pool that is closing
)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Driver errors as storage errors: full, unavailable; others pass as they are."""
    try:
        yield
    except StorageError:
        raise
    except asyncpg.DiskFullError as exc:
        raise StorageFullError(f"PostgreSQL is out of disk space ({exc.sqlstate})") from exc
    except _UNAVAILABLE as exc:
        raise StorageUnavailableError(
            f"the PostgreSQL server cannot be reached ({type(exc).__name__})"
        ) from exc


class ConnectionPool:
    """At most ``max_size`` connections, each lent to one caller at a time, opened when
    first needed. Why not asyncpg's pool: lending and taking back one of its connections
    cost more of the bot's CPU than the query it ran (its release goes through a task,
    a shield, a reset hook and timeouts each time), and a message sends a dozen. Here a
    connection goes back as it is: nothing here leaves session state on one (a person's
    lock is taken on connections of its own, core.storage.postgres.locks). One that may
    be in an unknown state (the caller was cancelled mid-query, the connection broke, a
    transaction could not end) is closed instead; the next caller opens another."""

    def __init__(
        self, connect: Callable[[], Awaitable[asyncpg.Connection]], *, max_size: int
    ) -> None:
        self._connect = connect
        self.max_size = max_size
        self._idle: list[asyncpg.Connection] = []
        self._size = 0  # connections lent, idle, or being opened
        self._waiters: deque[asyncio.Future[asyncpg.Connection]] = deque()
        self._closed = False

    async def acquire(self) -> asyncpg.Connection:
        if self._closed:
            raise asyncpg.InterfaceError("the connection pool is closed")
        while self._idle:
            conn = self._idle.pop()  # the most recently used: its server process is warm
            if not conn.is_closed():
                return conn
            self._size -= 1
        if self._size < self.max_size:
            self._size += 1
            try:
                return await self._connect()
            except BaseException:
                self._size -= 1
                self._hand_over(None)
                raise
        waiter: asyncio.Future[asyncpg.Connection] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release(waiter.result())  # handed over as this caller went away
            raise

    def release(self, conn: asyncpg.Connection, *, broken: bool = False) -> None:
        if broken or self._closed or conn.is_closed():
            self._size -= 1
            if not conn.is_closed():
                conn.terminate()
            self._hand_over(None)
        else:
            self._hand_over(conn)

    def _hand_over(self, conn: asyncpg.Connection | None) -> None:
        """``conn`` to the longest waiting caller, else idle; None (a connection less):
        the longest waiting caller opens one."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            if conn is not None:
                waiter.set_result(conn)
                return
            self._size += 1
            task = asyncio.ensure_future(self._connect())
            task.add_done_callback(functools.partial(self._opened, waiter=waiter))
            return
        if conn is not None:
            self._idle.append(conn)

    def _opened(
        self,
        done: asyncio.Future[asyncpg.Connection],
        *,
        waiter: asyncio.Future[asyncpg.Connection],
    ) -> None:
        if done.cancelled() or done.exception() is not None:
            self._size -= 1
            if not waiter.done():
                exc = done.exception() if not done.cancelled() else None
                waiter.set_exception(exc or asyncpg.InterfaceError("connecting was cancelled"))
            return
        conn = done.result()
        if waiter.done():
            self.release(conn)
        else:
            waiter.set_result(conn)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        conn = await self.acquire()
        try:
            yield conn
        except (asyncio.CancelledError, TimeoutError, OSError, asyncpg.InterfaceError):
            # Perhaps mid-query, or the connection is gone: not lent again.
            self.release(conn, broken=True)
            raise
        except BaseException:
            # The server answered with an error, or the caller's code raised between
            # queries: the connection is as it was, unless a transaction it was in could
            # not end.
            self.release(conn, broken=conn.is_closed() or conn.is_in_transaction())
            raise
        self.release(conn)

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self.connection() as conn:
            rows: list[asyncpg.Record] = await conn.fetch(sql, *args)
            return rows

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        async with self.connection() as conn:
            return await conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.connection() as conn:
            return await conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        async with self.connection() as conn:
            status: str = await conn.execute(sql, *args)
            return status

    async def close(self) -> None:
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(asyncpg.InterfaceError("the connection pool is closed"))
        idle, self._idle = self._idle, []
        for conn in idle:
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()
        self._size -= len(idle)

    def terminate(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.terminate()
        self._idle = []


class PgDatabase:
    """The pool, opened by :meth:`open`. ``dsn`` is kept only to connect. With
    ``extensions``, a server that lacks one of them is a :class:`StorageError` naming
    what to install before anything is migrated; pgvector's ``vector`` (when required)
    is read and written as numpy float32 arrays on the pooled connections."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 16,
        extensions: Sequence[str] = (),
    ) -> None:
        self._dsn = dsn
        self.extensions = tuple(extensions)
        self._vector_schema: str | None = None
        self.min_size = min_size
        self.max_size = max_size
        self._pool: ConnectionPool | None = None
        # The people this process served, with their node version as read when it was
        # last granted their lock (and as this process's own writes moved it since):
        # what the stores keep of a person is used while it is at this version. Read
        # again with each lock; between two (the reply stored after delivery) the kept
        # rows are the person's as the lock was let go.
        self.serving: dict[str, int] = {}
        # The user row of each person whose lock was just granted, as the lock's own
        # statement stored their arrival as the time last seen and read the row back:
        # the next ensure of that person takes it instead of asking (once; dropped with
        # the lock and with anything else kept of the person).
        self.granted_users: dict[str, Mapping[str, Any]] = {}
        # The people whose lock this process holds now (how many of their messages),
        # and their wait=False writes that ride on the lock's release
        # (core.storage.postgres.pending).
        self.held: dict[str, int] = {}
        self.grant: dict[str, int] = {}  # each held person's grant, numbered in turn
        self._grants = 0
        self.pending: dict[str, PendingWrites] = {}
        # Told (owner, what was written, the statement's row or None when it failed)
        # once pending writes were sent: the stores bring what they keep in line.
        self.pending_hooks: list[
            Callable[[str, PendingWrites, Mapping[str, Any] | None], Awaitable[None]]
        ] = []

        # The learned profile's counters a process keeps of the people it serves
        # (core.storage.postgres.profiles): the version they are kept at (-1: none), for
        # the lock's statement, and what that statement found when granted (the
        # person's counters version, and their counters as JSON when it differed).
        self.counters_kept: Callable[[str], int] = lambda owner: -1
        self.counters_granted: Callable[[str, int, str | None], None] = lambda *granted: None

    def __repr__(self) -> str:  # never the DSN
        return f"PgDatabase(open={self._pool is not None})"

    def served(
        self, owner: str, version: int | None, *, user: Mapping[str, Any] | None = None
    ) -> None:
        """``owner``'s lock was granted with their node version ``version`` (None: no
        user row yet, nothing is kept of them) and their user row ``user``."""
        self.serving.pop(owner, None)
        self.granted_users.pop(owner, None)
        if user is not None:
            self.granted_users[owner] = user
        if version is not None:
            if len(self.serving) >= MAX_SERVING:
                self.serving.pop(next(iter(self.serving)))  # the longest unseen
            self.serving[owner] = version

    def granted(self, owner: str) -> None:
        """This process was granted ``owner``'s lock (once more)."""
        self.held[owner] = self.held.get(owner, 0) + 1
        self._grants += 1
        self.grant[owner] = self._grants

    def releasing(self, owner: str) -> PendingWrites | None:
        """This process lets go of ``owner``'s lock: their pending writes, to send with
        the release, when it was the last of their messages here."""
        held = self.held.get(owner, 0)
        if held > 1:
            self.held[owner] = held - 1
            return None
        self.held.pop(owner, None)
        self.grant.pop(owner, None)
        return self.pending.pop(owner, None)

    def defers(self, owner: str) -> bool:
        """Whether a ``wait=False`` write of ``owner`` may wait for their lock's release."""
        return self.held.get(owner, 0) > 0

    def pending_for(self, owner: str) -> PendingWrites:
        return self.pending.setdefault(owner, PendingWrites())

    async def nodes_read(self, owner: str) -> None:
        """Before reading ``owner``'s nodes from PostgreSQL where they are not relabelled
        (:meth:`relabelled`): their pending emotion reads are sent first."""
        pending = self.pending.get(owner)
        if pending is not None and pending.emotions:
            await self.flush_pending(owner)

    def relabelled(self, owner: str, nodes: Iterable[MemoryNode]) -> None:
        """``owner``'s nodes as read from PostgreSQL, with the emotion reads this process
        has yet to send (a read sees what this process wrote)."""
        pending = self.pending.get(owner)
        if pending is None or not pending.emotions:
            return
        for node in nodes:
            read = pending.emotions.get(node.id)
            if read is not None:
                node.emotion, node.emotion_score = read

    async def flush_pending(self, owner: str | None = None) -> None:
        """Send ``owner``'s pending writes now (None: everyone's)."""
        owners = list(self.pending) if owner is None else [owner]
        for key in owners:
            pending = self.pending.pop(key, None)
            if pending is None:
                continue
            try:
                row = await self.fetchrow(FLUSH, key, *pending.args())
            except BaseException:
                await self.pending_written(key, pending, None)
                raise
            await self.pending_written(key, pending, row)

    async def pending_written(
        self, owner: str, pending: PendingWrites, row: Mapping[str, Any] | None
    ) -> None:
        for hook in self.pending_hooks:
            await hook(owner, pending, row)

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            raise StorageError("database is not open")
        return self._pool

    async def connect(self, *, wait_for_flush: bool = True) -> asyncpg.Connection:
        """A connection of its own (listening, locks), outside the pool. Without
        ``wait_for_flush`` its commits return before the log reaches the disk
        (``synchronous_commit``): only for writes nothing is acknowledged on."""
        settings = {} if wait_for_flush else _NO_FLUSH_WAIT
        with translated():
            return await asyncpg.connect(
                self._dsn,
                timeout=CONNECT_TIMEOUT_S,
                command_timeout=COMMAND_TIMEOUT_S,
                server_settings=settings,
            )

    async def open(self, migrations: Iterable[Migration]) -> None:
        try:
            conn = await self.connect()
        except StorageUnavailableError:
            raise
        except (asyncpg.PostgresError, ValueError) as exc:  # a bad DSN, a missing database
            raise StorageError(
                f"cannot open the PostgreSQL database: {type(exc).__name__}: {_safe(exc)}"
            ) from None
        try:
            with translated():
                await self._require_extensions(conn)
                await self._migrate(conn, sorted(migrations, key=lambda m: m.version))
                self._vector_schema = await conn.fetchval(
                    "SELECT n.nspname FROM pg_extension x"
                    " JOIN pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'vector'"
                )
        finally:
            await conn.close()
        self._pool = ConnectionPool(self._pooled, max_size=self.max_size)

    async def _pooled(self) -> asyncpg.Connection:
        conn = await self.connect()
        try:
            await self._init_connection(conn)
        except BaseException:
            conn.terminate()
            raise
        return conn

    async def _require_extensions(self, conn: asyncpg.Connection) -> None:
        """Every extension of ``extensions`` is in the database or can be created there;
        otherwise one line saying what to install on the server (a migration failing
        halfway would say less)."""
        if not self.extensions:
            return
        rows = await conn.fetch(
            "SELECT name FROM pg_available_extensions WHERE name = ANY($1::text[])",
            list(self.extensions),
        )
        missing = sorted(set(self.extensions) - {r[0] for r in rows})
        if not missing:
            return
        major = int(await conn.fetchval("SHOW server_version_num")) // 10000
        packages = {
            "vector": f"pgvector (Debian/Ubuntu: apt-get install postgresql-{major}-pgvector)",
            "unaccent": "the server's contrib extensions (postgresql-contrib)",
            "btree_gin": "the server's contrib extensions (postgresql-contrib)",
        }
        wanted = ", ".join(dict.fromkeys(packages.get(name, name) for name in missing))
        raise StorageError(
            f"the PostgreSQL server lacks the extension(s) {', '.join(missing)}: install"
            f" {wanted} on the database server, then start again"
        )

    async def _init_connection(self, conn: asyncpg.Connection) -> None:
        if self._vector_schema is not None:
            await conn.set_type_codec(
                "vector",
                schema=self._vector_schema,
                encoder=vector_bytes,
                decoder=vector_array,
                format="binary",
            )

    async def _migrate(self, conn: asyncpg.Connection, migrations: Sequence[Migration]) -> None:
        versions = [m.version for m in migrations]
        if len(set(versions)) != len(versions):
            raise StorageError(f"duplicate migration versions: {versions}")
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_NAMESPACE, MIGRATION_LOCK
            )
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for migration in migrations:
                if migration.version in applied:
                    continue
                log.info("applying migration %s %s", migration.version, migration.name)
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations(version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await pool.close()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                pool.terminate()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction: committed when the block ends, rolled back
        when it raises (a server that went away meanwhile: nothing was committed)."""
        with translated():
            async with self.pool.connection() as conn, conn.transaction():
                yield conn

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        with translated():
            return await self.pool.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        with translated():
            return await self.pool.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        with translated():
            return await self.pool.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        with translated():
            return await self.pool.execute(sql, *args)


def vector_bytes(vector: Any) -> bytes:
    """pgvector's binary form of a vector: its dimension (uint16), a reserved uint16,
    then float32 values, all big-endian."""
    values = np.asarray(vector, dtype=">f4").reshape(-1)
    return struct.pack(">HH", len(values), 0) + values.tobytes()


def vector_array(data: bytes) -> np.ndarray:
    """A float32 array (native order) from pgvector's binary form."""
    (dim,) = struct.unpack_from(">H", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


def _safe(exc: BaseException) -> str:
    """A driver's message without anything that looks like a connection string."""
    text = str(exc)
    return "" if "://" in text or "password" in text.lower() else text


def affected(status: str) -> int:
    """Rows a command touched, from its status line ("DELETE 3")."""
    try:
        return int(status.rsplit(" ", 1)[-1])
    except ValueError:
        return 0
