"""PostgreSQL memory nodes: every message and reply of a person. Nothing is kept in
memory: the next message of the person may reach another process."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from core.storage.api import NodeStore
from core.storage.postgres.changes import notify
from core.storage.postgres.database import PgDatabase, affected
from core.storage.records import MemoryNode, node_from_row, node_to_dict, to_ts

NODE_COLUMNS = (
    "id, owner, type, content, ts, chat_id, chat_kind, scope, platform_message_id, reply_to, "
    "tags, emotion, emotion_score, source_id"
)
INSERT_NODE = (
    f"INSERT INTO nodes({NODE_COLUMNS})"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    " ON CONFLICT DO NOTHING RETURNING seq"
)


def node_args(node: MemoryNode) -> tuple[Any, ...]:
    return (
        node.id,
        node.owner,
        node.type.value,
        node.content,
        to_ts(node.timestamp),
        node.chat_id,
        node.chat_kind,
        node.scope,
        node.platform_message_id,
        node.reply_to,
        json.dumps(node.tags, ensure_ascii=False),
        node.emotion,
        node.emotion_score,
        node.source_id,
    )


async def insert_node(conn: asyncpg.Connection, node: MemoryNode) -> int | None:
    """The node's ``seq``; None when it is a duplicate (same id, or same owner and
    ``source_id``): nothing written."""
    seq = await conn.fetchval(INSERT_NODE, *node_args(node))
    return int(seq) if seq is not None else None


class PgNodeStore(NodeStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def add(self, node: MemoryNode, *, announce: bool = False) -> bool:
        async with self.db.transaction() as conn:
            stored = await insert_node(conn, node) is not None
            if stored and announce:
                await notify(conn, node.owner)
        return stored

    async def get(self, owner: str, node_id: str) -> MemoryNode | None:
        row = await self.db.fetchrow(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND id = $2", owner, node_id
        )
        return node_from_row(row) if row is not None else None

    async def get_many(self, owner: str, node_ids: Sequence[str]) -> list[MemoryNode]:
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return []
        rows = await self.db.fetch(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND id = ANY($2::text[])",
            owner,
            ids,
        )
        found = {row["id"]: node_from_row(row) for row in rows}
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
        sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1"
        args: list[Any] = [owner]
        if scopes is not None:
            args.append(list(scopes))
            sql += f" AND scope = ANY(${len(args)}::text[])"
        if chat_id is not None:
            args.append(chat_id)
            sql += f" AND chat_id = ${len(args)}"
        if before is not None:
            args.append(to_ts(before))
            sql += f" AND ts < ${len(args)}"
        args.append(max(0, limit))
        sql += f" ORDER BY ts DESC, seq DESC LIMIT ${len(args)}"
        rows = await self.db.fetch(sql, *args)
        return [node_from_row(r) for r in reversed(rows)]

    async def count(self, owner: str | None = None) -> int:
        if owner is None:
            return int(await self.db.fetchval("SELECT count(*) FROM nodes"))
        return int(await self.db.fetchval("SELECT count(*) FROM nodes WHERE owner = $1", owner))

    async def known_sources(self, owner: str, source_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(source_ids))
        if not ids:
            return set()
        rows = await self.db.fetch(
            "SELECT source_id FROM nodes WHERE owner = $1 AND source_id = ANY($2::text[])",
            owner,
            ids,
        )
        return {row[0] for row in rows}

    async def set_emotion(
        self, owner: str, node_id: str, label: str, score: float, *, wait: bool = True
    ) -> None:
        await self.db.execute(
            "UPDATE nodes SET emotion = $3, emotion_score = $4 WHERE owner = $1 AND id = $2",
            owner,
            node_id,
            label,
            score,
        )

    async def by_platform_message(self, owner: str, platform_message_id: str) -> MemoryNode | None:
        row = await self.db.fetchrow(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND platform_message_id = $2"
            " ORDER BY ts DESC, seq DESC LIMIT 1",
            owner,
            platform_message_id,
        )
        return node_from_row(row) if row is not None else None

    async def export_owner(self, owner: str) -> Any:
        rows = await self.db.fetch(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 ORDER BY ts, seq", owner
        )
        return [node_to_dict(node_from_row(r)) for r in rows]

    async def delete_owner(self, owner: str) -> int:
        async with self.db.transaction() as conn:
            removed = affected(await conn.execute("DELETE FROM nodes WHERE owner = $1", owner))
            await notify(conn, owner)
        return removed
