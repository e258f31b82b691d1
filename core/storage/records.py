"""Records kept in storage. Every record carries its owner (``platform:id``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

# Stands for every owner in the changes other processes are told of: a change to all of
# them at once (re-embedding every vector).
EVERY_OWNER = "*"


class NodeType(StrEnum):
    USER_MESSAGE = "user_message"
    AKIRA_RESPONSE = "akira_response"
    OBSERVATION = "observation"


@dataclass(frozen=True, slots=True)
class Connection:
    """A typed, weighted edge from one node to another (same owner)."""

    node_id: str
    relation_type: str  # shared_tags | follow_up | similar | reply_to | ...
    strength: float
    explanation: str = ""


@dataclass(slots=True)
class MemoryNode:
    """One remembered utterance or observation: the seed's MemoryNode plus its chat."""

    id: str
    owner: str
    content: str
    type: NodeType
    timestamp: datetime
    chat_id: str = ""
    chat_kind: str = "dm"
    scope: str = "dm"  # privacy scope: "dm", a Discord guild, a Telegram group...
    platform_message_id: str | None = None
    reply_to: str | None = None  # platform message id this one answers
    tags: list[str] = field(default_factory=list)
    emotion: str | None = None
    emotion_score: float | None = None
    source_id: str | None = None  # dedup key for imports / platform ids
    connections: list[Connection] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.timestamp.tzinfo is None:
            self.timestamp = self.timestamp.replace(tzinfo=UTC)


@dataclass(slots=True)
class UserRecord:
    key: str
    platform: str
    external_id: str
    display_name: str | None = None
    language: str | None = None
    created_at: datetime | None = None
    last_seen_at: datetime | None = None
    profile: dict[str, Any] = field(default_factory=dict)  # emotional state and more, JSON


def to_ts(value: datetime) -> float:
    """Datetimes are stored as UTC epoch seconds: sortable, compact, unambiguous."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def from_ts(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


# A row that gives its columns by name: sqlite3.Row, aiosqlite.Row, asyncpg.Record, dict.
Row = Any

# Rows as every backend stores them: times as UTC epoch seconds (sortable, exact across
# backends), tags and profiles as JSON text.


def node_from_row(row: Row) -> MemoryNode:
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


def user_from_row(row: Row) -> UserRecord:
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


def user_to_dict(user: UserRecord) -> dict[str, Any]:
    """A person's profile as their export shows it."""
    return {
        "user": user.key,
        "display_name": user.display_name,
        "language": user.language,
        "created_at": user.created_at.isoformat() if user.created_at else None,
        "last_seen_at": user.last_seen_at.isoformat() if user.last_seen_at else None,
        "profile": user.profile,
    }


# -- rows as both backends store them ------------------------------------------------

USER_COLUMNS = (
    "key, platform, external_id, display_name, language, created_at, last_seen_at, profile"
)
USER_COLUMN_NAMES = tuple(name.strip() for name in USER_COLUMNS.split(","))


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


def count_shared_tags(
    found: dict[str, tuple[int, int]], postings: Iterable[tuple[str, int]]
) -> dict[str, tuple[int, int]]:
    """GraphStore.tag_candidates' answer, added to ``found`` from tag postings (node id,
    the node's tag count), one a tag asked: each node with how many of the tags it
    shares, and its own tag count."""
    for node_id, ntags in postings:
        common, count = found.get(node_id, (0, int(ntags)))
        found[node_id] = (common + 1, count)
    return found
