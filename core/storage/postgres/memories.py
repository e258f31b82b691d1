"""Structured memories in PostgreSQL: the rules of who may change what are
:mod:`core.storage.memory_records`' (the same for every backend); this is their SQL, with
a ``tsvector`` (accents removed, words not stemmed, as SQLite's unicode61) for search."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from core.storage.api import MemoryStore
from core.storage.memory_records import (
    MEMORY_COLUMNS,
    MEMORY_ORDER,
    Category,
    MemoryCounts,
    MemoryVersion,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemory,
    decide_upsert,
    export_memories,
    memory_from_row,
    memory_row,
    normalise_key,
    normalise_tags,
    opt_ts,
    parse_category,
    query_words,
    stated_memory,
    verified_memory,
    version_from_row,
)
from core.storage.postgres.changes import notify
from core.storage.postgres.database import PgDatabase, affected
from core.storage.records import to_ts
from core.types import parse_user_key, utcnow

COLUMNS = MEMORY_COLUMNS
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
_ORDER = MEMORY_ORDER
HISTORY_COLUMNS = (
    "memory_id, owner, version, category, key, content, tags, priority, source, verified,"
    " verified_by, confidence, expires_at, scope, valid_from, replaced_at, change"
)


memory_args = memory_row


def version_args(v: MemoryVersion, owner: str) -> tuple[Any, ...]:
    return (
        v.memory_id,
        owner,
        v.version,
        v.category.value,
        v.key,
        v.content,
        json.dumps(v.tags, ensure_ascii=False),
        v.priority.value,
        v.source.value,
        bool(v.verified),
        v.verified_by,
        v.confidence,
        opt_ts(v.expires_at),
        v.scope,
        to_ts(v.valid_from),
        to_ts(v.replaced_at),
        v.change,
    )


INSERT_MEMORY = (
    f"INSERT INTO structured_memories({COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, 18))})"
)
INSERT_VERSION = (
    f"INSERT INTO structured_memory_history({HISTORY_COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, 18))})"
    " ON CONFLICT (memory_id, version) DO UPDATE SET content = EXCLUDED.content,"
    " tags = EXCLUDED.tags, priority = EXCLUDED.priority, source = EXCLUDED.source,"
    " verified = EXCLUDED.verified, verified_by = EXCLUDED.verified_by,"
    " confidence = EXCLUDED.confidence, expires_at = EXCLUDED.expires_at,"
    " scope = EXCLUDED.scope, valid_from = EXCLUDED.valid_from,"
    " replaced_at = EXCLUDED.replaced_at, change = EXCLUDED.change"
)


def archived(m: StructuredMemory, *, replaced_at: datetime, change: str) -> MemoryVersion:
    return MemoryVersion(
        memory_id=m.id,
        version=m.version,
        category=m.category,
        key=m.key,
        content=m.content,
        tags=list(m.tags),
        priority=m.priority,
        source=m.source,
        verified=m.verified,
        verified_by=m.verified_by,
        confidence=m.confidence,
        expires_at=m.expires_at,
        scope=m.scope,
        valid_from=m.updated_at,
        replaced_at=replaced_at,
        change=change,
    )


class _Filter:
    """A WHERE clause built with numbered parameters."""

    def __init__(self, owner: str) -> None:
        self.args: list[Any] = [owner]
        self.sql = "m.owner = $1"

    def add(self, clause: str, *values: Any) -> None:
        names = []
        for value in values:
            self.args.append(value)
            names.append(f"${len(self.args)}")
        self.sql += " AND " + clause.format(*names)

    def active(self, at: datetime | None) -> None:
        if at is not None:
            self.add("(m.expires_at IS NULL OR m.expires_at > {})", to_ts(at))

    def scopes(self, scopes: Sequence[str] | None) -> None:
        if scopes is not None:
            self.add("m.scope = ANY({}::text[])", list(scopes))

    def tags(self, tags: Sequence[str]) -> None:
        for tag in tags:  # every tag given must be on the memory
            self.add("(m.tags::jsonb ? {})", tag)

    def param(self, value: Any) -> str:
        self.args.append(value)
        return f"${len(self.args)}"


class PgMemoryStore(MemoryStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

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
        while True:
            async with self.db.transaction() as conn:
                row = await conn.fetchrow(
                    f"SELECT {COLUMNS} FROM structured_memories"
                    " WHERE owner = $1 AND category = $2 AND key = $3 FOR UPDATE",
                    owner,
                    stated.category.value,
                    stated.key,
                )
                current = memory_from_row(row) if row is not None else None
                memory, outcome = decide_upsert(current, stated)
                if outcome is StoreOutcome.CREATED:
                    inserted = await conn.fetchval(
                        INSERT_MEMORY + " ON CONFLICT DO NOTHING RETURNING 1",
                        *memory_args(memory),
                    )
                    if inserted is None:
                        continue  # another process created it meanwhile: decide again
                elif outcome is StoreOutcome.UPDATED:
                    assert current is not None
                    await self._replace(conn, current, memory, now=now, change="update")
                return memory, outcome

    async def _replace(
        self,
        conn: asyncpg.Connection,
        current: StructuredMemory,
        new: StructuredMemory,
        *,
        now: datetime,
        change: str,
    ) -> None:
        await conn.execute(
            INSERT_VERSION,
            *version_args(archived(current, replaced_at=now, change=change), current.owner),
        )
        await conn.execute(
            "UPDATE structured_memories SET content = $3, tags = $4, priority = $5,"
            " source = $6, verified = $7, verified_by = $8, verified_at = $9,"
            " confidence = $10, expires_at = $11, scope = $12, updated_at = $13,"
            " version = $14 WHERE owner = $1 AND id = $2",
            new.owner,
            new.id,
            new.content,
            json.dumps(new.tags, ensure_ascii=False),
            new.priority.value,
            new.source.value,
            bool(new.verified),
            new.verified_by,
            opt_ts(new.verified_at),
            new.confidence,
            opt_ts(new.expires_at),
            new.scope,
            to_ts(new.updated_at),
            new.version,
        )

    async def verify(
        self, owner: str, memory_id: str, *, verified_by: str, at: datetime | None = None
    ) -> StructuredMemory | None:
        parse_user_key(verified_by)  # a person's key, never free text from a model
        now = at or utcnow()
        async with self.db.transaction() as conn:
            row = await conn.fetchrow(
                f"SELECT {COLUMNS} FROM structured_memories WHERE owner = $1 AND id = $2"
                " FOR UPDATE",
                owner,
                memory_id,
            )
            if row is None:
                return None
            current = memory_from_row(row)
            if current.verified:
                return current
            verified = verified_memory(current, verified_by=verified_by, now=now)
            await self._replace(conn, current, verified, now=now, change="verify")
            return verified

    async def delete(self, owner: str, memory_id: str) -> bool:
        async with self.db.transaction() as conn:
            deleted = affected(
                await conn.execute(
                    "DELETE FROM structured_memories WHERE owner = $1 AND id = $2",
                    owner,
                    memory_id,
                )
            )
            if deleted:
                await conn.execute(
                    "DELETE FROM structured_memory_history WHERE owner = $1 AND memory_id = $2",
                    owner,
                    memory_id,
                )
                await notify(conn, owner)
            return deleted > 0

    # --- reads ------------------------------------------------------------------------

    async def get(self, owner: str, memory_id: str) -> StructuredMemory | None:
        row = await self.db.fetchrow(
            f"SELECT {COLUMNS} FROM structured_memories WHERE owner = $1 AND id = $2",
            owner,
            memory_id,
        )
        return memory_from_row(row) if row is not None else None

    async def by_key(
        self, owner: str, key: str, category: Category | str | None = None
    ) -> list[StructuredMemory]:
        where = _Filter(owner)
        where.add("m.key = {}", normalise_key(key))
        if category is not None:
            where.add("m.category = {}", parse_category(category).value)
        return await self._select(where, f"ORDER BY {_ORDER}")

    async def _select(self, where: _Filter, tail: str) -> list[StructuredMemory]:
        rows = await self.db.fetch(
            f"SELECT {_M_COLUMNS} FROM structured_memories m WHERE {where.sql} {tail}",
            *where.args,
        )
        return [memory_from_row(r) for r in rows]

    async def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        rows = await self.db.fetch(
            f"SELECT {HISTORY_COLUMNS} FROM structured_memory_history"
            " WHERE owner = $1 AND memory_id = $2 ORDER BY version",
            owner,
            memory_id,
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
        where = _Filter(owner)
        where.active(at)
        where.scopes(scopes)
        tail = f"ORDER BY {_ORDER}"
        if limit is not None:
            tail += f" LIMIT {where.param(max(0, limit))}"
        tail += f" OFFSET {where.param(max(0, offset))}"
        return await self._select(where, tail)

    async def by_tag(
        self, owner: str, tag: str, *, at: datetime | None = None, limit: int = 100
    ) -> list[StructuredMemory]:
        tags = normalise_tags([tag])
        if not tags:
            return []
        where = _Filter(owner)
        where.tags(tags)
        where.active(at)
        return await self._select(where, f"ORDER BY {_ORDER} LIMIT {where.param(max(0, limit))}")

    async def expiring(
        self, owner: str, *, within_days: float, at: datetime
    ) -> list[StructuredMemory]:
        where = _Filter(owner)
        where.add(
            "m.expires_at IS NOT NULL AND m.expires_at > {} AND m.expires_at <= {}",
            to_ts(at),
            to_ts(at + timedelta(days=within_days)),
        )
        return await self._select(where, "ORDER BY m.expires_at, m.seq")

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
        terms = query_words(query)
        wanted = normalise_tags(tags)
        where = _Filter(owner)
        if terms:
            # Quoted as lexemes (''word''): nothing typed is read as query syntax.
            lexemes = " | ".join("'" + t.replace("'", "''") + "'" for t in terms)
            match = where.param(lexemes)
            where.sql += f" AND m.words @@ to_tsquery('pg_catalog.simple', akira_unaccent({match}))"
            order = f"ts_rank(m.words, to_tsquery('pg_catalog.simple', akira_unaccent({match}))) DESC, {_ORDER}"
        elif wanted:
            order = _ORDER
        else:
            return []
        where.tags(wanted)
        where.active(at)
        where.scopes(scopes)
        return await self._select(where, f"ORDER BY {order} LIMIT {where.param(max(0, limit))}")

    async def counts(self, owner: str | None = None, *, at: datetime | None = None) -> MemoryCounts:
        args: list[Any] = [to_ts(at) if at else float("inf")]
        sql = (
            "SELECT count(*), count(*) FILTER (WHERE verified),"
            " count(*) FILTER (WHERE expires_at IS NOT NULL AND expires_at <= $1)"
            " FROM structured_memories"
        )
        if owner is not None:
            sql += " WHERE owner = $2"
            args.append(owner)
        row = await self.db.fetchrow(sql, *args)
        total, verified, expired = (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
        return MemoryCounts(total, verified, total - verified, expired)

    async def owner_of(self, memory_id: str) -> str | None:
        value = await self.db.fetchval(
            "SELECT owner FROM structured_memories WHERE id = $1", memory_id
        )
        return str(value) if value is not None else None

    async def owners(self, limit: int) -> list[str]:
        rows = await self.db.fetch("SELECT DISTINCT owner FROM structured_memories LIMIT $1", limit)
        return [str(r[0]) for r in rows]

    # --- the person's data ------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        memories = await self.entries(owner)
        rows = await self.db.fetch(
            f"SELECT {HISTORY_COLUMNS} FROM structured_memory_history WHERE owner = $1"
            " ORDER BY memory_id, version",
            owner,
        )
        return export_memories(memories, [version_from_row(r) for r in rows])

    async def delete_owner(self, owner: str) -> int:
        async with self.db.transaction() as conn:
            removed = affected(
                await conn.execute("DELETE FROM structured_memories WHERE owner = $1", owner)
            )
            removed += affected(
                await conn.execute("DELETE FROM structured_memory_history WHERE owner = $1", owner)
            )
            await notify(conn, owner)
        return removed
