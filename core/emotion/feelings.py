"""Feelings in the prompt's words: what a stored emotion label says in a recalled line
("- 7 days ago, They felt angry and said: ...") and the person's emotional trajectory of
the last weeks as one line of the emotional section.

Labels are the states' names (Portuguese in the shipped ``config/emotional_states.toml``);
the prompt is English, so the shipped ones have English words here, and a state added to
the file shows under its own name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from core.cleaner.vocabulary import TRAJECTORY_LINE_FORMAT
from core.emotion.state import NEUTRAL, EmotionHistoryEntry
from core.i18n import ago

FEELING_WORDS = {
    "agressivo": "angry",
    "feliz": "happy",
    "triste": "sad",
    "confuso": "confused",
    "neutro": "neutral",
}
# The window of the trajectory when the states say nothing longer (see trajectory_days).
TRAJECTORY_DAYS = 30
MAX_STEPS = 5  # the line names at most this many changes of feeling, the latest ones


def feeling_word(label: str) -> str:
    return FEELING_WORDS.get(label, label.replace("_", " "))


def recalled_feeling(label: str | None, score: float | None, *, threshold: float) -> str | None:
    """The feeling a recalled message carries: its stored emotion when confidently read
    and not neutral, else None (the line then says only what was said)."""
    if not label or label == NEUTRAL or (score is not None and score < threshold):
        return None
    return feeling_word(label)


def trajectory_days(memory_days: Iterable[float]) -> int:
    """The trajectory's window: as long as the longest a state is remembered (the
    shipped agressivo, 30 days), so every feeling that still sets the tone is on it."""
    return int(max(memory_days, default=0)) or TRAJECTORY_DAYS


def trajectory_line(
    history: Sequence[EmotionHistoryEntry],
    at: datetime,
    *,
    threshold: float,
    days: int = TRAJECTORY_DAYS,
) -> str | None:
    """``Their feelings over the last 30 days: angry (29 days ago) → sad (7 days ago) →
    happy (just now)``: the confident non-neutral readings of the window, a step each
    time the feeling changed (when it first showed). None when there is none."""
    since = at - timedelta(days=days)
    steps: list[tuple[str, datetime]] = []
    for entry in sorted(history, key=lambda e: e.timestamp):
        # Neutral readings are no feeling: a plain question between two sad messages
        # does not break the sadness into two steps.
        if entry.emotion == NEUTRAL or entry.confidence < threshold:
            continue
        if not since <= entry.timestamp <= at:
            continue
        if not steps or steps[-1][0] != entry.emotion:
            steps.append((entry.emotion, entry.timestamp))
    if not steps:
        return None
    shown = [
        f"{feeling_word(label)} ({ago((at - when).total_seconds(), 'en')})"
        for label, when in steps[-MAX_STEPS:]
    ]
    return TRAJECTORY_LINE_FORMAT.format(days=days, trajectory=" → ".join(shown))
