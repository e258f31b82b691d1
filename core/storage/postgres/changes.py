"""Owner changes between processes sharing one PostgreSQL database, by LISTEN/NOTIFY.

A change of a person's data made outside the process serving them (forgetting, an
import, a deleted memory, re-embedding) sends ``NOTIFY akira_owner_changes, '<owner>'``
in the SAME transaction as the change: PostgreSQL delivers it when, and only if, the
transaction commits. Every process listens on a connection of its own and notes the
owners; :meth:`OwnerChanges.changed_owners` (through ``PostgresStorage.catch_up``, before
each message) hands them over, with no round trip to the server. A listening connection
that was lost (the server restarted) may have missed some: the next catch-up reports
:data:`EVERY_OWNER`, and a new connection listens from then on.

Why not the owner_changes table SQLite uses: rows there become visible in commit order
only because SQLite commits one writer at a time; PostgreSQL hands out sequence numbers
at insert and commits in any order, so "rows after the last seen" could skip one.
"""

from __future__ import annotations

import logging

import asyncpg

from core.storage.errors import StorageError
from core.storage.postgres.database import PgDatabase
from core.storage.records import EVERY_OWNER

log = logging.getLogger(__name__)

CHANNEL = "akira_owner_changes"
# Owners noted between two catch-ups, at most; past that everyone's caches are dropped.
MAX_PENDING = 512


async def notify(conn: asyncpg.Connection, *owners: str) -> None:
    """Announce changes of ``owners`` inside the caller's transaction."""
    for owner in dict.fromkeys(owners):
        await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, owner)


class OwnerChanges:
    """One process's listener."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._conn: asyncpg.Connection | None = None
        self._pending: dict[str, None] = {}
        self._missed = False

    async def start(self) -> None:
        conn = await self.db.connect()
        await conn.add_listener(CHANNEL, self._heard)
        conn.add_termination_listener(self._lost)
        self._conn = conn

    def _heard(self, conn: object, pid: int, channel: str, owner: str) -> None:
        if len(self._pending) >= MAX_PENDING:
            self._missed = True
        else:
            self._pending[owner] = None

    def _lost(self, conn: object) -> None:
        self._missed = True
        self._conn = None

    async def changed_owners(self) -> list[str]:
        """The owners changed since the last call; ``[EVERY_OWNER]`` when some may have
        been missed. Listens again first if the connection was lost (when the server is
        still away, says so once a catch-up and goes on)."""
        if self._conn is None or self._conn.is_closed():
            self._missed = True
            try:
                await self.start()
            except StorageError as exc:
                log.warning("not listening for other processes' changes: %s", exc)
        if self._missed:
            self._missed = False
            self._pending.clear()
            return [EVERY_OWNER]
        if not self._pending:
            return []
        owners = list(self._pending)
        self._pending.clear()
        return [EVERY_OWNER] if EVERY_OWNER in owners else owners

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()
