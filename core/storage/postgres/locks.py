"""One person's messages handled by one process at a time, in the order they arrived,
with PostgreSQL advisory locks (why a lock and not a queue: see docs/storage.md).

The usual case, nobody else serving that person, costs one ``pg_try_advisory_lock`` on
a connection this process keeps for its locks (session locks: a process that dies, even
by ``kill -9``, lets go of its locks as its connection closes). When another process
holds the person's lock, this one waits in PostgreSQL's own queue for it on a pooled
connection (``pg_advisory_lock``): waiters are granted in the order they asked, so two
messages of a person that reach two processes are handled in the order they arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator

import asyncpg

from core.storage.errors import StorageError
from core.storage.postgres.database import LOCK_NAMESPACE, PgDatabase, translated

log = logging.getLogger(__name__)


def person_key(owner: str) -> int:
    """The second int of the person's lock key (collisions only serialise two people)."""
    value = int.from_bytes(hashlib.blake2b(owner.encode(), digest_size=4).digest(), "big")
    return value - (1 << 31)  # a signed int4; 0 is the migration lock's, rarely hit


class PersonLocks:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._conn: asyncpg.Connection | None = None
        self._use = asyncio.Lock()  # one query at a time on the shared connection
        self.waits = 0  # times another process was serving the person (observability)

    async def _shared(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            # A new session: whatever the old one held was released with it.
            self._conn = await self.db.connect()
        return self._conn

    @contextlib.asynccontextmanager
    async def serving(self, owner: str) -> AsyncIterator[None]:
        key = person_key(owner)
        async with self._use:
            conn = await self._shared()
            with translated():
                got = await conn.fetchval(
                    "SELECT pg_try_advisory_lock($1, $2)", LOCK_NAMESPACE, key
                )
        if got:
            try:
                yield
            finally:
                await self._release(conn, key)
            return
        self.waits += 1
        with translated():
            waiting = await self.db.pool.acquire()
        try:
            with translated():
                await waiting.execute("SELECT pg_advisory_lock($1, $2)", LOCK_NAMESPACE, key)
            try:
                yield
            finally:
                with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    await waiting.execute("SELECT pg_advisory_unlock($1, $2)", LOCK_NAMESPACE, key)
        finally:
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await self.db.pool.release(waiting)

    async def _release(self, conn: asyncpg.Connection, key: int) -> None:
        if conn.is_closed():
            return  # the session ended: its locks went with it
        try:
            async with self._use:
                await conn.execute("SELECT pg_advisory_unlock($1, $2)", LOCK_NAMESPACE, key)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StorageError) as exc:
            log.warning(
                "could not release a person's lock (%s): closing its session", type(exc).__name__
            )
            conn.terminate()
            self._conn = None

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()
