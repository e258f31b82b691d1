"""PostgreSQL storage (asyncpg): several bot processes, on one host or many, share one
database. ``AKIRA_STORAGE__BACKEND=postgres`` with ``AKIRA_STORAGE__POSTGRES_DSN``.

Same protocols (core.storage.api), same owner isolation, same export and forget-me as
SQLite; what the processes share is PostgreSQL's own: row locks and transactions for
concurrent writes, advisory locks for one person's messages in order
(core.storage.postgres.locks), LISTEN/NOTIFY for changes made by another process
(core.storage.postgres.changes)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from core.storage.api import OwnedData, export_parts, forget_parts
from core.storage.postgres.changes import OwnerChanges
from core.storage.postgres.database import PgDatabase
from core.storage.postgres.feedback import PgFeedbackStore
from core.storage.postgres.graph import PgGraphStore
from core.storage.postgres.locks import PersonLocks
from core.storage.postgres.memories import PgMemoryStore
from core.storage.postgres.nodes import PgNodeStore
from core.storage.postgres.profiles import PgProfileStore
from core.storage.postgres.schema import (
    FEEDBACK_MIGRATIONS,
    MIGRATIONS,
    REQUIRED_EXTENSIONS,
    VECTOR_MIGRATIONS,
)
from core.storage.postgres.users import PgUserStore
from core.storage.records import EVERY_OWNER
from core.storage.schema import Migration


class PostgresStorage:
    """The facade over one PostgreSQL database (see :class:`core.storage.api.Storage`)."""

    backend = "postgres"

    def __init__(self, dsn: str, *, pool_size: int = 16) -> None:
        self.db = PgDatabase(dsn, max_size=pool_size, extensions=REQUIRED_EXTENSIONS)
        self.users = PgUserStore(self.db)
        self.nodes = PgNodeStore(self.db)
        self.graph = PgGraphStore(self.db, nodes=self.nodes)
        self.memories = PgMemoryStore(self.db)
        self.profiles = PgProfileStore(self.db)
        # Erased in this order, users last (as SQLite: the graph before the nodes).
        self._parts: list[OwnedData] = [self.graph, self.nodes, self.memories, self.profiles]
        self._migrations: list[Migration] = [*MIGRATIONS, *VECTOR_MIGRATIONS]
        # Feedback on replies and mood corrections (the issue-24 feature, schema 70).
        self.feedback = PgFeedbackStore(self.db)
        self.register(self.feedback, FEEDBACK_MIGRATIONS)
        self.changes = OwnerChanges(self.db)
        self.locks = PersonLocks(self.db)
        self._change_listeners: list[Callable[[str], None]] = []

    def __repr__(self) -> str:  # never the DSN
        return "PostgresStorage()"

    def register(
        self, part: OwnedData | None, migrations: list[Migration] | tuple[()] = ()
    ) -> None:
        if part is not None:
            self._parts.append(part)
        self._migrations.extend(migrations)

    async def open(self) -> None:
        await self.db.open(self._migrations)
        try:
            await self.changes.start()
        except BaseException:
            await self.db.close()
            raise

    async def ping(self) -> None:
        await self.db.fetchval("SELECT 1")

    async def close(self) -> None:
        await self.locks.close()
        await self.changes.close()
        await self.db.close()

    async def __aenter__(self) -> PostgresStorage:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @contextlib.asynccontextmanager
    async def serving(
        self, owner: str, *, sent_at: datetime | None = None, message_id: str | None = None
    ) -> AsyncIterator[None]:
        async with self.locks.serving(owner, sent_at=sent_at, message_id=message_id):
            yield

    async def export_owner(self, owner: str) -> dict[str, Any]:
        return await export_parts(owner, self.users, self._parts)

    async def forget_owner(self, owner: str) -> dict[str, int]:
        return await forget_parts(owner, self.users, self._parts)

    async def catch_up(self) -> list[str]:
        owners = await self.changes.changed_owners()
        for owner in owners:
            self.drop_cached(None if owner == EVERY_OWNER else owner)
            for listener in self._change_listeners:
                listener(owner)
        return owners

    def on_changed_elsewhere(self, listener: Callable[[str], None]) -> None:
        self._change_listeners.append(listener)

    def drop_cached(self, owner: str | None) -> None:
        if owner is None:
            self.db.serving.clear()
        else:
            self.db.serving.pop(owner, None)
        self.users.drop_cached(owner)
        for part in self._parts:
            part.drop_cached(owner)


__all__ = ["PostgresStorage"]
