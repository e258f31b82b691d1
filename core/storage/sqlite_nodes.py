"""SQLite users and memory nodes (schema version 1)."""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import aiosqlite

from core.background import BackgroundTasks
from core.storage.base import NodeStore, UserStore
from core.storage.database import Database, Migration
from core.storage.loading import LoadGuard
from core.storage.owner_changes import announced, record_change_in
from core.storage.records import MemoryNode, NodeType, UserRecord, from_ts, to_ts
from core.types import parse_user_key, utcnow

T = TypeVar("T")

LAST_SEEN_PRECISION_S = 60.0  # users.last_seen_at is rewritten at most this often
# Every message asks for its person's latest nodes several times (the chat's previous
# turn, the recent history, the latest node to link to, the message a reply answers).
# These many of each person's latest nodes are kept in memory, for this many nodes in all.
LATEST_PER_OWNER = 32
MAX_LATEST_NODES = 64_000
MAX_KEPT_USERS = 20_000  # users' rows kept in memory
# Writes in flight that nobody waits for (``wait=False``); more wait for a free place.
SETTLING_LIMIT = 10_000
USER_COLUMNS = (
    "key, platform, external_id, display_name, language, created_at, last_seen_at, profile"
)
_USER_COLUMN_NAMES = tuple(name.strip() for name in USER_COLUMNS.split(","))


def _user_row(row: sqlite3.Row | aiosqlite.Row | dict[str, Any]) -> dict[str, Any]:
    """A user's row as a plain dict (column -> value): kept in memory, and picklable."""
    return {name: row[name] for name in _USER_COLUMN_NAMES}


MIGRATIONS = [
    Migration(
        1,
        "users and memory nodes",
        """
        CREATE TABLE users (
            key TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            external_id TEXT NOT NULL,
            display_name TEXT,
            language TEXT,
            created_at REAL NOT NULL,
            last_seen_at REAL NOT NULL,
            profile TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL REFERENCES users(key) ON DELETE CASCADE,
            type TEXT NOT NULL,
            content TEXT NOT NULL,
            ts REAL NOT NULL,
            chat_id TEXT NOT NULL DEFAULT '',
            chat_kind TEXT NOT NULL DEFAULT 'dm',
            scope TEXT NOT NULL DEFAULT 'dm',
            platform_message_id TEXT,
            reply_to TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            emotion TEXT,
            emotion_score REAL,
            source_id TEXT
        );
        CREATE INDEX nodes_owner_ts ON nodes(owner, ts);
        CREATE INDEX nodes_owner_message ON nodes(owner, platform_message_id);
        CREATE UNIQUE INDEX nodes_owner_source ON nodes(owner, source_id) WHERE source_id IS NOT NULL;
        """,
    ),
    Migration(
        2,
        "nodes by chat",
        # A chat's latest turns without walking the person's other chats: every message
        # reads them (history, follow-ups), so they must stay an index lookup.
        "CREATE INDEX nodes_owner_chat_ts ON nodes(owner, chat_id, ts);",
    ),
]

NODE_COLUMNS = (
    "id, owner, type, content, ts, chat_id, chat_kind, scope, platform_message_id, reply_to, "
    "tags, emotion, emotion_score, source_id"
)


class NodeRow(NamedTuple):
    """A node's columns as stored, in :data:`NODE_COLUMNS` order (what the kept latest
    nodes hold: a fresh :class:`MemoryNode` is built from one for every caller)."""

    id: str
    owner: str
    type: str
    content: str
    ts: float
    chat_id: str
    chat_kind: str
    scope: str
    platform_message_id: str | None
    reply_to: str | None
    tags: str
    emotion: str | None
    emotion_score: float | None
    source_id: str | None


assert NodeRow._fields == tuple(name.strip() for name in NODE_COLUMNS.split(","))


def node_from_row(row: aiosqlite.Row | dict[str, Any]) -> MemoryNode:
    """A node from a database row (or the same columns by name)."""
    return MemoryNode(
        id=row["id"],
        owner=row["owner"],
        type=NodeType(row["type"]),
        content=row["content"],
        timestamp=from_ts(row["ts"]),
        chat_id=row["chat_id"],
        chat_kind=row["chat_kind"],
        scope=row["scope"],
        platform_message_id=row["platform_message_id"],
        reply_to=row["reply_to"],
        tags=json.loads(row["tags"]),
        emotion=row["emotion"],
        emotion_score=row["emotion_score"],
        source_id=row["source_id"],
    )


def node_params(node: MemoryNode) -> NodeRow:
    """The node's row as stored (what is inserted, and what the latest nodes keep)."""
    return NodeRow(
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


_INSERT_NODE = (
    f"INSERT OR IGNORE INTO nodes({NODE_COLUMNS}) VALUES ({', '.join('?' * len(NodeRow._fields))})"
)


def insert_node_row(raw: sqlite3.Connection, params: NodeRow) -> bool:
    """Insert a node's row (:func:`node_params`) inside the caller's :meth:`Database.run`
    transaction; False when the node is a duplicate (nothing written). Takes the row,
    not the node: it may cross to the writer process, and a tuple pickles fastest."""
    cur = raw.execute(_INSERT_NODE, params)
    return (cur.rowcount or 0) > 0


def node_to_dict(node: MemoryNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "type": node.type.value,
        "content": node.content,
        "timestamp": node.timestamp.isoformat(),
        "chat_id": node.chat_id,
        "chat_kind": node.chat_kind,
        "scope": node.scope,
        "platform_message_id": node.platform_message_id,
        "reply_to": node.reply_to,
        "tags": node.tags,
        "emotion": node.emotion,
        "emotion_score": node.emotion_score,
    }


def _swap_profile(raw: sqlite3.Connection, key: str, before: str, after: str) -> bool:
    """Store ``after`` as ``key``'s profile if it is still ``before`` (compare and set:
    the edit was made on the loop, from the row as it was read). False: someone changed
    it meanwhile, or the user is gone."""
    cur = raw.execute(
        "UPDATE users SET profile = ? WHERE key = ? AND profile = ?", (after, key, before)
    )
    return (cur.rowcount or 0) > 0


def _set_language(raw: sqlite3.Connection, key: str, language: str) -> None:
    raw.execute("UPDATE users SET language = ? WHERE key = ?", (language, key)).close()


def _upsert_user(
    raw: sqlite3.Connection,
    key: str,
    platform: str,
    external_id: str,
    display_name: str | None,
    seen: float,
) -> dict[str, Any]:
    """Create or refresh a user's row; the row as stored (a dict: it may have to cross
    to another process, which a ``sqlite3.Row`` cannot)."""
    raw.execute(
        "INSERT INTO users(key, platform, external_id, display_name, created_at, last_seen_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(key) DO UPDATE SET"
        "  display_name = COALESCE(excluded.display_name, users.display_name),"
        "  last_seen_at = MAX(users.last_seen_at, excluded.last_seen_at)",
        (key, platform, external_id, display_name, seen, seen),
    )
    return _user_row(
        raw.execute(f"SELECT {USER_COLUMNS} FROM users WHERE key = ?", (key,)).fetchone()
    )


def _set_node_emotion(
    raw: sqlite3.Connection, owner: str, node_id: str, label: str, score: float
) -> None:
    raw.execute(
        "UPDATE nodes SET emotion = ?, emotion_score = ? WHERE owner = ? AND id = ?",
        (label, score, owner, node_id),
    ).close()


class SQLiteUserStore(UserStore):
    def __init__(self, db: Database) -> None:
        self.db = db
        # Users' rows as stored (column -> value), least recently used first: every
        # message asks for its person. Every write to the table goes through this class,
        # which keeps them up to date.
        self._rows: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._loads = LoadGuard()  # a row read while a write landed may be stale: not kept
        # Profile changes made without waiting for their commit (wait=False), by person:
        # the person's next change waits for theirs. ``settle`` waits for them all.
        self._settling = BackgroundTasks(limit=SETTLING_LIMIT)
        self._settling_by_key: dict[str, asyncio.Task[None]] = {}

    @staticmethod
    def _from_row(row: aiosqlite.Row | dict[str, Any]) -> UserRecord:
        return UserRecord(
            key=row["key"],
            platform=row["platform"],
            external_id=row["external_id"],
            display_name=row["display_name"],
            language=row["language"],
            created_at=from_ts(row["created_at"]),
            last_seen_at=from_ts(row["last_seen_at"]),
            profile=json.loads(row["profile"]),
        )

    def _keep(self, key: str, row: aiosqlite.Row | dict[str, Any]) -> dict[str, Any]:
        kept = _user_row(row)
        self._rows[key] = kept
        self._rows.move_to_end(key)
        while len(self._rows) > MAX_KEPT_USERS:
            self._rows.popitem(last=False)
        return kept

    def _written(self, key: str, **values: Any) -> None:
        """A write to ``key``'s row committed: the kept row takes its new values."""
        self._loads.wrote(key)
        kept = self._rows.get(key)
        if kept is not None:
            kept.update(values)

    async def _row(self, key: str) -> dict[str, Any] | None:
        kept = self._rows.get(key)
        if kept is not None:
            self._rows.move_to_end(key)
            return kept
        row, raced = await self._loads.load(
            key,
            self.db.fetchone(
                f"SELECT {USER_COLUMNS} FROM users WHERE key = ?", (key,), lookup=True
            ),
        )
        if row is None:
            return None
        if raced:
            return _user_row(row)
        return self._keep(key, row)

    async def ensure(
        self, key: str, *, display_name: str | None = None, seen_at: datetime | None = None
    ) -> UserRecord:
        platform, external_id = parse_user_key(key)
        seen = to_ts(seen_at or utcnow())
        # Every message calls this: a known person whose name is unchanged and who was
        # seen a moment ago costs no write (and, once kept, no read).
        await self._settled(key)  # the row as last changed
        row = await self._row(key)
        if (
            row is not None
            and (display_name is None or display_name == row["display_name"])
            and 0 <= seen - row["last_seen_at"] < LAST_SEEN_PRECISION_S
        ):
            return self._from_row(row)

        upsert = functools.partial(
            _upsert_user,
            key=key,
            platform=platform,
            external_id=external_id,
            display_name=display_name,
            seen=seen,
        )
        if row is not None:
            # A known person's new name or time seen need not hold their message up: the
            # row is what the upsert makes of it, and it commits in the background (their
            # next read waits for it). A new person's row must exist before their message.
            self._behind(key, self._upsert_later(key, upsert), "last seen")
            return self._from_row(
                {
                    **row,
                    "display_name": row["display_name"] if display_name is None else display_name,
                    "last_seen_at": max(row["last_seen_at"], seen),
                }
            )
        # Upsert and read back in one round trip.
        self._rows.pop(key, None)
        stored = await self.db.run(upsert)
        assert stored is not None
        self._loads.wrote(key)
        return self._from_row(self._keep(key, stored))

    async def _upsert_later(
        self, key: str, upsert: Callable[[sqlite3.Connection], dict[str, Any]]
    ) -> None:
        try:
            stored = await self.db.run(upsert)
        except BaseException:
            self._rows.pop(key, None)  # committed or not: read it again
            raise
        self._loads.wrote(key)
        self._keep(key, stored)

    async def get(self, key: str) -> UserRecord | None:
        await self._settled(key)  # what was changed, committed
        row = await self._row(key)
        return self._from_row(row) if row else None

    async def update_profile(self, key: str, **fields: Any) -> None:
        def update(profile: dict[str, Any]) -> None:
            profile.update(fields)

        await self.change_profile_with(key, update)

    async def change_profile(
        self,
        key: str,
        field: str,
        change: Callable[[Any], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """Read-modify-write of one profile field in one transaction and one round trip:
        ``change(current value or None)`` runs on the database thread (it must be quick
        and must not await) and returns the new value, which is stored and returned.
        ``announce``: see :meth:`change_profile_with`."""

        def update(profile: dict[str, Any]) -> T:
            value = change(profile.get(field))
            profile[field] = value
            return value

        return await self.change_profile_with(key, update, announce=announce, wait=wait)

    async def change_profile_with(
        self,
        key: str,
        edit: Callable[[dict[str, Any]], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """``edit(profile)`` changes the profile in place; returns what it returns.

        The edit is made here, on the row as kept or read, and stored only if the profile
        is still the one it started from (compare and set, in the group commit); when
        another write got there first, the row is read again and the edit made again. So
        ``edit`` must be quick, must not await, and may run more than once: it must only
        change the profile it is given. (Made in the write, it would tie the write to this
        process: the writes may run in another, see core.storage.writer_process.)

        ``announce``: record the change for the other processes sharing the database, in
        the same transaction (core.storage.owner_changes), so they drop the row they keep.
        For writes that do not come from the process serving the person (an import); the
        engine's own updates need not: only that process keeps this person's row fresh
        for reading, and a write from anywhere else finds the profile changed (compare and
        set) and reads it again.

        ``wait=False``: return once the edit is made and its write queued, not committed
        (a message's emotional state: the reply needs the new state, not its commit).
        The write then settles in the background; if another write got there first, the
        edit is made again on the row as stored (what was returned came from the row as
        kept). The person's next change, or read, waits for it: they stay in order."""
        await self._settled(key)
        return await self._change(key, edit, announce=announce, wait=wait)

    async def _change(
        self, key: str, edit: Callable[[dict[str, Any]], T], *, announce: bool, wait: bool
    ) -> T:
        while True:
            row = await self._row(key)
            if row is None:
                raise KeyError(key)
            before: str = row["profile"]
            profile = json.loads(before)
            result = edit(profile)
            after = json.dumps(profile, ensure_ascii=False)
            write = self.db.run(
                announced(
                    functools.partial(_swap_profile, key=key, before=before, after=after),
                    key,
                    announce=announce,
                )
            )
            if not wait:
                self._behind(key, self._swap_later(key, write, after, edit, announce), "profile")
                return result
            if await self._swapped(key, write, after):
                return result

    async def _swapped(self, key: str, write: Awaitable[bool], after: str) -> bool:
        """Whether the compare-and-set ``write`` stored ``after``; else (changed
        meanwhile, or gone) the kept row is dropped, to be read again."""
        try:
            swapped = await write
        except BaseException:
            self._rows.pop(key, None)  # committed or not: read it again
            raise
        if swapped:
            self._written(key, profile=after)
        else:
            self._rows.pop(key, None)
        return swapped

    async def _swap_later(
        self,
        key: str,
        write: Awaitable[bool],
        after: str,
        edit: Callable[[dict[str, Any]], Any],
        announce: bool,
    ) -> None:
        if not await self._swapped(key, write, after):
            await self._change(key, edit, announce=announce, wait=True)  # on the stored row

    def _behind(self, key: str, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``work`` (a write of ``key``'s row) in the background, after the person's
        earlier such writes: one chain a person, awaited by their next change or read."""
        previous = self._settling_by_key.get(key)

        async def in_turn() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await work

        task = self._settling.spawn(in_turn(), name=f"{what} of {key}")
        self._settling_by_key[key] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._settling_by_key.get(key) is done:
                del self._settling_by_key[key]

        task.add_done_callback(forget)

    async def _settled(self, key: str) -> None:
        """Wait for ``key``'s background writes (their failures were logged)."""
        last = self._settling_by_key.get(key)
        if last is not None:
            await asyncio.wait([last])

    async def settle(self) -> None:
        """Wait for the writes made with ``wait=False`` to be committed (or to fail)."""
        await self._settling.wait_all()

    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        """``wait=False``: the write commits in the background (see change_profile_with)."""
        if not wait:
            self._behind(key, self._store_language(key, language), "language")
            return
        await self._settled(key)
        await self._store_language(key, language)

    async def _store_language(self, key: str, language: str) -> None:
        try:
            await self.db.run(functools.partial(_set_language, key=key, language=language))
        except BaseException:
            self._rows.pop(key, None)
            raise
        self._written(key, language=language)

    async def count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM users")
        return int(row[0]) if row else 0

    async def export_owner(self, owner: str) -> Any:
        user = await self.get(owner)
        if user is None:
            return None
        return {
            "user": user.key,
            "display_name": user.display_name,
            "language": user.language,
            "created_at": user.created_at.isoformat() if user.created_at else None,
            "last_seen_at": user.last_seen_at.isoformat() if user.last_seen_at else None,
            "profile": user.profile,
        }

    async def delete_owner(self, owner: str) -> int:
        await self._settled(owner)  # a write still to come would bring the row back
        self._rows.pop(owner, None)
        self._loads.wrote(owner)
        try:
            async with self.db.transaction() as conn:
                cur = await conn.execute("DELETE FROM users WHERE key = ?", (owner,))
                await record_change_in(conn, owner)
                return cur.rowcount or 0
        finally:
            self._rows.pop(owner, None)

    def drop_cached(self, owner: str | None) -> None:
        """The kept row of ``owner`` (None: every kept row) is read again when asked for;
        a read of it in flight is not kept."""
        if owner is None:
            self._rows.clear()
        else:
            self._rows.pop(owner, None)
        self._loads.wrote(owner)


@dataclass
class _LatestNodes:
    """One person's latest nodes as stored (the columns of :data:`NODE_COLUMNS`), oldest
    first, in the order SQLite sorts them (time, then insertion). ``complete``: these are
    all of the person's nodes; otherwise they are the latest ``LATEST_PER_OWNER``, and an
    answer not found among them has to come from SQLite."""

    rows: list[NodeRow] = field(default_factory=list)
    complete: bool = False

    def newest_first(self) -> Iterator[NodeRow]:
        return reversed(self.rows)

    @property
    def oldest_ts(self) -> float:
        return float(self.rows[0].ts) if self.rows else float("inf")

    def add(self, new: NodeRow) -> None:
        if any(row.id == new.id for row in self.rows):
            return  # already read from the database
        if not self.complete and self.rows and new.ts < self.rows[0].ts:
            return  # older than every kept node: not among the latest
        # A new row sorts after every stored row of the same time (its rowid is larger).
        at = len(self.rows)
        while at > 0 and self.rows[at - 1].ts > new.ts:
            at -= 1
        self.rows.insert(at, new)
        if len(self.rows) > LATEST_PER_OWNER:
            del self.rows[0]
            self.complete = False


def node_from_kept(row: NodeRow) -> MemoryNode:
    """A fresh node from kept columns (callers may change what they get)."""
    return node_from_row(row._asdict())


class SQLiteNodeStore(NodeStore):
    def __init__(self, db: Database) -> None:
        self.db = db
        # People's latest nodes (see _LatestNodes), least recently used first.
        self._latest: OrderedDict[str, _LatestNodes] = OrderedDict()
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
        cur = await conn.execute(_INSERT_NODE, node_params(node))
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

    async def _latest_of(self, owner: str) -> _LatestNodes:
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
        latest = _LatestNodes(
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
        first, from memory; None when memory cannot tell (the answer may lie among older
        nodes: ask SQLite). ``since``: rows older than that time are never wanted."""
        latest = await self._latest_of(owner)
        found: list[NodeRow] = []
        for row in latest.newest_first():
            if len(found) >= limit:
                break
            if keep(row):
                found.append(row)
        # Every node not kept is older than (or as old as) the oldest kept one.
        if (
            len(found) >= limit
            or latest.complete
            or (since is not None and latest.oldest_ts < since)
        ):
            return found
        return None

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
        allowed = set(scopes) if scopes is not None else None
        until = to_ts(before) if before is not None else None
        kept = await self.latest_matching(
            owner,
            limit,
            lambda row: (
                (allowed is None or row.scope in allowed)
                and (chat_id is None or row.chat_id == chat_id)
                and (until is None or row.ts < until)
            ),
        )
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
                _set_node_emotion, owner=owner, node_id=node_id, label=label, score=score
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
        kept = await self.latest_matching(
            owner, 1, lambda row: row.platform_message_id == platform_message_id
        )
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
