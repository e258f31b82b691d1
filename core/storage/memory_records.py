"""Structured memories (the Synapse model): the records, their validation, and the rules
of who may change what; every backend's store applies them (see
:func:`decide_upsert`).

A structured memory is a small, named fact about a person: ``identity/name: Alice``,
``project/project_synapse_status: v1.5.0 deployed``. Its ``key`` is unique within the
owner's category, so storing a key again updates it; every update first copies the earlier
version into the history, so nothing is destroyed by an update or by a contradiction.
Only an explicit delete (the person's ``/forget`` or ``/forgetme``) removes a memory, and
then its history with it: that is the person's right.

Who may change what is decided here, once, for every caller and backend:

* a person's statement (source ``user``) is verified and wins over anything;
* the agent's proposal (source ``agent``) is unverified at confidence 0.7 and never
  overwrites a memory a person stated or verified;
* ``verify`` needs the key of the person who verified; nothing the model emits can
  reach it.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

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
    # NUL is the one character PostgreSQL text cannot hold; dropped on every backend alike.
    content = raw.replace("\x00", "").strip()
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


def query_words(text: str) -> list[str]:
    """The words of a free-text search (case folded, each once, at most
    :data:`MAX_QUERY_TERMS`): each backend quotes them its own way, so nothing a person
    types is read as query syntax."""
    words = re.findall(r"\w+", text[:MAX_QUERY_CHARS].casefold())
    return list(dict.fromkeys(w for w in words if w.strip("_")))[:MAX_QUERY_TERMS]


def new_memory_id() -> str:
    return f"mem_{uuid.uuid4().hex[:16]}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _same_statement(a: StructuredMemory, b: StructuredMemory) -> bool:
    return (
        a.content == b.content
        and a.tags == b.tags
        and a.priority == b.priority
        and a.expires_at == b.expires_at
        and a.source == b.source
        and a.verified == b.verified
    )


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


# A row that gives its columns by name: sqlite3.Row, aiosqlite.Row, asyncpg.Record, dict.
Row = Any

# Rows as every backend stores them: times as UTC epoch seconds, tags as a JSON array.


def opt_ts(value: datetime | None) -> float | None:
    return to_ts(value) if value is not None else None


def opt_dt(value: float | None) -> datetime | None:
    return from_ts(value) if value is not None else None


def memory_from_row(row: Row) -> StructuredMemory:
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
        verified_at=opt_dt(row["verified_at"]),
        confidence=float(row["confidence"]),
        expires_at=opt_dt(row["expires_at"]),
        scope=row["scope"],
        created_at=from_ts(row["created_at"]),
        updated_at=from_ts(row["updated_at"]),
        version=int(row["version"]),
    )


def version_from_row(row: Row) -> MemoryVersion:
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
        expires_at=opt_dt(row["expires_at"]),
        scope=row["scope"],
        valid_from=from_ts(row["valid_from"]),
        replaced_at=from_ts(row["replaced_at"]),
        change=row["change"],
    )


def stated_memory(
    owner: str,
    category: Category | str,
    key: str,
    content: str,
    *,
    tags: Iterable[str],
    priority: Priority | str,
    source: Source | str,
    confidence: float | None,
    expires_at: datetime | None,
    scope: str,
    now: datetime,
) -> StructuredMemory:
    """What an upsert states, validated (raises :class:`MemoryValidationError`).
    ``verified`` follows from ``source``: a person's statement (``user``) is verified (by
    that person), anything else is not."""
    parse_user_key(owner)
    source = Source(source)
    return StructuredMemory(
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


def decide_upsert(
    current: StructuredMemory | None, stated: StructuredMemory
) -> tuple[StructuredMemory, StoreOutcome]:
    """What storing ``stated`` over ``current`` (the stored memory of the same owner,
    category and key, None when there is none) gives: the memory as it is to be stored
    (or stays) and the outcome. On ``UPDATED`` the store archives ``current`` first."""
    if current is None:
        return stated, StoreOutcome.CREATED
    source = stated.source
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
        verified_at=(stated.verified_at or current.verified_at) if stated.verified else None,
    )
    return updated, StoreOutcome.UPDATED


def verified_memory(
    current: StructuredMemory, *, verified_by: str, now: datetime
) -> StructuredMemory:
    """``current`` verified by the person ``verified_by`` (``platform:id``, checked):
    confidence 1.0, a new version."""
    parse_user_key(verified_by)  # a person's key, never free text from a model
    return replace(
        current,
        verified=True,
        verified_by=verified_by,
        verified_at=now,
        confidence=1.0,
        updated_at=now,
        version=current.version + 1,
    )


def export_memories(
    memories: Iterable[StructuredMemory], versions: Iterable[MemoryVersion]
) -> list[dict[str, Any]]:
    """The export of a person's memories: each with its earlier versions, oldest first."""
    history: dict[str, list[dict[str, Any]]] = {}
    for version in sorted(versions, key=lambda v: (v.memory_id, v.version)):
        history.setdefault(version.memory_id, []).append(version.to_dict())
    return [{**m.to_dict(), "history": history.get(m.id, [])} for m in memories]


# -- rows as both backends store them ------------------------------------------------

MEMORY_COLUMNS = (
    "id, owner, category, key, content, tags, priority, source, verified, verified_by, "
    "verified_at, confidence, expires_at, scope, created_at, updated_at, version"
)
# Critical first, then most recently updated (then latest stored), on both backends.
MEMORY_ORDER = (
    "CASE m.priority WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,"
    " m.updated_at DESC, m.seq DESC"
)


def memory_row(m: StructuredMemory) -> tuple[Any, ...]:
    """A memory's row as stored, in :data:`MEMORY_COLUMNS` order (``verified`` a bool:
    SQLite stores it as 1 or 0)."""
    return (
        m.id,
        m.owner,
        m.category.value,
        m.key,
        m.content,
        json.dumps(m.tags, ensure_ascii=False),
        m.priority.value,
        m.source.value,
        bool(m.verified),
        m.verified_by,
        opt_ts(m.verified_at),
        m.confidence,
        opt_ts(m.expires_at),
        m.scope,
        to_ts(m.created_at),
        to_ts(m.updated_at),
        m.version,
    )
