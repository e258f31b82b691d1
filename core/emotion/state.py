"""A user's emotional state and the rules that update it, one reading at a time.

Time is always the message's own timestamp (the ``at`` argument), never the wall clock,
so a history can be replayed and tested.

Rules (see :class:`EmotionRules`):

* Every reading is appended to ``emotion_history`` (bounded), even one under the
  confidence threshold: the history is a log of what was read, useful to ``/mood`` and to
  debugging. Only confident readings change the state.
* A confident ``agressivo`` reading makes the state agressivo, sets ``is_hostile`` and
  increments ``aggressive_count``.
* Calming - a confident ``feliz`` reading, or ``calming_messages`` non-aggressive
  messages in a row - clears ``is_hostile`` (and leaves the agressivo state) but keeps
  ``aggressive_count``: the bot still remembers a hostile past for agressivo's
  ``memory_days`` after the last aggressive reading (:attr:`Tone.hostile_history`).
* A confident non-neutral reading sets (or refreshes) that state. A confident neutral
  reading does not erase a remembered state: someone who was sad last week and now asks a
  plain question is still answered gently, until the state's ``memory_days`` have passed
  since the last reading that set or confirmed it; then the tone is neutro again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from core.emotion.config import EmotionalStateConfig
from core.emotion.detector import EmotionReading

NEUTRAL = "neutro"
AGGRESSIVE = "agressivo"
CALMING_LABEL = "feliz"

HOSTILE_NOTE_EN = "User has history of being demanding. Maintain firm professional tone."
HOSTILE_NOTE_PT = "O usuário tem histórico de ser exigente. Mantenha um tom firme e profissional."

# Defaults equal to the shipped config/emotional_states.toml; use
# EmotionRules.from_config to follow an edited file.
DEFAULT_MEMORY_DAYS: dict[str, float] = {
    "agressivo": 30,
    "feliz": 15,
    "triste": 20,
    "confuso": 10,
    "neutro": 0,
}


@dataclass(frozen=True)
class EmotionHistoryEntry:
    timestamp: datetime
    emotion: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp.isoformat(),
            "emotion": self.emotion,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EmotionHistoryEntry:
        return cls(
            timestamp=datetime.fromisoformat(str(data["timestamp"])),
            emotion=str(data["emotion"]),
            confidence=float(data["confidence"]),
        )


@dataclass
class EmotionalState:
    """Stored on the user profile as JSON (:meth:`to_dict` / :meth:`from_dict`)."""

    emotional_state: str = NEUTRAL
    emotion_history: list[EmotionHistoryEntry] = field(default_factory=list)
    is_hostile: bool = False
    aggressive_count: int = 0
    last_emotion_change: datetime | None = None
    emotion_confidence_score: float = 0.0
    # Non-aggressive messages in a row since the last aggressive one.
    calm_streak: int = 0
    # Last confident reading that set or confirmed ``emotional_state``: expiry counts from it.
    state_updated_at: datetime | None = None
    # Last confident aggressive reading: a hostile past is remembered from it.
    last_aggressive_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "emotional_state": self.emotional_state,
            "emotion_history": [entry.to_dict() for entry in self.emotion_history],
            "is_hostile": self.is_hostile,
            "aggressive_count": self.aggressive_count,
            "last_emotion_change": _iso(self.last_emotion_change),
            "emotion_confidence_score": self.emotion_confidence_score,
            "calm_streak": self.calm_streak,
            "state_updated_at": _iso(self.state_updated_at),
            "last_aggressive_at": _iso(self.last_aggressive_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EmotionalState:
        """Tolerant of missing keys (older profiles, or an empty ``{}``)."""
        if not data:
            return cls()
        return cls(
            emotional_state=str(data.get("emotional_state", NEUTRAL)),
            emotion_history=[
                EmotionHistoryEntry.from_dict(e) for e in data.get("emotion_history", [])
            ],
            is_hostile=bool(data.get("is_hostile", False)),
            aggressive_count=int(data.get("aggressive_count", 0)),
            last_emotion_change=_parse(data.get("last_emotion_change")),
            emotion_confidence_score=float(data.get("emotion_confidence_score", 0.0)),
            calm_streak=int(data.get("calm_streak", 0)),
            state_updated_at=_parse(data.get("state_updated_at")),
            last_aggressive_at=_parse(data.get("last_aggressive_at")),
        )


@dataclass(frozen=True)
class EmotionRules:
    confidence_threshold: float = 0.5
    calming_messages: int = 3
    history_limit: int = 50
    memory_days: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MEMORY_DAYS))

    @classmethod
    def from_config(
        cls, states: Mapping[str, EmotionalStateConfig], **overrides: Any
    ) -> EmotionRules:
        return cls(memory_days={n: s.memory_days for n, s in states.items()}, **overrides)

    def remembers(self, label: str, since: datetime | None, at: datetime) -> bool:
        """Whether a state set at ``since`` is still kept at ``at`` (strictly less than
        ``memory_days`` old; a state with 0 days is never "remembered")."""
        if since is None:
            return False
        days = self.memory_days.get(label, 0)
        return _age(at, since) < timedelta(days=days)


@dataclass(frozen=True)
class Tone:
    """What the prompt needs: the state, its internal tag and how to answer."""

    state: str
    tag: str
    instruction_pt: str
    instruction_en: str
    response_style: str
    confidence: float
    hostile_history: bool
    hostile_note_pt: str | None
    hostile_note_en: str | None

    def instruction(self, language: str) -> str:
        """The instruction in ``language`` ("pt..." or anything else = English), with the
        hostile-history note appended when it applies."""
        pt = language.lower().startswith("pt")
        text = self.instruction_pt if pt else self.instruction_en
        note = self.hostile_note_pt if pt else self.hostile_note_en
        return f"{text} {note}" if note else text


def apply_reading(
    state: EmotionalState, reading: EmotionReading, at: datetime, rules: EmotionRules
) -> EmotionalState:
    """The state after one message read as ``reading`` at message time ``at`` (pure)."""
    history = [*state.emotion_history, EmotionHistoryEntry(at, reading.label, reading.score)]
    new = replace(state, emotion_history=history[-rules.history_limit :])
    new = _expire(new, at, rules)

    confident = reading.score >= rules.confidence_threshold
    if reading.label == AGGRESSIVE:
        if not confident:
            # Unsure aggression neither calms nor inflames.
            return new
        new = _set_state(new, AGGRESSIVE, reading.score, at)
        return replace(
            new,
            is_hostile=True,
            aggressive_count=new.aggressive_count + 1,
            calm_streak=0,
            last_aggressive_at=at,
        )

    new = replace(new, calm_streak=new.calm_streak + 1)
    calmed = (confident and reading.label == CALMING_LABEL) or (
        new.calm_streak >= rules.calming_messages
    )
    if calmed and new.is_hostile:
        new = replace(new, is_hostile=False)
    if calmed and new.emotional_state == AGGRESSIVE:
        # The user calmed down: leave strict mode (the past stays in hostile_history).
        new = _set_state(new, NEUTRAL, reading.score, at)
    if not confident:
        return new
    if reading.label == NEUTRAL:
        if new.emotional_state == NEUTRAL:
            return replace(new, emotion_confidence_score=reading.score, state_updated_at=at)
        return new  # a remembered state outlives plain messages until it expires
    return _set_state(new, reading.label, reading.score, at)


def apply_correction(
    state: EmotionalState,
    predicted: str,
    corrected: str,
    at: datetime,
    *,
    misread_at: datetime | None = None,
) -> EmotionalState:
    """The state after the person said a reading was wrong (``/mood``): the state
    becomes ``corrected`` at time ``at``, fully confident, as if just read. A misread
    ``agressivo`` is taken back: one aggressive reading fewer, no hostility held for it
    (no grudge over anger that was not there). The history entry of the misread message
    (at ``misread_at``, read as ``predicted``) is relabelled; the history stays a log of
    readings, now with the person's word for that one (pure)."""
    history = list(state.emotion_history)
    if misread_at is not None:
        for index in range(len(history) - 1, -1, -1):
            entry = history[index]
            if entry.emotion == predicted and _age(entry.timestamp, misread_at) == timedelta(0):
                history[index] = EmotionHistoryEntry(entry.timestamp, corrected, 1.0)
                break
    new = replace(state, emotion_history=history)
    if predicted == AGGRESSIVE and corrected != AGGRESSIVE:
        count = max(0, new.aggressive_count - 1)
        new = replace(
            new,
            aggressive_count=count,
            is_hostile=False,
            last_aggressive_at=new.last_aggressive_at if count else None,
        )
    return _set_state(new, corrected, 1.0, at)


def current_tone(
    state: EmotionalState, at: datetime, states_config: Mapping[str, EmotionalStateConfig]
) -> Tone:
    """The tone to answer in at message time ``at``."""
    rules = EmotionRules.from_config(states_config)
    name = state.emotional_state
    if name not in states_config or (
        name != NEUTRAL and not rules.remembers(name, state.state_updated_at, at)
    ):
        name = NEUTRAL
    config = states_config[name]
    hostile = state.aggressive_count > 0 and rules.remembers(
        AGGRESSIVE,
        state.last_aggressive_at,
        at,
    )
    return Tone(
        state=name,
        tag=config.tag,
        instruction_pt=config.instruction_pt,
        instruction_en=config.instruction_en,
        response_style=config.response_style,
        confidence=state.emotion_confidence_score if name == state.emotional_state else 0.0,
        hostile_history=hostile,
        hostile_note_pt=HOSTILE_NOTE_PT if hostile else None,
        hostile_note_en=HOSTILE_NOTE_EN if hostile else None,
    )


def _set_state(state: EmotionalState, label: str, score: float, at: datetime) -> EmotionalState:
    changed = state.emotional_state != label
    return replace(
        state,
        emotional_state=label,
        emotion_confidence_score=score,
        state_updated_at=at,
        last_emotion_change=at if changed else state.last_emotion_change,
    )


def _expire(state: EmotionalState, at: datetime, rules: EmotionRules) -> EmotionalState:
    if state.emotional_state != NEUTRAL and not rules.remembers(
        state.emotional_state, state.state_updated_at, at
    ):
        state = replace(
            state,
            emotional_state=NEUTRAL,
            emotion_confidence_score=0.0,
            last_emotion_change=at,
            state_updated_at=at,
        )
    if state.is_hostile and not rules.remembers(AGGRESSIVE, state.last_aggressive_at, at):
        state = replace(state, is_hostile=False)
    return state


def _age(at: datetime, then: datetime) -> timedelta:
    # Naive timestamps are taken as UTC so stored and live values can be compared.
    if (at.tzinfo is None) != (then.tzinfo is None):
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        then = then if then.tzinfo else then.replace(tzinfo=UTC)
    return at - then


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse(value: object) -> datetime | None:
    return datetime.fromisoformat(str(value)) if value else None
