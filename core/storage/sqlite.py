"""The SQLite storage facade: one database file, every part of a person's data."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from core.storage.api import OwnedData, export_parts, forget_parts
from core.storage.database import Database
from core.storage.owner_changes import EVERY_OWNER, OwnerChanges
from core.storage.schema import Migration
from core.storage.sqlite_feedback import SQLiteFeedbackStore
from core.storage.sqlite_graph import SQLiteGraphStore
from core.storage.sqlite_memories import SQLiteMemoryStore
from core.storage.sqlite_nodes import SQLiteNodeStore
from core.storage.sqlite_profiles import SQLiteProfileStore
from core.storage.sqlite_schema import (
    CHANGE_MIGRATIONS,
    FEEDBACK_MIGRATIONS,
    GRAPH_MIGRATIONS,
    MEMORY_MIGRATIONS,
    NODE_MIGRATIONS,
    PROFILE_MIGRATIONS,
)
from core.storage.sqlite_users import SQLiteUserStore


class SQLiteStorage:
    """Opens the database, applies every part's migrations, and answers the questions
    that span parts: export everything about a person, forget a person.

    Parts (users, nodes, graph, structured memories...) are registered before ``open``;
    each one filters by owner itself.
    """

    def __init__(self, path: Path | str, *, writer_process: bool = False) -> None:
        self.db = Database(path, writer_process=writer_process)
        self.users = SQLiteUserStore(self.db)
        self.nodes = SQLiteNodeStore(self.db)
        self._parts: list[OwnedData] = []
        self._migrations: list[Migration] = []
        # The memory graph (vectors, links, full-text index); erased before the nodes.
        self.graph = SQLiteGraphStore(self.db, self.nodes)
        self.register(self.graph, GRAPH_MIGRATIONS)
        self.register(self.nodes, NODE_MIGRATIONS)
        self.memories = SQLiteMemoryStore(self.db)
        self.register(self.memories, MEMORY_MIGRATIONS)
        # Feedback on replies and mood corrections (schema 70).
        self.feedback = SQLiteFeedbackStore(self.db)
        self.register(self.feedback, FEEDBACK_MIGRATIONS)
        # What is learned about a person (core.profile), erased whatever is switched on.
        self.profiles = SQLiteProfileStore(self.db)
        self.register(self.profiles, PROFILE_MIGRATIONS)
        # Changes other processes made to people's data (see catch_up).
        self.changes = OwnerChanges(self.db)
        self.register(None, CHANGE_MIGRATIONS)
        # Told of each owner catch_up finds changed (EVERY_OWNER: everyone), after the
        # caches: what is kept outside storage (background work's tokens).
        self._change_listeners: list[Callable[[str], None]] = []

    backend = "sqlite"

    @property
    def path(self) -> Path:
        return self.db.path

    @contextlib.asynccontextmanager
    async def serving(
        self, owner: str, *, sent_at: datetime | None = None, message_id: str | None = None
    ) -> AsyncIterator[None]:
        """Nothing to hold: one process serves a person (the engine keeps their
        messages in order; engine workers shard people by owner, core.workers)."""
        yield

    def register(
        self, part: OwnedData | None, migrations: list[Migration] | tuple[()] = ()
    ) -> None:
        """Add a part with its schema. Parts are erased in registration order, users last."""
        if part is not None:
            self._parts.append(part)
        self._migrations.extend(migrations)

    async def open(self) -> None:
        await self.db.open(self._migrations)
        await self.changes.start()

    async def ping(self) -> None:
        await self.db.fetchone("SELECT 1")

    async def close(self) -> None:
        # Writes nobody waited for (a message's emotional state) are committed first.
        await self.users.settle()
        await self.nodes.settle()
        await self.db.close()

    async def __aenter__(self) -> SQLiteStorage:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def export_owner(self, owner: str) -> dict[str, Any]:
        """Everything stored about ``owner``, as JSON-ready data."""
        return await export_parts(owner, self.users, self._parts)

    async def catch_up(self) -> list[str]:
        """Drop what this process keeps about the people whose data another process
        changed since the last call (``akira-bot memory forget``/``import`` beside the
        running bot, another engine worker); returns them (``[EVERY_OWNER]``: everyone's
        was dropped), empty when nothing changed. Call it before serving each message: a
        forgotten person's turns must not reach a prompt from a cache.

        Cheap when nothing changed: one primary-key lookup on the event loop's read
        connection, with no hop to a thread (see core.storage.owner_changes)."""
        owners = await self.changes.changed_owners()
        for owner in owners:
            self.drop_cached(None if owner == EVERY_OWNER else owner)
            for listener in self._change_listeners:
                listener(owner)
        return owners

    def on_changed_elsewhere(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` for each owner a later :meth:`catch_up` finds changed by
        another process (``EVERY_OWNER``: everyone's data)."""
        self._change_listeners.append(listener)

    def drop_cached(self, owner: str | None) -> None:
        """Forget what every part keeps in memory about ``owner`` (None: everyone)."""
        self.users.drop_cached(owner)
        for part in self._parts:
            part.drop_cached(owner)

    async def forget_owner(self, owner: str) -> dict[str, int]:
        """Erase everything about ``owner``; returns how many rows each part removed.
        Each part's erasure is announced to the other processes in its own transaction
        (they drop their caches of ``owner`` at their next :meth:`catch_up`)."""
        return await forget_parts(owner, self.users, self._parts)
