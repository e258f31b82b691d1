"""Structured memories (the Synapse model) in SQLite: schema versions 30-39.

A structured memory is a small, named fact about a person: ``identity/name: Alice``,
``project/project_synapse_status: v1.5.0 deployed``. Its ``key`` is unique within the
owner's category, so storing a key again updates it; every update first copies the earlier
version into ``structured_memory_history``, so nothing is destroyed by an update or by a
contradiction. Only an explicit delete (the person's ``/forget`` or ``/forgetme``) removes a
memory, and then its history with it: that is the person's right.

Who may change what is decided here, once, for every caller:

* a person's statement (source ``user``) is verified and wins over anything;
* the agent's proposal (source ``agent``) is unverified at confidence 0.7 and never
  overwrites a memory a person stated or verified;
* :meth:`SQLiteMemoryStore.verify` needs the key of the person who verified; nothing the
  model emits can reach it.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import aiosqlite

from core.storage.base import OwnedData
from core.storage.database import Database, Migration
from core.storage.owner_changes import record_change_in
from core.storage.records import from_ts, to_ts
from core.types import parse_user_key, utcnow


class Category(StrEnum):
    IDENTITY = "identity"
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT = "project"
    SKILL = "skill"
    MISTAKE = "mistake"
    CONTEXT = "context"
    NOTE = "note"


class Priority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for critical ... 3 for low: recall lists lower ranks first."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


class Source(StrEnum):
    USER = "user"  # the person said it (/remember): verified
    AGENT = "agent"  # the LLM proposed it: unverified until a person verifies
    TOOL = "tool"  # an import or integration
    SYSTEM = "system"  # the operator's tooling


class StoreOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"  # the earlier version went to the history
    UNCHANGED = "unchanged"  # same content stated again: nothing to record
    KEPT = "kept"  # an agent proposal that would have overwritten a person's memory


DEFAULT_CONFIDENCE = {Source.USER: 1.0, Source.AGENT: 0.7, Source.TOOL: 0.8, Source.SYSTEM: 1.0}

# Bounds on what one memory may hold: a chat bot's memory is a list of short facts, and
# anything larger is refused with a readable error instead of bloating every prompt.
MAX_KEY_CHARS = 64
MAX_CONTENT_CHARS = 2000
MAX_TAGS = 10
MAX_TAG_CHARS = 32
MAX_QUERY_CHARS = 500
MAX_QUERY_TERMS = 16


class MemoryValidationError(ValueError):
    """A key, tag, category, priority or content that cannot be stored; the message is
    fit to show to the person who typed it."""


@dataclass(slots=True)
class StructuredMemory:
    id: str  # mem_<hex>
    owner: str  # the person's memory space (Synapse's "mind"): platform:id
    category: Category
    key: str  # snake_case, unique within (owner, category)
    content: str
    tags: list[str] = field(default_factory=list)
    priority: Priority = Priority.NORMAL
    source: Source = Source.USER
    verified: bool = True
    confidence: float = 1.0
    expires_at: datetime | None = None
    scope: str = "dm"  # privacy scope it was learned in ("dm", a group's scope)
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    verified_by: str | None = None  # the person (platform:id) who verified or stated it
    verified_at: datetime | None = None
    version: int = 1

    def expired(self, at: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= at

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category.value,
            "key": self.key,
            "content": self.content,
            "tags": list(self.tags),
            "priority": self.priority.value,
            "source": self.source.value,
            "verified": self.verified,
            "verified_by": self.verified_by,
            "verified_at": _iso(self.verified_at),
            "confidence": self.confidence,
            "expires_at": _iso(self.expires_at),
            "scope": self.scope,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """An earlier version of a memory, kept when it was updated or verified."""

    memory_id: str
    version: int
    category: Category
    key: str
    content: str
    tags: list[str]
    priority: Priority
    source: Source
    verified: bool
    verified_by: str | None
    confidence: float
    expires_at: datetime | None
    scope: str
    valid_from: datetime  # when this version was written
    replaced_at: datetime  # when the next one replaced it
    change: str  # what replaced it: "update" or "verify"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "category": self.category.value,
            "key": self.key,
            "content": self.content,
            "tags": list(self.tags),
            "priority": self.priority.value,
            "source": self.source.value,
            "verified": self.verified,
            "verified_by": self.verified_by,
            "confidence": self.confidence,
            "expires_at": _iso(self.expires_at),
            "scope": self.scope,
            "valid_from": self.valid_from.isoformat(),
            "replaced_at": self.replaced_at.isoformat(),
            "change": self.change,
        }


@dataclass(frozen=True, slots=True)
class MemoryCounts:
    total: int = 0
    verified: int = 0
    unverified: int = 0
    expired: int = 0


# --- validation ---------------------------------------------------------------------------

_NON_KEY = re.compile(r"[^a-z0-9]+")
_NON_TAG = re.compile(r"[^\w.+\-]+", re.UNICODE)


def _ascii_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalise_key(raw: str) -> str:
    """``"Project Synapse-Status"`` -> ``"project_synapse_status"``; accents are folded
    (``"endereço"`` -> ``"endereco"``). Raises :class:`MemoryValidationError` when nothing
    is left or the key is longer than :data:`MAX_KEY_CHARS`."""
    if len(raw) > 4 * MAX_KEY_CHARS:
        raise MemoryValidationError(f"a key has at most {MAX_KEY_CHARS} characters")
    key = _NON_KEY.sub("_", _ascii_fold(raw).lower()).strip("_")
    if not key:
        raise MemoryValidationError("a key needs letters or digits (e.g. favourite_food)")
    if len(key) > MAX_KEY_CHARS:
        raise MemoryValidationError(f"a key has at most {MAX_KEY_CHARS} characters")
    return key


def normalise_tags(raw: Iterable[str]) -> list[str]:
    """Lowercase (case-insensitive), ``#`` dropped, spaces and punctuation to ``-``,
    duplicates removed in order. At most :data:`MAX_TAGS` of :data:`MAX_TAG_CHARS`."""
    tags: list[str] = []
    for item in raw:
        tag = _NON_TAG.sub("-", unicodedata.normalize("NFKC", str(item)).casefold().strip())
        tag = tag.strip("-#").lstrip("#")
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise MemoryValidationError(f"a tag has at most {MAX_TAG_CHARS} characters")
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise MemoryValidationError(f"at most {MAX_TAGS} tags per memory")
    return tags


def normalise_content(raw: str) -> str:
    content = raw.strip()
    if not content:
        raise MemoryValidationError("a memory needs some content")
    if len(content) > MAX_CONTENT_CHARS:
        raise MemoryValidationError(f"a memory has at most {MAX_CONTENT_CHARS} characters")
    return content


def parse_category(value: str | Category) -> Category:
    try:
        return Category(str(value).strip().lower())
    except ValueError:
        names = ", ".join(c.value for c in Category)
        raise MemoryValidationError(
            f"unknown category {str(value)[:32]!r}; use one of: {names}"
        ) from None


def parse_priority(value: str | Priority) -> Priority:
    try:
        return Priority(str(value).strip().lower())
    except ValueError:
        names = ", ".join(p.value for p in Priority)
        raise MemoryValidationError(
            f"unknown priority {str(value)[:32]!r}; use one of: {names}"
        ) from None


def fts_query(text: str) -> str | None:
    """A safe FTS5 query from free text: words only, each quoted, OR-ed, so nothing a
    person types (quotes, NEAR, column filters, ``*``) is read as FTS syntax."""
    words = re.findall(r"\w+", text[:MAX_QUERY_CHARS].casefold())
    terms = list(dict.fromkeys(w for w in words if w.strip("_")))[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def new_memory_id() -> str:
    return f"mem_{uuid.uuid4().hex[:16]}"


# --- schema ---------------------------------------------------------------------------------

MIGRATIONS = [
    Migration(
        30,
        "structured memories with history and full-text search",
        """
        CREATE TABLE structured_memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            category TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            priority TEXT NOT NULL DEFAULT 'normal',
            source TEXT NOT NULL,
            verified INTEGER NOT NULL,
            verified_by TEXT,
            verified_at REAL,
            confidence REAL NOT NULL,
            expires_at REAL,
            scope TEXT NOT NULL DEFAULT 'dm',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            UNIQUE (owner, category, key)
        );
        CREATE INDEX structured_memories_owner_updated ON structured_memories(owner, updated_at);
        CREATE INDEX structured_memories_owner_expires ON structured_memories(owner, expires_at);
        CREATE TABLE structured_memory_history (
            memory_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            version INTEGER NOT NULL,
            category TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            priority TEXT NOT NULL,
            source TEXT NOT NULL,
            verified INTEGER NOT NULL,
            verified_by TEXT,
            confidence REAL NOT NULL,
            expires_at REAL,
            scope TEXT NOT NULL,
            valid_from REAL NOT NULL,
            replaced_at REAL NOT NULL,
            change TEXT NOT NULL,
            PRIMARY KEY (memory_id, version)
        );
        CREATE INDEX structured_memory_history_owner ON structured_memory_history(owner);
        CREATE VIRTUAL TABLE structured_memories_fts USING fts5(
            key, content, tags,
            content='structured_memories', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER structured_memories_ai AFTER INSERT ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(rowid, key, content, tags)
            VALUES (new.seq, new.key, new.content, new.tags);
        END;
        CREATE TRIGGER structured_memories_ad AFTER DELETE ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(structured_memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.seq, old.key, old.content, old.tags);
        END;
        CREATE TRIGGER structured_memories_au AFTER UPDATE ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(structured_memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.seq, old.key, old.content, old.tags);
            INSERT INTO structured_memories_fts(rowid, key, content, tags)
            VALUES (new.seq, new.key, new.content, new.tags);
        END;
        """,
    )
]

_COLUMNS = (
    "id, owner, category, key, content, tags, priority, source, verified, verified_by, "
    "verified_at, confidence, expires_at, scope, created_at, updated_at, version"
)
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
_PRIORITY_ORDER = (
    "CASE m.priority WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END"
)
_ORDER = f"{_PRIORITY_ORDER}, m.updated_at DESC, m.seq DESC"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _opt_ts(value: datetime | None) -> float | None:
    return to_ts(value) if value is not None else None


def _opt_dt(value: float | None) -> datetime | None:
    return from_ts(value) if value is not None else None


def _from_row(row: aiosqlite.Row) -> StructuredMemory:
    return StructuredMemory(
        id=row["id"],
        owner=row["owner"],
        category=Category(row["category"]),
        key=row["key"],
        content=row["content"],
        tags=json.loads(row["tags"]),
        priority=Priority(row["priority"]),
        source=Source(row["source"]),
        verified=bool(row["verified"]),
        verified_by=row["verified_by"],
        verified_at=_opt_dt(row["verified_at"]),
        confidence=float(row["confidence"]),
        expires_at=_opt_dt(row["expires_at"]),
        scope=row["scope"],
        created_at=from_ts(row["created_at"]),
        updated_at=from_ts(row["updated_at"]),
        version=int(row["version"]),
    )


def _version_from_row(row: aiosqlite.Row) -> MemoryVersion:
    return MemoryVersion(
        memory_id=row["memory_id"],
        version=int(row["version"]),
        category=Category(row["category"]),
        key=row["key"],
        content=row["content"],
        tags=json.loads(row["tags"]),
        priority=Priority(row["priority"]),
        source=Source(row["source"]),
        verified=bool(row["verified"]),
        verified_by=row["verified_by"],
        confidence=float(row["confidence"]),
        expires_at=_opt_dt(row["expires_at"]),
        scope=row["scope"],
        valid_from=from_ts(row["valid_from"]),
        replaced_at=from_ts(row["replaced_at"]),
        change=row["change"],
    )


def _params(m: StructuredMemory) -> tuple[Any, ...]:
    return (
        m.id,
        m.owner,
        m.category.value,
        m.key,
        m.content,
        json.dumps(m.tags, ensure_ascii=False),
        m.priority.value,
        m.source.value,
        int(m.verified),
        m.verified_by,
        _opt_ts(m.verified_at),
        m.confidence,
        _opt_ts(m.expires_at),
        m.scope,
        to_ts(m.created_at),
        to_ts(m.updated_at),
        m.version,
    )


def _same_statement(a: StructuredMemory, b: StructuredMemory) -> bool:
    return (
        a.content == b.content
        and a.tags == b.tags
        and a.priority == b.priority
        and a.expires_at == b.expires_at
        and a.source == b.source
        and a.verified == b.verified
    )


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


class SQLiteMemoryStore(OwnedData):
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
        parse_user_key(owner)
        source = Source(source)
        now = at or utcnow()
        stated = StructuredMemory(
            id=new_memory_id(),
            owner=owner,
            category=parse_category(category),
            key=normalise_key(key),
            content=normalise_content(content),
            tags=normalise_tags(tags),
            priority=parse_priority(priority),
            source=source,
            verified=source is Source.USER,
            verified_by=owner if source is Source.USER else None,
            verified_at=now if source is Source.USER else None,
            confidence=_clamp(DEFAULT_CONFIDENCE[source] if confidence is None else confidence),
            expires_at=expires_at,
            scope=scope,
            created_at=now,
            updated_at=now,
        )
        async with self.db.transaction() as conn:
            async with conn.execute(
                f"SELECT {_COLUMNS} FROM structured_memories"
                " WHERE owner = ? AND category = ? AND key = ?",
                (owner, stated.category.value, stated.key),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                await conn.execute(
                    f"INSERT INTO structured_memories({_COLUMNS}) VALUES ({', '.join('?' * 17)})",
                    _params(stated),
                )
                return stated, StoreOutcome.CREATED
            current = _from_row(row)
            if source is Source.AGENT and (current.verified or current.source is not Source.AGENT):
                return current, StoreOutcome.KEPT
            if source is not Source.USER and current.verified:
                # A tool or system write keeps a person's verification of the same content.
                stated = replace(stated, verified=current.verified, verified_by=current.verified_by)
            if _same_statement(current, stated):
                return current, StoreOutcome.UNCHANGED
            updated = replace(
                stated,
                id=current.id,
                created_at=current.created_at,
                version=current.version + 1,
                verified_at=(stated.verified_at or current.verified_at)
                if stated.verified
                else None,
            )
            await self._archive(conn, current, replaced_at=now, change="update")
            await self._rewrite(conn, updated)
            return updated, StoreOutcome.UPDATED

    async def update(
        self,
        owner: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Iterable[str] | None = None,
        priority: Priority | str | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
        source: Source | str = Source.USER,
        at: datetime | None = None,
    ) -> StructuredMemory | None:
        """Change fields of one memory by id (None when ``owner`` has no such memory).
        The earlier version goes to the history; a person's edit makes it verified."""
        current = await self.get(owner, memory_id)
        if current is None:
            return None
        return (
            await self.upsert(
                owner,
                current.category,
                current.key,
                current.content if content is None else content,
                tags=current.tags if tags is None else tags,
                priority=current.priority if priority is None else priority,
                source=source,
                confidence=None,
                expires_at=None if clear_expiry else (expires_at or current.expires_at),
                scope=current.scope,
                at=at,
            )
        )[0]

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
            current = _from_row(row)
            if current.verified:
                return current
            verified = replace(
                current,
                verified=True,
                verified_by=verified_by,
                verified_at=now,
                confidence=1.0,
                updated_at=now,
                version=current.version + 1,
            )
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
                _opt_ts(m.expires_at),
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
                _opt_ts(m.verified_at),
                m.confidence,
                _opt_ts(m.expires_at),
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
        return _from_row(row) if row else None

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
        return [_from_row(r) for r in rows]

    async def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        """Earlier versions, oldest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM structured_memory_history WHERE owner = ? AND memory_id = ?"
            " ORDER BY version",
            (owner, memory_id),
        )
        return [_version_from_row(r) for r in rows]

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
        return [_from_row(r) for r in rows]

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
        return [_from_row(r) for r in rows]

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
        return [_from_row(r) for r in rows]

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
        return [_from_row(r) for r in rows]

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

    # --- the person's data ---------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        """Every memory, expired ones included, each with its earlier versions."""
        memories = await self.entries(owner)
        rows = await self.db.fetchall(
            "SELECT * FROM structured_memory_history WHERE owner = ? ORDER BY memory_id, version",
            (owner,),
        )
        history: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            history.setdefault(row["memory_id"], []).append(_version_from_row(row).to_dict())
        return [{**m.to_dict(), "history": history.get(m.id, [])} for m in memories]

    async def delete_owner(self, owner: str) -> int:
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM structured_memories WHERE owner = ?", (owner,))
            removed = cur.rowcount or 0
            cur = await conn.execute(
                "DELETE FROM structured_memory_history WHERE owner = ?", (owner,)
            )
            await record_change_in(conn, owner)
            return removed + (cur.rowcount or 0)


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, float(value)))
