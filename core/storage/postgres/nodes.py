"""PostgreSQL memory nodes: every message and reply of a person. The latest nodes of the
people this process serves are kept in memory (core.storage.latest_nodes), as with
SQLite, but used only while the person's node version (``users.node_version``, moved by
every write to their nodes in the same statement) is the one this process last knew,
read again each time it is granted the person's lock: the person's previous message may
have been served by another process (docs/storage.md, Caches)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from core.storage.api import NodeStore
from core.storage.latest_nodes import (
    LATEST_PER_OWNER,
    MAX_LATEST_NODES,
    LatestNodes,
    RowFilter,
    matching,
    message_rows,
    node_from_kept,
    recent_rows,
)
from core.storage.postgres.changes import CHANNEL, notify
from core.storage.postgres.database import PgDatabase, affected
from core.storage.postgres.pending import PendingWrites
from core.storage.records import (
    NODE_COLUMNS,
    MemoryNode,
    NodeRow,
    node_from_row,
    node_params,
    node_to_dict,
    to_ts,
)

INSERT_NODE = (
    f"INSERT INTO nodes({NODE_COLUMNS})"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    " ON CONFLICT DO NOTHING RETURNING seq"
)
# The person's node version moved on by a write to their nodes (``changed``: the CTE of
# that write, a row when something was written), in the write's own statement.
BUMP_VERSION = (
    "UPDATE users SET node_version = node_version + 1"
    " FROM (SELECT 1 FROM {changed} LIMIT 1) AS c WHERE users.key = $2"
    " RETURNING users.node_version"
)
_ADD = (
    f"WITH node AS ({INSERT_NODE}), bumped AS ({BUMP_VERSION.format(changed='node')}),"
    " said AS (SELECT pg_notify($16, $2) FROM node WHERE $15)"
    " SELECT seq, (SELECT node_version FROM bumped) FROM node, (SELECT count(*) FROM said) AS s"
)
_SET_EMOTION = (
    "WITH node AS (UPDATE nodes SET emotion = $3, emotion_score = $4"
    " WHERE owner = $2 AND id = $1 RETURNING 1),"
    f" bumped AS ({BUMP_VERSION.format(changed='node')})"
    " SELECT node_version FROM bumped"
)
# The person's latest nodes with the version they are at (one snapshot).
_LATEST = (
    "SELECT v.version, n.* FROM (SELECT (SELECT node_version FROM users WHERE key = $1)"
    f" AS version) AS v LEFT JOIN LATERAL (SELECT {NODE_COLUMNS}, seq FROM nodes"
    " WHERE owner = $1 ORDER BY ts DESC, seq DESC LIMIT $2) AS n ON true"
    " ORDER BY n.ts DESC, n.seq DESC"
)


def node_args(node: MemoryNode) -> tuple[Any, ...]:
    """The node's row as both backends store it (:func:`node_params`), as arguments."""
    return tuple(node_params(node))


class PgNodeStore(NodeStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        # People's latest nodes (see LatestNodes), least recently used first.
        self._latest: OrderedDict[str, LatestNodes] = OrderedDict()
        self._latest_rows = 0
        # Told (owner, version) when this process moved a person's version without
        # adding a node (an emotion read): what is kept of their vectors stays current.
        self.moved_without_node: list[Callable[[str, int], None]] = []
        # Reads a served person's latest nodes again: (version, the node's columns, seq)
        # rows, newest first (the graph store's reads what it keeps of them too).
        self.read_latest: Callable[[str, int], Awaitable[Sequence[Sequence[Any]]]] = (
            self._read_latest
        )
        db.pending_hooks.append(self._pending_written)

    async def add(self, node: MemoryNode, *, announce: bool = False) -> bool:
        row = await self.db.fetchrow(_ADD, *node_args(node), announce, CHANNEL)
        if row is None:
            return False
        self.stored(node, row[1])
        return True

    # -- the latest nodes kept in memory ----------------------------------------------

    def stored(self, node: MemoryNode, version: int | None) -> None:
        """``node`` was written by this process, moving its owner's version to
        ``version``: the kept rows take it if they were the version just before."""
        owner = node.owner
        latest = self._latest.get(owner)
        if version is None:
            self.drop_cached(owner)
            return
        if latest is not None and latest.version == version - 1:
            before = len(latest.rows)
            latest.add(node_params(node))
            latest.version = version
            self._latest_rows += len(latest.rows) - before
        elif latest is not None:
            self.drop_cached(owner)  # another process wrote too: read them again
        if owner in self.db.serving:
            self.db.serving[owner] = max(self.db.serving[owner], version)

    def retagged(self, owner: str, node_id: str, tags: str, version: int | None) -> None:
        """This process rewrote a node's tags (its row's JSON), moving its owner's
        version to ``version``."""
        if version is None:
            self.drop_cached(owner)
            return
        if owner in self.db.serving:
            self.db.serving[owner] = max(self.db.serving[owner], version)
        latest = self._latest.get(owner)
        if latest is not None and latest.version == version - 1:
            latest.retag(node_id, tags)
            latest.version = version
        elif latest is not None:
            self.drop_cached(owner)  # another process wrote too: read them again

    def drop_cached(self, owner: str | None) -> None:
        if owner is None:
            self._latest.clear()
            self._latest_rows = 0
        elif (dropped := self._latest.pop(owner, None)) is not None:
            self._latest_rows -= len(dropped.rows)

    async def latest_matching(
        self, owner: str, limit: int, keep: RowFilter, *, since: float | None = None
    ) -> list[NodeRow] | None:
        """As SQLite's (:func:`core.storage.latest_nodes.matching`) for a person this
        process serves (their version known); None otherwise (ask PostgreSQL). Kept rows
        of another version are read again, with the version they are at."""
        current = self.db.serving.get(owner)
        if current is None:
            return None
        latest = self._latest.get(owner)
        if latest is None or latest.version != current:
            self.drop_cached(owner)
            rows = await self.read_latest(owner, LATEST_PER_OWNER + 1)
            version = rows[0][0]
            kept = [NodeRow(*row[1:-1]) for row in rows if row[1] is not None]
            latest = LatestNodes(
                list(reversed(kept[:LATEST_PER_OWNER])),
                complete=len(kept) <= LATEST_PER_OWNER,
                version=version,
            )
            if (pending := self.db.pending.get(owner)) is not None and pending.emotions:
                _relabel_rows(latest, pending.emotions)
            if version is None or owner not in self.db.serving:
                return matching(latest, limit, keep, since=since)  # for this question only
            # A newer version read here is as current as anything this process knows; an
            # older one (a write of ours landed meanwhile) is read again next time.
            self.db.serving[owner] = max(self.db.serving[owner], int(version))
            self._latest[owner] = latest
            self._latest_rows += len(latest.rows)
            while self._latest_rows > MAX_LATEST_NODES and len(self._latest) > 1:
                _, dropped = self._latest.popitem(last=False)
                self._latest_rows -= len(dropped.rows)
        else:
            self._latest.move_to_end(owner)
        return matching(latest, limit, keep, since=since)

    async def _read_latest(self, owner: str, limit: int) -> Sequence[Sequence[Any]]:
        rows: list[asyncpg.Record] = await self.db.fetch(_LATEST, owner, limit)
        return rows

    async def kept_by_id(self, owner: str, node_ids: Sequence[str]) -> dict[str, NodeRow]:
        """Those of ``node_ids`` among the latest nodes kept of a person this process
        serves (current by their version); none for anyone else."""
        if await self.latest_matching(owner, 0, lambda _: False) is None:
            return {}
        latest = self._latest.get(owner)
        wanted = set(node_ids)
        return {} if latest is None else {r.id: r for r in latest.rows if r.id in wanted}

    async def get(self, owner: str, node_id: str) -> MemoryNode | None:
        row = await self.db.fetchrow(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND id = $2", owner, node_id
        )
        found = node_from_row(row) if row is not None else None
        self.db.relabelled(owner, [found] if found is not None else [])
        return found

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
        self.db.relabelled(owner, found.values())
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
        kept = await self.latest_matching(owner, limit, recent_rows(scopes, chat_id, before))
        if kept is not None:
            return [node_from_kept(row) for row in reversed(kept)]
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
        nodes = [node_from_row(r) for r in reversed(rows)]
        self.db.relabelled(owner, nodes)
        return nodes

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
        if not wait and self.db.defers(owner):
            # Stored with the release of the person's lock (core.storage.postgres.pending);
            # the rows kept here say it at once (only this process serves the person
            # until then), and the version moves when it is stored.
            self.db.pending_for(owner).emotions[node_id] = (label, score)
            self._relabel(owner, {node_id: (label, score)})
            return
        await self.db.flush_pending(owner)
        version = await self.db.fetchval(_SET_EMOTION, node_id, owner, label, score)
        if version is None:
            return
        self._moved(owner, version, 1)
        self._relabel(owner, {node_id: (label, score)})

    def _moved(self, owner: str, version: int, by: int) -> None:
        """This process moved ``owner``'s version to ``version`` by ``by`` emotion reads."""
        if by == 1:  # else what is kept of their vectors is checked again
            for moved in self.moved_without_node:
                moved(owner, version)
        if owner in self.db.serving:
            self.db.serving[owner] = max(self.db.serving[owner], version)
        latest = self._latest.get(owner)
        if latest is not None and latest.version != version - by:
            self.drop_cached(owner)  # another process wrote too: read them again
        elif latest is not None:
            latest.version = version

    def _relabel(self, owner: str, read: dict[str, tuple[str, float]]) -> None:
        latest = self._latest.get(owner)
        if latest is not None:
            _relabel_rows(latest, read)

    async def _pending_written(
        self, owner: str, pending: PendingWrites, row: Mapping[str, Any] | None
    ) -> None:
        if not pending.emotions:
            return
        if row is None or not row["emotions"]:
            self.drop_cached(owner)  # the kept rows say what was not stored
            return
        self._moved(owner, int(row["node_version"]), int(row["emotions"]))

    async def settle(self) -> None:
        await self.db.flush_pending()

    async def by_platform_message(self, owner: str, platform_message_id: str) -> MemoryNode | None:
        kept = await self.latest_matching(owner, 1, message_rows(platform_message_id))
        if kept is not None:
            return node_from_kept(kept[0]) if kept else None
        row = await self.db.fetchrow(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND platform_message_id = $2"
            " ORDER BY ts DESC, seq DESC LIMIT 1",
            owner,
            platform_message_id,
        )
        found = node_from_row(row) if row is not None else None
        self.db.relabelled(owner, [found] if found is not None else [])
        return found

    async def export_owner(self, owner: str) -> Any:
        await self.db.nodes_read(owner)
        rows = await self.db.fetch(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 ORDER BY ts, seq", owner
        )
        return [node_to_dict(node_from_row(r)) for r in rows]

    async def delete_owner(self, owner: str) -> int:
        self.drop_cached(owner)
        self.db.pending.pop(owner, None)  # nothing of them is written after this
        async with self.db.transaction() as conn:
            removed = affected(await conn.execute("DELETE FROM nodes WHERE owner = $1", owner))
            await notify(conn, owner)
        self.drop_cached(owner)
        return removed


def _relabel_rows(latest: LatestNodes, read: dict[str, tuple[str, float]]) -> None:
    """Kept rows with emotion reads (node id -> label, score)."""
    for i, row in enumerate(latest.rows):
        if row.id in read:
            label, score = read[row.id]
            latest.rows[i] = row._replace(emotion=label, emotion_score=score)
