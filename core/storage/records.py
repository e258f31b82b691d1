"""Records kept in storage. Every record carries its owner (``platform:id``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


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
