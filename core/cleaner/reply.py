"""Reply cleaning: :func:`clean_reply` takes whatever the model produced and removes hidden
reasoning (``<think>`` and friends, nested, unclosed or with a stray closer), every
``<!TAG>`` marker and its neutralised look-alike (``‹!TAG›``), chat-template tokens and the
turns of other roles, echoed prompt sections with their bodies, the blocks the engine
writes into the prompt (memory entries, counts, recalled turns) and verbatim echoes of the
persona/instructions. It fails closed: when in doubt it removes more, and when nothing
visible is left it says so (``fell_back``) instead of returning anything raw.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from core.cleaner.blocks import _header_spans, _prompt_block_spans
from core.cleaner.echo import _ENGINE_INSTRUCTIONS, _echo_spans
from core.cleaner.patterns import _FLAGS, _GT_AT_RE, _ORACLE_RE, contains_internal_marker
from core.cleaner.splice import _splice
from core.cleaner.tokens import (
    _harmony_spans,
    _lookalike_spans,
    _marker_spans,
    _template_spans,
    _thinking_spans,
)

# --------------------------------------------------------------------------------------
# Result type
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanedReply:
    """The visible reply. ``removed`` holds the removed fragments verbatim (for debugging
    and metrics; they can contain hidden reasoning, so never show them to a user).
    ``fell_back`` is True when nothing visible was left: ``text`` is then empty and the
    caller sends its own short fallback reply in the user's language."""

    text: str
    removed: tuple[str, ...] = ()
    fell_back: bool = False
    # Something of the prompt itself (a section, a block of it, a verbatim piece of the
    # instructions) was among the removed: what is left must still read as a reply.
    echoed: bool = False


# --------------------------------------------------------------------------------------
# Stage G, H, I: role prefix, safety net, whitespace
# --------------------------------------------------------------------------------------

_ROLE_PREFIX_RE = re.compile(
    r"\A\s*(?:(?:assistant|assistente|model|modelo|bot|ai|ia|akira)[ \t]{0,8}[:：]\s*)+", _FLAGS
)


def _safety_spans(text: str) -> list[tuple[int, int]]:
    """Whatever the oracle still sees (tags re-formed by a removal, odd spellings the
    stages above do not model): the match and the rest of its tag."""
    spans: list[tuple[int, int]] = []
    for m in _ORACLE_RE.finditer(text):
        tail = _GT_AT_RE.match(text, m.end())
        spans.append((m.start(), tail.end() if tail else m.end()))
    return spans


_TRAILING_WS = " \t\f\v\u00a0\u200b\ufeff"
_BLANK_LINES_RE = re.compile(r"\n{3,}")


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Per line rather than a regex: "[ ]+(?=\n)" rescans a long run of spaces from every
    # position (quadratic on hostile input).
    text = "\n".join(line.rstrip(_TRAILING_WS) for line in text.split("\n"))
    text = _BLANK_LINES_RE.sub("\n\n", text)
    return text.strip()


def _has_visible(text: str) -> bool:
    # Letters, digits or symbols (emoji are symbols); punctuation alone is not a reply.
    return any(unicodedata.category(ch)[0] in "LNS" for ch in text)


def _clean_once(text: str, sources: tuple[str, ...], removed: list[str], echoed: list[bool]) -> str:
    text = _splice(text, _harmony_spans(text), removed)
    text = _splice(text, _thinking_spans(text), removed)
    text = _splice(text, _template_spans(text), removed)
    text = _splice(text, _marker_spans(text), removed)
    text = _splice(text, _lookalike_spans(text), removed)
    before = len(removed)
    text = _splice(text, _header_spans(text), removed)
    text = _splice(text, _prompt_block_spans(text), removed)
    text = _splice(text, _echo_spans(text, sources), removed)
    if len(removed) > before:
        echoed.append(True)
    prefix = _ROLE_PREFIX_RE.match(text)
    if prefix is not None:
        text = _splice(text, [prefix.span()], removed)
    text = _splice(text, _safety_spans(text), removed)
    return _tidy(text)


# A removal can re-form a tag from its two sides ("<<!A>!B>"); the cleaner repeats until
# nothing changes. Real replies settle in one or two rounds; text that has not settled after
# this many is hostile and is refused as a whole.
_MAX_ROUNDS = 5


def clean_reply(text: str, *, echo_sources: Sequence[str] = ()) -> CleanedReply:
    """Remove everything internal from a model reply; see the module docstring.

    ``echo_sources`` are the persona/system text and instructions given to the model; any
    verbatim chunk of them (>= 40 characters, or a whole line) in the reply is removed, as
    is any chunk of the engine's own fixed instructions (always a source).
    The result is a fixed point (``clean_reply(r.text).text == r.text``) and never holds
    anything :func:`contains_internal_marker` recognises.
    """
    sources = tuple(s for s in (*_ENGINE_INSTRUCTIONS, *echo_sources) if s and s.strip())
    removed: list[str] = []
    echoed: list[bool] = []
    current = text
    settled = False
    for _ in range(_MAX_ROUNDS):
        cleaned = _clean_once(current, sources, removed, echoed)
        if cleaned == current:
            settled = True
            break
        current = cleaned
    # Text that never settled is hostile: refuse it rather than guess.
    if not settled or contains_internal_marker(current) or not _has_visible(current):
        if current:
            removed.append(current)
        return CleanedReply(text="", removed=tuple(removed), fell_back=True, echoed=any(echoed))
    return CleanedReply(text=current, removed=tuple(removed), fell_back=False, echoed=any(echoed))
