"""Feedback records, backend-free: a person's rating of one bot reply (a thumbs up or down
given as a platform reaction) and a person's correction of how the bot read their mood
(``/mood``), kept as a labelled example. Every backend stores these same records
(core.storage.api.FeedbackStore)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from core.storage.records import from_ts, to_ts

MAX_CORRECTION_TEXT_CHARS = 4000  # the misread message, as the emotion stage read it


class Rating(StrEnum):
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class ReplyRating:
    """``owner`` rated the bot reply stored as node ``node_id`` (its message
    ``message_id`` in chat ``chat_id``). Up and down are kept apart: a person may have
    both on one reply, and removing one reaction removes that rating alone."""

    owner: str
    node_id: str
    rating: Rating
    chat_id: str
    message_id: str
    emoji: str
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "rating": self.rating.value,
            "chat_id": self.chat_id,
            "message_id": self.message_id,
            "emoji": self.emoji,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class ReplyMessage:
    """One platform message the bot sent for the reply node ``node_id`` (a long reply is
    several messages): how a reaction finds the turn it rates."""

    owner: str
    chat_id: str
    message_id: str
    node_id: str
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "chat_id": self.chat_id,
            "message_id": self.message_id,
            "node_id": self.node_id,
            "at": self.at.isoformat(),
        }


def new_correction_id() -> str:
    return f"corr_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True, slots=True)
class MoodCorrection:
    """A labelled example: ``text`` (the person's message) was read as ``predicted``;
    the person said it was ``corrected``."""

    owner: str
    text: str
    predicted: str
    corrected: str
    at: datetime
    node_id: str | None = None
    predicted_score: float | None = None
    id: str = field(default_factory=new_correction_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node_id": self.node_id,
            "text": self.text,
            "predicted": self.predicted,
            "predicted_score": self.predicted_score,
            "corrected": self.corrected,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class FeedbackTotals:
    """Everyone's feedback, as numbers only (admins' ``/stats``)."""

    up: int = 0
    down: int = 0
    # Corrections by the label the bot had read (``{"agressivo": 3}``), and by the
    # label people gave instead.
    corrected_from: dict[str, int] = field(default_factory=dict)
    corrected_to: dict[str, int] = field(default_factory=dict)

    @property
    def ratings(self) -> int:
        return self.up + self.down

    @property
    def corrections(self) -> int:
        return sum(self.corrected_from.values())


# -- rows, the same on every backend (columns by name) -------------------------------------

REPLY_COLUMNS = "owner, chat_id, message_id, node_id, at"
RATING_COLUMNS = "owner, node_id, rating, chat_id, message_id, emoji, at"
CORRECTION_COLUMNS = "id, owner, node_id, text, predicted, predicted_score, corrected, at"


def reply_from_row(row: Any) -> ReplyMessage:
    return ReplyMessage(
        owner=str(row["owner"]),
        chat_id=str(row["chat_id"]),
        message_id=str(row["message_id"]),
        node_id=str(row["node_id"]),
        at=from_ts(float(row["at"])),
    )


def rating_from_row(row: Any) -> ReplyRating:
    return ReplyRating(
        owner=str(row["owner"]),
        node_id=str(row["node_id"]),
        rating=Rating(str(row["rating"])),
        chat_id=str(row["chat_id"]),
        message_id=str(row["message_id"]),
        emoji=str(row["emoji"]),
        at=from_ts(float(row["at"])),
    )


def correction_from_row(row: Any) -> MoodCorrection:
    score = row["predicted_score"]
    return MoodCorrection(
        id=str(row["id"]),
        owner=str(row["owner"]),
        node_id=None if row["node_id"] is None else str(row["node_id"]),
        text=str(row["text"]),
        predicted=str(row["predicted"]),
        predicted_score=None if score is None else float(score),
        corrected=str(row["corrected"]),
        at=from_ts(float(row["at"])),
    )


def rating_args(r: ReplyRating) -> tuple[Any, ...]:
    return (r.owner, r.node_id, r.rating.value, r.chat_id, r.message_id, r.emoji, to_ts(r.at))


def correction_args(c: MoodCorrection) -> tuple[Any, ...]:
    return (
        c.id,
        c.owner,
        c.node_id,
        c.text[:MAX_CORRECTION_TEXT_CHARS],
        c.predicted,
        c.predicted_score,
        c.corrected,
        to_ts(c.at),
    )


def totals_from_rows(ratings: Iterable[Any], corrections: Iterable[Any]) -> FeedbackTotals:
    """From ``(rating, count)`` rows and ``(predicted, corrected, count)`` rows."""
    counts = {str(row[0]): int(row[1]) for row in ratings}
    corrected_from: dict[str, int] = {}
    corrected_to: dict[str, int] = {}
    for predicted, corrected, count in corrections:
        corrected_from[str(predicted)] = corrected_from.get(str(predicted), 0) + int(count)
        corrected_to[str(corrected)] = corrected_to.get(str(corrected), 0) + int(count)
    return FeedbackTotals(
        up=counts.get(Rating.UP.value, 0),
        down=counts.get(Rating.DOWN.value, 0),
        corrected_from=corrected_from,
        corrected_to=corrected_to,
    )
