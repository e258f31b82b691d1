"""Structured memories in SQLite (schema versions 30-39, see core.storage.sqlite_schema):
the records and the rules of who may change what are in :mod:`core.storage.memory_records`;
this is their SQL, with FTS5 (accents folded) for search."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import aiosqlite

from core.storage.api import MemoryStore
from core.storage.database import Database
from core.storage.memory_records import (
    DEFAULT_CONFIDENCE,
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MEMORY_COLUMNS,
    MEMORY_ORDER,
    Category,
    MemoryCounts,
    MemoryValidationError,
    MemoryVersion,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemory,
    decide_upsert,
    export_memories,
    memory_from_row,
    memory_row,
    new_memory_id,
    normalise_content,
    normalise_key,
    normalise_tags,
    opt_ts,
    parse_category,
    parse_priority,
    query_words,
    stated_memory,
    verified_memory,
    version_from_row,
)
from core.storage.owner_changes import record_change_in
from core.storage.records import to_ts
from core.storage.sqlite_schema import MEMORY_MIGRATIONS as MIGRATIONS
from core.types import parse_user_key, utcnow

__all__ = [
    "DEFAULT_CONFIDENCE",
    "MAX_CONTENT_CHARS",
    "MAX_KEY_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MIGRATIONS",
    "Category",
    "MemoryCounts",
    "MemoryValidationError",
    "MemoryVersion",
    "Priority",
    "SQLiteMemoryStore",
    "Source",
    "StoreOutcome",
    "StructuredMemory",
    "fts_query",
    "new_memory_id",
    "normalise_content",
    "normalise_key",
    "normalise_tags",
    "parse_category",
    "parse_priority",
]


def fts_query(text: str) -> str | None:
    """A safe FTS5 query from free text: words only, each quoted, OR-ed, so nothing a
    person types (quotes, NEAR, column filters, ``*``) is read as FTS syntax."""
    terms = query_words(text)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


_COLUMNS = MEMORY_COLUMNS
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
_ORDER = MEMORY_ORDER
_params = memory_row


def _scope_filter(scopes: Sequence[str] | None, params: list[Any]) -> str:
    if scopes is None:
        return ""
    if not scopes:
        return " AND 0"
    params.extend(scopes)
    return f" AND m.scope IN ({', '.join('?' * len(scopes))})"


def _tag_filter(tags: Sequence[str], params: list[Any]) -> str:
    # Every given tag must be on the memory (tags are stored normalised, so this is
    # case-insensitive once the filter is normalised too).
    sql = ""
    for tag in tags:
        sql += " AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ?)"
        params.append(tag)
    return sql


def _active_filter(at: datetime | None, params: list[Any]) -> str:
    if at is None:
        return ""
    params.append(to_ts(at))
    return " AND (m.expires_at IS NULL OR m.expires_at > ?)"


class SQLiteMemoryStore(MemoryStore):
    """Structured memories of every owner; every query filters by owner."""

    section = "memories"

    def __init__(self, db: Database) -> None:
        # Nothing is kept in memory: every read asks SQLite (so the default drop_cached,
        # which drops nothing, is right). Upserts, updates and verifications are not
        # announced to other processes for that reason; deletions are (see delete).
        self.db = db

    # --- writes ---------------------------------------------------------------------------

    async def upsert(
        self,
        owner: str,
        category: Category | str,
        key: str,
        content: str,
        *,
        tags: Iterable[str] = (),
        priority: Priority | str = Priority.NORMAL,
        source: Source | str = Source.USER,
        confidence: float | None = None,
        expires_at: datetime | None = None,
        scope: str = "dm",
        at: datetime | None = None,
    ) -> tuple[StructuredMemory, StoreOutcome]:
        """Store ``key`` in ``category`` for ``owner``: create it, or update it keeping the
        earlier version in the history. ``at`` is the message's time (default now).

        ``verified`` follows from ``source``: a person's statement (``user``) is verified
        (by that person), anything else is not; only :meth:`verify` verifies afterwards.
        An agent proposal for a key a person stated or verified is not applied (``KEPT``).
        """
        now = at or utcnow()
        stated = stated_memory(
            owner,
            category,
            key,
            content,
            tags=tags,
            priority=priority,
            source=source,
            confidence=confidence,
            expires_at=expires_at,
            scope=scope,
            now=now,
        )
        async with self.db.transaction() as conn:
            async with conn.execute(
                f"SELECT {_COLUMNS} FROM structured_memories"
                " WHERE owner = ? AND category = ? AND key = ?",
                (owner, stated.category.value, stated.key),
            ) as cur:
                row = await cur.fetchone()
            current = memory_from_row(row) if row is not None else None
            memory, outcome = decide_upsert(current, stated)
            if outcome is StoreOutcome.CREATED:
                await conn.execute(
                    f"INSERT INTO structured_memories({_COLUMNS}) VALUES ({', '.join('?' * 17)})",
                    _params(memory),
                )
            elif outcome is StoreOutcome.UPDATED:
                assert current is not None
                await self._archive(conn, current, replaced_at=now, change="update")
                await self._rewrite(conn, memory)
            return memory, outcome

    async def verify(
        self, owner: str, memory_id: str, *, verified_by: str, at: datetime | None = None
    ) -> StructuredMemory | None:
        """Mark a memory verified by the person ``verified_by`` (``platform:id``): the user
        themself or an admin. Confidence becomes 1.0; the unverified version is kept."""
        parse_user_key(verified_by)  # a person's key, never free text from a model
        now = at or utcnow()
        async with self.db.transaction() as conn:
            async with conn.execute(
                f"SELECT {_COLUMNS} FROM structured_memories WHERE owner = ? AND id = ?",
                (owner, memory_id),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                return None
            current = memory_from_row(row)
            if current.verified:
                return current
            verified = verified_memory(current, verified_by=verified_by, now=now)
            await self._archive(conn, current, replaced_at=now, change="verify")
            await self._rewrite(conn, verified)
            return verified

    async def delete(self, owner: str, memory_id: str) -> bool:
        """Remove one memory and its history (the person asked to forget it). Announced
        to the other processes in the same transaction (core.storage.owner_changes):
        nothing here keeps memories in memory, but a forgotten memory must never come
        back from a cache anywhere (an admin tool, another worker may delete it)."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM structured_memories WHERE owner = ? AND id = ?", (owner, memory_id)
            )
            deleted = (cur.rowcount or 0) > 0
            if deleted:
                await conn.execute(
                    "DELETE FROM structured_memory_history WHERE owner = ? AND memory_id = ?",
                    (owner, memory_id),
                )
                await record_change_in(conn, owner)
            return deleted

    async def _archive(
        self, conn: aiosqlite.Connection, m: StructuredMemory, *, replaced_at: datetime, change: str
    ) -> None:
        await conn.execute(
            "INSERT OR REPLACE INTO structured_memory_history(memory_id, owner, version, category,"
            " key, content, tags, priority, source, verified, verified_by, confidence, expires_at,"
            " scope, valid_from, replaced_at, change)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                m.id,
                m.owner,
                m.version,
                m.category.value,
                m.key,
                m.content,
                json.dumps(m.tags, ensure_ascii=False),
                m.priority.value,
                m.source.value,
                int(m.verified),
                m.verified_by,
                m.confidence,
                opt_ts(m.expires_at),
                m.scope,
                to_ts(m.updated_at),
                to_ts(replaced_at),
                change,
            ),
        )

    async def _rewrite(self, conn: aiosqlite.Connection, m: StructuredMemory) -> None:
        await conn.execute(
            "UPDATE structured_memories SET content = ?, tags = ?, priority = ?, source = ?,"
            " verified = ?, verified_by = ?, verified_at = ?, confidence = ?, expires_at = ?,"
            " scope = ?, updated_at = ?, version = ? WHERE owner = ? AND id = ?",
            (
                m.content,
                json.dumps(m.tags, ensure_ascii=False),
                m.priority.value,
                m.source.value,
                int(m.verified),
                m.verified_by,
                opt_ts(m.verified_at),
                m.confidence,
                opt_ts(m.expires_at),
                m.scope,
                to_ts(m.updated_at),
                m.version,
                m.owner,
                m.id,
            ),
        )

    # --- reads ------------------------------------------------------------------------------

    async def get(self, owner: str, memory_id: str) -> StructuredMemory | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM structured_memories WHERE owner = ? AND id = ?",
            (owner, memory_id),
        )
        return memory_from_row(row) if row else None

    async def by_key(
        self, owner: str, key: str, category: Category | str | None = None
    ) -> list[StructuredMemory]:
        """Memories of ``owner`` with ``key`` (one per category; one when given)."""
        params: list[Any] = [owner, normalise_key(key)]
        sql = f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE m.owner = ? AND m.key = ?"
        if category is not None:
            sql += " AND m.category = ?"
            params.append(parse_category(category).value)
        rows = await self.db.fetchall(sql + f" ORDER BY {_ORDER}", params)
        return [memory_from_row(r) for r in rows]

    async def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        """Earlier versions, oldest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM structured_memory_history WHERE owner = ? AND memory_id = ?"
            " ORDER BY version",
            (owner, memory_id),
        )
        return [version_from_row(r) for r in rows]

    async def entries(
        self,
        owner: str,
        *,
        at: datetime | None = None,
        scopes: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[StructuredMemory]:
        """Memories by priority (critical first), then most recently updated. With ``at``
        expired ones are left out; ``scopes`` limits the privacy scopes (None = all)."""
        params: list[Any] = [owner]
        sql = f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE m.owner = ?"
        sql += _active_filter(at, params) + _scope_filter(scopes, params)
        sql += f" ORDER BY {_ORDER} LIMIT ? OFFSET ?"
        params.extend([-1 if limit is None else max(0, limit), max(0, offset)])
        # Every row read is returned (and turned into an object here anyway), unless a
        # large offset skips many: then it is no lookup.
        rows = await self.db.fetchall(sql, params, lookup=offset <= 100)
        return [memory_from_row(r) for r in rows]

    async def by_tag(
        self, owner: str, tag: str, *, at: datetime | None = None, limit: int = 100
    ) -> list[StructuredMemory]:
        tags = normalise_tags([tag])
        if not tags:
            return []
        params: list[Any] = [owner]
        sql = f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE m.owner = ?"
        sql += _tag_filter(tags, params) + _active_filter(at, params)
        params.append(max(0, limit))
        rows = await self.db.fetchall(sql + f" ORDER BY {_ORDER} LIMIT ?", params)
        return [memory_from_row(r) for r in rows]

    async def expiring(
        self, owner: str, *, within_days: float, at: datetime
    ) -> list[StructuredMemory]:
        """Memories still active at ``at`` that expire within ``within_days`` days."""
        until = at + timedelta(days=within_days)
        rows = await self.db.fetchall(
            f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE m.owner = ?"
            " AND m.expires_at IS NOT NULL AND m.expires_at > ? AND m.expires_at <= ?"
            " ORDER BY m.expires_at, m.seq",
            (owner, to_ts(at), to_ts(until)),
        )
        return [memory_from_row(r) for r in rows]

    async def search(
        self,
        owner: str,
        query: str,
        *,
        tags: Sequence[str] = (),
        at: datetime | None = None,
        scopes: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[StructuredMemory]:
        """Full-text search (FTS5, accents folded) over key, content and tags, best first;
        ``tags`` requires every tag given. An empty query with tags lists by tag."""
        match = fts_query(query)
        wanted = normalise_tags(tags)
        params: list[Any] = []
        if match is None:
            if not wanted:
                return []
            sql = f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE m.owner = ?"
            params.append(owner)
            order = _ORDER
        else:
            sql = (
                f"SELECT {_M_COLUMNS} FROM structured_memories_fts f"
                " JOIN structured_memories m ON m.seq = f.rowid"
                " WHERE structured_memories_fts MATCH ? AND m.owner = ?"
            )
            params.extend([match, owner])
            order = f"bm25(structured_memories_fts), {_ORDER}"
        sql += (
            _tag_filter(wanted, params) + _active_filter(at, params) + _scope_filter(scopes, params)
        )
        params.append(max(0, limit))
        rows = await self.db.fetchall(sql + f" ORDER BY {order} LIMIT ?", params)
        return [memory_from_row(r) for r in rows]

    async def counts(self, owner: str | None = None, *, at: datetime | None = None) -> MemoryCounts:
        """Counts for one owner; ``owner=None`` counts everyone (admin statistics).
        ``expired`` needs ``at``; verified/unverified count every memory."""
        # Without ``at`` nothing counts as expired (+inf is never reached).
        params: list[Any] = [to_ts(at) if at else float("inf")]
        sql = (
            "SELECT COUNT(*), COALESCE(SUM(verified), 0),"
            " COALESCE(SUM(CASE WHEN expires_at IS NOT NULL AND expires_at <= ?"
            " THEN 1 ELSE 0 END), 0)"
            " FROM structured_memories"
        )
        if owner is not None:
            sql += " WHERE owner = ?"
            params.append(owner)
        row = await self.db.fetchone(sql, params)
        total, verified, expired = (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
        return MemoryCounts(total, verified, total - verified, expired)

    async def owner_of(self, memory_id: str) -> str | None:
        """Whose memory this id is. Admin tools only (``/verify <mem_id>``): every other
        read goes through an owner."""
        row = await self.db.fetchone(
            "SELECT owner FROM structured_memories WHERE id = ?", (memory_id,)
        )
        return str(row[0]) if row else None

    async def owners(self, limit: int) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT DISTINCT owner FROM structured_memories LIMIT ?", (limit,)
        )
        return [str(r[0]) for r in rows]

    # --- the person's data ---------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        """Every memory, expired ones included, each with its earlier versions."""
        memories = await self.entries(owner)
        rows = await self.db.fetchall(
            "SELECT * FROM structured_memory_history WHERE owner = ? ORDER BY memory_id, version",
            (owner,),
        )
        return export_memories(memories, [version_from_row(row) for row in rows])

    async def delete_owner(self, owner: str) -> int:
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM structured_memories WHERE owner = ?", (owner,))
            removed = cur.rowcount or 0
            cur = await conn.execute(
                "DELETE FROM structured_memory_history WHERE owner = ?", (owner,)
            )
            await record_change_in(conn, owner)
            return removed + (cur.rowcount or 0)
