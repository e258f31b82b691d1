"""A person's learned profile, from their counters: favourite topics and style."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.profile.decay import decayed
from core.profile.style import CommunicationStyle, describe_style
from core.storage.profile_records import ProfileCounter

# Counter kinds (core.storage.profile_records).
TOPIC = "topic"  # a topic of the taxonomy (config/topics.toml)
TAG = "tag"  # another tag the memory graph gave a message (a keyword)
STYLE = "style"
LANGUAGE = "language"

MAX_TOPICS = 5
# A topic is a favourite while its decayed count is at least this: one mention today,
# or two a half-life ago. Fainter ones have faded.
MIN_TOPIC_SCORE = 1.0
# A keyword (not a taxonomy topic) must have come up this many times to be an interest.
MIN_TAG_MENTIONS = 3


@dataclass(frozen=True, slots=True)
class FavoriteTopic:
    name: str
    score: float  # decayed count as of the profile's time
    mentions: int  # messages that mentioned it, ever
    last_at: datetime

    @property
    def label(self) -> str:
        return self.name.replace("_", " ")

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.name,
            "score": round(self.score, 3),
            "mentions": self.mentions,
            "last_mentioned_at": self.last_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class PersonProfile:
    """What was learned about a person, as of ``at``."""

    at: datetime | None
    favorite_topics: list[FavoriteTopic] = field(default_factory=list)
    style: CommunicationStyle = field(default_factory=CommunicationStyle)

    @property
    def empty(self) -> bool:
        return not self.favorite_topics and not self.style.known

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.at.isoformat() if self.at else None,
            "favorite_topics": [t.to_dict() for t in self.favorite_topics],
            "communication_style": self.style.to_dict(),
        }


def summarise(
    counters: Sequence[ProfileCounter],
    *,
    half_life_days: float,
    at: datetime | None = None,
    max_topics: int = MAX_TOPICS,
) -> PersonProfile:
    """The profile as of ``at`` (default: the person's latest message that was learned)."""
    if at is None and counters:
        at = max(c.last_at for c in counters)
    if at is None:
        return PersonProfile(None)
    topics = [
        FavoriteTopic(c.name, decayed(c.weight, at, half_life_days), int(c.total), c.last_at)
        for c in counters
        if c.kind == TOPIC or (c.kind == TAG and c.total >= MIN_TAG_MENTIONS)
    ]
    # Taxonomy topics first on a tie: they are the named interests.
    topics.sort(key=lambda t: (-round(t.score, 6), t.name))
    favorites = [t for t in topics if t.score >= MIN_TOPIC_SCORE][:max_topics]
    style = {c.name: c.weight for c in counters if c.kind == STYLE}
    languages = {c.name: c.weight for c in counters if c.kind == LANGUAGE}
    measured = next((int(c.total) for c in counters if c.kind == STYLE and c.name == "messages"), 0)
    return PersonProfile(at, favorites, describe_style(style, languages, measured))
