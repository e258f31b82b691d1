"""How a person writes, measured from their messages (not guessed by a model).

Each message gives a few numbers (:class:`StyleSample`): its length in words, whether it
has emoji, slang, a question, formal or informal markers, and its language. They are
added to the person's counters (``style`` and ``language``, decayed like topics), and
:func:`describe_style` turns the counters into the few traits a prompt needs ("short,
informal, uses emoji").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from core.embeddings.hashing import fold
from core.i18n import detect_language

_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
# Pictographs, dingbats, flags and the symbols chat apps turn into emoji, plus the
# common text emoticons.
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b50\u2b55\u2764\u203c\u2049]"
    r"|(?:^|\s)(?:[:;=]-?[)(dpDP3*]|<3|xD|XD)(?=\s|$)"
)
# Folded (lowercase, no accents) chat abbreviations and slang, Portuguese and English.
SLANG = frozenset(
    """
    vc vcs tb tbm pq blz mano vlw flw tmj sla oq cmg ctg msm hj agr mds pfv pls plz bjs
    bjo kd cade naum neh ta tava fds mt mto mts qnd qdo td tdo vdd sdds slk krl
    lol lmao lmfao rofl omg idk tbh btw imo imho ngl fr u ur ya yall gonna wanna gotta
    kinda sorta dude bro brb nah yep yup thx ty np gg wtf af
    """.split()
)
_LAUGH = re.compile(r"^(?:k{3,}|(?:ha){2,}h?|(?:he){2,}|(?:hue){2,}|rs(?:rs)+|lol+)$")
# Markers of a formal register (folded): salutations, courtesy forms, sign-offs.
_FORMAL = re.compile(
    r"\b(?:prezad[oa]s?|senhora?|sr|sra|cordialmente|atenciosamente|gostaria|poderia|"
    r"por gentileza|por obsequio|grato|grata|dear|sincerely|regards|kindly|would you|"
    r"could you|i would like|furthermore|therefore)\b"
)
_QUESTION_START = re.compile(
    r"^(?:como|quando|onde|por ?que|qual|quais|quem|o que|sera|voce pode|pode|what|how|why|"
    r"when|where|who|which|can|could|do|does|did|is|are|will|would|should)\b"
)
SHORT_WORDS = 8  # a typical message under this many words is "short"
LONG_WORDS = 30  # over this, "long"
TRAIT_SHARE = 0.3  # emoji or slang in this share of messages makes it a trait
QUESTION_SHARE = 0.5
REGISTER_SHARE = 0.5  # formal (informal) markers in this share of messages
LANGUAGE_SHARE = 0.2  # a language is theirs when this share of their messages is in it
MIN_MESSAGES = 3  # fewer messages say nothing about a style


@dataclass(frozen=True, slots=True)
class StyleSample:
    """What one message says about how its author writes."""

    words: int
    emoji: bool
    slang: bool
    question: bool
    formal: bool
    informal: bool
    language: str | None

    def amounts(self) -> dict[str, float]:
        """The ``style`` counters this message adds to (messages counts them all)."""
        return {
            "messages": 1.0,
            "words": float(self.words),
            "emoji": float(self.emoji),
            "slang": float(self.slang),
            "questions": float(self.question),
            "formal": float(self.formal),
            "informal": float(self.informal),
        }


def measure(text: str) -> StyleSample:
    folded = fold(text)
    words = _WORD.findall(folded)
    slang = any(w in SLANG or _LAUGH.match(w) for w in words)
    emoji = bool(_EMOJI.search(text))
    stripped = text.strip()
    question = "?" in text or bool(_QUESTION_START.match(folded.strip()))
    formal = bool(_FORMAL.search(folded))
    letters = [c for c in stripped if c.isalpha()]
    # Lowercase throughout and no closing punctuation: chat register.
    casual_typing = (
        len(words) >= 3
        and bool(letters)
        and all(c.islower() for c in letters)
        and stripped[-1:] not in ".!?"
    )
    informal = not formal and (slang or emoji or casual_typing)
    return StyleSample(
        words=len(words),
        emoji=emoji,
        slang=slang,
        question=question,
        formal=formal,
        informal=informal,
        language=detect_language(text),
    )


@dataclass(frozen=True, slots=True)
class CommunicationStyle:
    """The measured style: shares of messages (decay-weighted) and the traits they give."""

    messages: int = 0  # messages measured (plain count)
    average_words: float = 0.0
    emoji_share: float = 0.0
    slang_share: float = 0.0
    question_share: float = 0.0
    formal_share: float = 0.0
    informal_share: float = 0.0
    languages: list[str] = field(default_factory=list)  # most used first

    @property
    def known(self) -> bool:
        return self.messages >= MIN_MESSAGES

    @property
    def length(self) -> str:
        if self.average_words < SHORT_WORDS:
            return "short"
        return "long" if self.average_words > LONG_WORDS else "medium"

    @property
    def register(self) -> str | None:
        """``formal``, ``informal`` or None (neither clearly)."""
        if self.informal_share >= REGISTER_SHARE and self.informal_share > self.formal_share:
            return "informal"
        if self.formal_share >= REGISTER_SHARE:
            return "formal"
        return None

    def traits(self) -> list[str]:
        """The few values a prompt needs, as codes: a length, a register, ``emoji``,
        ``slang``, ``questions`` (shown in words by :func:`describe_traits` and /profile)."""
        if not self.known:
            return []
        traits = [self.length]
        if self.register:
            traits.append(self.register)
        if self.emoji_share >= TRAIT_SHARE:
            traits.append("emoji")
        if self.slang_share >= TRAIT_SHARE:
            traits.append("slang")
        if self.question_share >= QUESTION_SHARE:
            traits.append("questions")
        return traits

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "average_words": round(self.average_words, 1),
            "emoji_share": round(self.emoji_share, 3),
            "slang_share": round(self.slang_share, 3),
            "question_share": round(self.question_share, 3),
            "formal_share": round(self.formal_share, 3),
            "informal_share": round(self.informal_share, 3),
            "languages": self.languages,
            "traits": self.traits(),
            "summary": describe_traits(self.traits(), self.languages),
        }


# The traits and languages in the prompt's words (English, as the rest of the prompt).
TRAIT_WORDS = {
    "short": "short messages",
    "medium": "medium-length messages",
    "long": "long messages",
    "formal": "formal",
    "informal": "informal",
    "emoji": "uses emoji",
    "slang": "uses slang",
    "questions": "asks many questions",
}
LANGUAGE_NAMES = {"pt": "Portuguese", "en": "English"}


def describe_traits(traits: list[str], languages: list[str]) -> str:
    """``short messages, informal, uses emoji; writes in Portuguese`` ('' when unknown)."""
    text = ", ".join(TRAIT_WORDS.get(t, t) for t in traits)
    if traits and languages:
        names = " and ".join(LANGUAGE_NAMES.get(code, code) for code in languages)
        text += f"; writes in {names}"
    return text


def describe_style(
    style: dict[str, float], languages: dict[str, float], messages: int
) -> CommunicationStyle:
    """The style from the person's decayed ``style`` and ``language`` counters (name ->
    weight) and the plain number of messages measured."""
    total = style.get("messages", 0.0)
    if total <= 0:
        return CommunicationStyle()

    def share(name: str) -> float:
        return style.get(name, 0.0) / total

    said = sum(languages.values())
    ranked = sorted(languages.items(), key=lambda item: -item[1])
    return CommunicationStyle(
        messages=messages,
        average_words=share("words"),
        emoji_share=share("emoji"),
        slang_share=share("slang"),
        question_share=share("questions"),
        formal_share=share("formal"),
        informal_share=share("informal"),
        languages=[code for code, weight in ranked if said and weight / said >= LANGUAGE_SHARE],
    )
