"""``/mood`` with words: the person corrects how the bot read them.

Forms (Portuguese or English, accents and case ignored):

- ``/mood feliz`` / ``/mood happy``: "I was happy" — the latest message of theirs that
  was read is relabelled ``feliz``;
- ``/mood não irritado`` / ``/mood not angry`` (or a sentence: ``/mood eu não estava
  irritado``, ``/mood I wasn't angry``): "I wasn't angry" — the latest message read as
  ``agressivo`` is relabelled ``neutro``;
- both in one sentence (``/mood não estava irritado, estava triste``): that message is
  relabelled ``triste``.

What a correction does: the emotional state becomes what the person said (see
:func:`core.emotion.state.apply_correction`: a misread anger is taken back, no grudge
held), the message's stored emotion is corrected, and a labelled example is kept in
``storage.feedback`` (the message's text, the label read, the label given): the
person's export lists it, ``/forgetme`` erases it, admins' ``/stats`` counts them. A
sentence naming no state (or two states it cannot tell apart) gets the usage; nothing
changes then.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from akira_bot.commands.texts import state_name, tr
from core.commands import CommandResult, UsageError
from core.emotion.state import AGGRESSIVE, NEUTRAL, EmotionalState, apply_correction
from core.pipeline import TurnContext
from core.stages.emotion import PROFILE_KEY
from core.storage.feedback_records import MoodCorrection
from core.storage.records import MemoryNode, NodeType
from core.types import Reply, ReplyKind

log = logging.getLogger(__name__)

# How far back the misread message is looked for (the person's latest nodes).
LOOK_BACK_NODES = 200

# Words for each state (accents folded, lower case). Kept small and unambiguous.
STATE_WORDS: dict[str, tuple[str, ...]] = {
    AGGRESSIVE: (
        "agressivo", "agressiva", "irritado", "irritada", "bravo", "brava", "zangado",
        "zangada", "nervoso", "nervosa", "raiva", "angry", "aggressive", "irritated",
        "mad", "annoyed",
    ),
    "feliz": ("feliz", "alegre", "contente", "happy", "glad", "cheerful"),
    "triste": ("triste", "chateado", "chateada", "sad", "upset", "unhappy"),
    "confuso": ("confuso", "confusa", "perdido", "perdida", "confused", "lost"),
    NEUTRAL: (
        "neutro", "neutra", "normal", "tranquilo", "tranquila", "calmo", "calma",
        "neutral", "calm", "fine",
    ),
}  # fmt: skip
_STATE_OF = {word: state for state, words in STATE_WORDS.items() for word in words}
NEGATIONS = frozenset(
    {"nao", "nem", "nunca", "not", "never", "wasnt", "werent", "isnt", "aint", "dont"}
)
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class MoodClaim:
    """What the person said: ``denied`` (a state they were not) and/or ``stated`` (the
    state they were)."""

    denied: str | None = None
    stated: str | None = None

    @property
    def corrected(self) -> str:
        return self.stated or NEUTRAL


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).replace("'", "")


def parse_claim(args: str) -> MoodClaim | None:
    """The state(s) a ``/mood`` sentence names, or None when it names none or is
    ambiguous (two states denied, or two stated). A state word is denied when a negation
    comes after the previous state word and before it."""
    denied: list[str] = []
    stated: list[str] = []
    negated = False
    for word in _WORD.findall(_fold(args.replace("’", "'"))):
        if word in NEGATIONS:
            negated = True
            continue
        state = _STATE_OF.get(word)
        if state is None:
            continue
        (denied if negated else stated).append(state)
        negated = False
    denied, stated = list(dict.fromkeys(denied)), list(dict.fromkeys(stated))
    if len(denied) > 1 or len(stated) > 1 or not (denied or stated):
        return None
    claim = MoodClaim(denied[0] if denied else None, stated[0] if stated else None)
    if claim.denied is not None and claim.denied == claim.stated:
        return None
    return claim


def _misread(nodes: Sequence[MemoryNode], denied: str | None) -> MemoryNode | None:
    """The person's latest message that was read (as ``denied``, when given)."""
    for node in reversed(nodes):
        if node.type is NodeType.USER_MESSAGE and node.emotion:
            if denied is None or node.emotion == denied:
                return node
    return None


def _private(text: str) -> Reply:
    return Reply(text, ReplyKind.COMMAND, private=True)


async def correct_mood(ctx: TurnContext, args: str) -> CommandResult:
    """``/mood <words>``: see the module's docstring."""
    language = ctx.language
    claim = parse_claim(args)
    if claim is None:
        raise UsageError(tr("mood_usage", language))
    storage = ctx.services.storage
    nodes = await storage.nodes.recent(ctx.owner, limit=LOOK_BACK_NODES)
    target = _misread(nodes, claim.denied)
    if target is None:
        if claim.denied is not None:
            return _private(tr("mood_not_read", language, state=state_name(claim.denied, language)))
        return _private(tr("mood_unknown", language))
    predicted, corrected = str(target.emotion), claim.corrected
    if predicted == corrected:
        return _private(tr("mood_already", language, state=state_name(corrected, language)))
    at = ctx.message.sent_at

    def change(current: object) -> dict[str, object]:
        state = EmotionalState.from_dict(current if isinstance(current, dict) else None)
        return apply_correction(
            state, predicted, corrected, at, misread_at=target.timestamp
        ).to_dict()

    await storage.users.change_profile(ctx.owner, PROFILE_KEY, change)
    await storage.nodes.set_emotion(ctx.owner, target.id, corrected, 1.0)
    await storage.feedback.add_correction(
        MoodCorrection(
            owner=ctx.owner,
            text=target.content,
            predicted=predicted,
            predicted_score=target.emotion_score,
            corrected=corrected,
            at=at,
            node_id=target.id,
        )
    )
    log.info("mood corrected for %s: %s -> %s", ctx.owner, predicted, corrected)
    return _private(
        tr(
            "mood_corrected",
            language,
            predicted=state_name(predicted, language),
            corrected=state_name(corrected, language),
        )
    )
