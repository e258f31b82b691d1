"""Building blocks of the patterns and the oracle every side agrees on
(:func:`contains_internal_marker`).

All regular expressions of the package are written so that no pattern can backtrack more
than a bounded amount per starting position (bounded repetitions, character classes that
stop at the next ``<``), so a hostile 200 KB reply is cleaned in linear-ish time.
"""

from __future__ import annotations

import re

# Whitespace inside a tag, including the zero-width characters a model (or an attacker)
# could slip between "<" and "!" to dodge a naive pattern.
_WS = r"[\s\u200b\u200c\u200d\u2060\ufeff]"
# "<" and its look-alikes a renderer would show as "<" (full-width, small form, entities).
# Bounded: two adjacent unbounded runs around an optional "/" would backtrack
# quadratically on a long run of spaces.
_S = _WS + "{0,8}"
_LT = r"(?:<|\uff1c|\ufe64|&lt;|&\#0*60;|&\#x0*3c;)"
_GT = r"(?:>|\uff1e|\ufe65|&gt;|&\#0*62;|&\#x0*3e;)"
_PIPE = r"[|\uff5c]"  # "|" and DeepSeek's full-width "｜"
# Roots of the reasoning-block tag names: think, thinking, thought(s), reasoning,
# reflection, scratchpad, inner monologue. A prefix match is deliberate (fail closed).
_THINK_ROOT = r"(?:think|thought|reason|reflect|scratchpad|inner[_\- ]?monologue)"
_EDGE = r"(?:(?:begin|start|end)[_\- ]?(?:of[_\- ]?)?)"
# Body of a tag up to its ">": bounded and never crossing another "<", so it cannot run
# away on hostile input.
_TAG_BODY = r"[^<>&\uff1c\uff1e\ufe64\ufe65]{0,200}?"

# What the neutraliser turns the brackets of a tag in user text into: look-alikes a person
# still reads as brackets but that no model or pattern here takes for a tag.
_SAFE_LT = "\u2039"  # ‹
_SAFE_GT = "\u203a"  # ›
_SAFE_LBRACKET = "\u2045"  # ⁅
_SAFE_RBRACKET = "\u2046"  # ⁆

_FLAGS = re.IGNORECASE


def _internal_token_pattern(lt: str, gt: str, lbracket: str, rbracket: str) -> str:
    """Every internal token, written with ``lt``/``gt`` as its angle brackets and
    ``lbracket``/``rbracket`` as its square ones: with the real brackets (and their
    look-alikes) it is the oracle; with the neutraliser's ``‹›``/``⁅⁆`` it finds the
    neutralised tokens of user text a model echoes back from its prompt. Every
    alternative starts with ``lt`` or ``lbracket``; the shared ``lt`` is factored out so
    each position is tried against it once."""
    return (
        rf"{lt}(?:"
        # any thinking tag, open or close, in any of its spellings (<think>, </think>,
        # <!THINKING>, <!/THINKING>, </!THINKING>, <|thinking|>, <|end_of_thought|>, ...)
        rf"(?:{_WS}|[\\/!|\uff5c]){{0,12}}{_EDGE}?{_THINK_ROOT}"
        # any <!...> marker, its closers and spaced / escaped variants (< !TAG >, <\!TAG>)
        rf"|(?:{_WS}|[\\/]){{0,12}}!"
        # chat-template tokens: <|...|>, <s> </s> <bos> <eos>, <start_of_turn>, <<SYS>>
        rf"|{_WS}{{0,3}}{_PIPE}/?[a-z_\u2581]"
        rf"|{_WS}{{0,3}}{_PIPE}[^<>\n|\uff5c]{{0,64}}{_PIPE}{_WS}{{0,3}}{gt}"
        rf"|{_S}/?{_S}(?:s|bos|eos|pad|unk){_S}{gt}"
        rf"|{_S}/?{_S}(?:start|end)_of_turn"
        rf"|{_S}{lt}?{_S}/?{_S}sys{_S}{gt}"
        rf")|{lbracket}{_S}/?{_S}(?:think|thinking|reasoning|inst){_S}{rbracket}"
    )


# The oracle.
_ORACLE_RE = re.compile(_internal_token_pattern(_LT, _GT, r"\[", r"\]"), _FLAGS)

_LT_RE = re.compile(_LT, _FLAGS)
_GT_AT_RE = re.compile(rf"{_TAG_BODY}(?P<gt>{_GT})", _FLAGS)


def contains_internal_marker(text: str) -> bool:
    """True when ``text`` still holds any thinking tag (open or close, any spelling), any
    ``<!...>`` marker, or any chat-template token. Deliberately strict: a truncated
    ``<think`` or ``<!STRICT`` counts, so does ``&lt;!TAG&gt;``."""
    return _ORACLE_RE.search(text) is not None
