"""SQLite memory nodes (schema versions 1-2, see core.storage.sqlite_schema): every
message and reply of a person, with their latest kept in memory (core.storage.latest_nodes)."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import aiosqlite

from core.background import BackgroundTasks
from core.storage.api import NodeStore
from core.storage.database import Database
from core.storage.latest_nodes import (
    LATEST_PER_OWNER,
    MAX_LATEST_NODES,
    LatestNodes,
    matching,
    message_rows,
    node_from_kept,
    recent_rows,
)
from core.storage.loading import LoadGuard
from core.storage.owner_changes import announced, record_change_in
from core.storage.records import MemoryNode, node_from_row, node_to_dict, to_ts
from core.storage.sqlite_rows import (
    INSERT_NODE,
    NODE_COLUMNS,
    NodeRow,
    insert_node_row,
    node_params,
    set_node_emotion,
)
from core.storage.sqlite_schema import NODE_MIGRATIONS as MIGRATIONS
from core.storage.sqlite_users import MAX_KEPT_USERS, SETTLING_LIMIT, SQLiteUserStore

__all__ = [
    "LATEST_PER_OWNER",
    "MAX_KEPT_USERS",
    "MAX_LATEST_NODES",
    "MIGRATIONS",
    "NODE_COLUMNS",
    "NodeRow",
    "SQLiteNodeStore",
    "SQLiteUserStore",
    "insert_node_row",
    "node_from_kept",
    "node_from_row",
    "node_params",
    "node_to_dict",
]


class SQLiteNodeStore(NodeStore):
    def __init__(self, db: Database) -> None:
        self.db = db
        # People's latest nodes (see LatestNodes), least recently used first.
        self._latest: OrderedDict[str, LatestNodes] = OrderedDict()
        self._latest_rows = 0
        # A node stored while its owner's latest nodes were being read may be missing
        # from what was read: such a read is used once, not kept.
        self._loads = LoadGuard()
        self._settling = BackgroundTasks(limit=SETTLING_LIMIT)  # writes nobody waits for

    async def add(self, node: MemoryNode, *, announce: bool = False) -> bool:
        """Store a node. ``announce``: record the change for the other processes sharing
        the database, in the same transaction (core.storage.owner_changes), so they drop
        what they keep of the owner: for nodes that do not come from the process serving
        the person (imports). A new message of the person served is not announced: only
        that process keeps that person's latest nodes, and :meth:`stored` updates them."""
        params = node_params(node)
        stored = await self.db.run(
            announced(
                functools.partial(insert_node_row, params=params), node.owner, announce=announce
            )
        )
        if stored:
            self.stored(node)
        return stored

    async def insert(self, conn: aiosqlite.Connection, node: MemoryNode) -> bool:
        """Insert inside a caller's transaction (the graph adds its rows beside it)."""
        cur = await conn.execute(INSERT_NODE, node_params(node))
        # Not committed yet, and it may never be: forget what is kept of this person.
        self._forget_latest(node.owner)
        return (cur.rowcount or 0) > 0

    # -- the latest nodes kept in memory ----------------------------------------------

    def stored(self, node: MemoryNode) -> None:
        """Called once ``node`` is committed (by :meth:`add`, or by a store that inserted
        it with :func:`insert_node_row` in its own transaction)."""
        self._loads.wrote(node.owner)
        latest = self._latest.get(node.owner)
        if latest is not None:
            before = len(latest.rows)
            latest.add(node_params(node))
            self._latest_rows += len(latest.rows) - before

    def retagged(self, owner: str, node_id: str, tags: str) -> None:
        """Called once a node's tags (its row's JSON) are rewritten and committed."""
        self._loads.wrote(owner)
        latest = self._latest.get(owner)
        if latest is not None:
            latest.retag(node_id, tags)

    def drop_cached(self, owner: str | None) -> None:
        """The kept latest nodes of ``owner`` (None: of everyone) are read again when
        asked for; a read of them in flight is not kept."""
        self._forget_latest(owner)
        self._loads.wrote(owner)

    def _forget_latest(self, owner: str | None = None) -> None:
        if owner is None:
            self._latest.clear()
            self._latest_rows = 0
        elif (dropped := self._latest.pop(owner, None)) is not None:
            self._latest_rows -= len(dropped.rows)

    async def _latest_of(self, owner: str) -> LatestNodes:
        latest = self._latest.get(owner)
        if latest is not None:
            self._latest.move_to_end(owner)
            return latest
        rows, raced = await self._loads.load(
            owner,
            self.db.fetchall(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ?"
                " ORDER BY ts DESC, rowid DESC LIMIT ?",
                (owner, LATEST_PER_OWNER + 1),
                lookup=True,
            ),
        )
        latest = LatestNodes(
            [NodeRow(*row) for row in reversed(rows[:LATEST_PER_OWNER])],
            complete=len(rows) <= LATEST_PER_OWNER,
        )
        if raced:
            return latest  # a node stored meanwhile may be missing: for this question only
        self._latest[owner] = latest
        self._latest_rows += len(latest.rows)
        while self._latest_rows > MAX_LATEST_NODES and len(self._latest) > 1:
            _, dropped = self._latest.popitem(last=False)
            self._latest_rows -= len(dropped.rows)
        return latest

    async def latest_matching(
        self,
        owner: str,
        limit: int,
        keep: Callable[[NodeRow], bool],
        *,
        since: float | None = None,
    ) -> list[NodeRow] | None:
        """Up to ``limit`` of the owner's latest stored rows that ``keep`` accepts, newest
        first, from memory; None when memory cannot tell (ask SQLite): see
        :func:`core.storage.latest_nodes.matching`."""
        return matching(await self._latest_of(owner), limit, keep, since=since)

    async def known_sources(self, owner: str, source_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(source_ids))
        known: set[str] = set()
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            rows = await self.db.fetchall(
                f"SELECT source_id FROM nodes WHERE owner = ? AND source_id IN ({', '.join('?' * len(chunk))})",
                (owner, *chunk),
            )
            known.update(row[0] for row in rows)
        return known

    async def get(self, owner: str, node_id: str) -> MemoryNode | None:
        row = await self.db.fetchone(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? AND id = ?", (owner, node_id)
        )
        return node_from_row(row) if row else None

    async def get_many(self, owner: str, node_ids: Sequence[str]) -> list[MemoryNode]:
        if not node_ids:
            return []
        found: dict[str, MemoryNode] = {}
        ids = list(dict.fromkeys(node_ids))
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            rows = await self.db.fetchall(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? AND id IN ({', '.join('?' * len(chunk))})",
                (owner, *chunk),
            )
            for row in rows:
                found[row["id"]] = node_from_row(row)
        return [found[i] for i in ids if i in found]

    async def recent(
        self,
        owner: str,
        *,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        chat_id: str | None = None,
        before: datetime | None = None,
    ) -> list[MemoryNode]:
        until = to_ts(before) if before is not None else None
        kept = await self.latest_matching(owner, limit, recent_rows(scopes, chat_id, before))
        if kept is not None:
            return [node_from_kept(row) for row in reversed(kept)]
        sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ?"
        params: list[Any] = [owner]
        if scopes is not None:
            sql += f" AND scope IN ({', '.join('?' * len(scopes))})" if scopes else " AND 0"
            params.extend(scopes)
        if chat_id is not None:
            sql += " AND chat_id = ?"
            params.append(chat_id)
        if until is not None:
            sql += " AND ts < ?"
            params.append(until)
        sql += " ORDER BY ts DESC, rowid DESC LIMIT ?"
        params.append(limit)
        # Indexed by (owner, ts) and (owner, chat_id, ts); a scope filter alone may walk
        # much of the person's history, so that one goes to a reader thread.
        rows = await self.db.fetchall(sql, params, lookup=scopes is None or chat_id is not None)
        return [node_from_row(r) for r in reversed(rows)]

    async def count(self, owner: str | None = None) -> int:
        if owner is None:
            row = await self.db.fetchone("SELECT COUNT(*) FROM nodes")
        else:
            row = await self.db.fetchone("SELECT COUNT(*) FROM nodes WHERE owner = ?", (owner,))
        return int(row[0]) if row else 0

    async def set_emotion(
        self, owner: str, node_id: str, label: str, score: float, *, wait: bool = True
    ) -> None:
        """Store the emotion read in a node. ``wait=False``: return once the write is
        queued; it commits in the background (see :meth:`settle`)."""
        write = self._set_emotion(owner, node_id, label, score)
        if wait:
            await write
        else:
            self._settling.spawn(write, name=f"emotion of a node of {owner}")

    async def _set_emotion(self, owner: str, node_id: str, label: str, score: float) -> None:
        await self.db.run(
            functools.partial(
                set_node_emotion, owner=owner, node_id=node_id, label=label, score=score
            )
        )
        latest = self._latest.get(owner)
        if latest is not None:
            for i, row in enumerate(latest.rows):
                if row.id == node_id:
                    latest.rows[i] = row._replace(emotion=label, emotion_score=score)

    async def settle(self) -> None:
        """Wait for the writes made with ``wait=False`` to be committed (or to fail)."""
        await self._settling.wait_all()

    async def by_platform_message(self, owner: str, platform_message_id: str) -> MemoryNode | None:
        kept = await self.latest_matching(owner, 1, message_rows(platform_message_id))
        if kept is not None:
            return node_from_kept(kept[0]) if kept else None
        row = await self.db.fetchone(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? AND platform_message_id = ?"
            " ORDER BY ts DESC LIMIT 1",
            (owner, platform_message_id),
            lookup=True,
        )
        return node_from_row(row) if row else None

    async def export_owner(self, owner: str) -> Any:
        rows = await self.db.fetchall(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? ORDER BY ts, rowid", (owner,)
        )
        return [node_to_dict(node_from_row(r)) for r in rows]

    async def delete_owner(self, owner: str) -> int:
        self._forget_latest(owner)
        try:
            async with self.db.transaction() as conn:
                cur = await conn.execute("DELETE FROM nodes WHERE owner = ?", (owner,))
                await record_change_in(conn, owner)
                return cur.rowcount or 0
        finally:
            self._forget_latest(owner)
