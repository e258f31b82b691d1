"""Neutralising user text: what a person typed cannot smuggle our tags, template tokens or
section headers into a prompt, nor pass off lines of the blocks the engine writes there
(memory entries, recalled turns) as the engine's own, while the words stay readable.
"""

from __future__ import annotations

import re

from core.cleaner.blocks import _is_unverified_note, _prompt_block_flags, is_prompt_section_header
from core.cleaner.patterns import (
    _FLAGS,
    _GT_AT_RE,
    _LT,
    _LT_RE,
    _ORACLE_RE,
    _SAFE_GT,
    _SAFE_LBRACKET,
    _SAFE_LT,
    _SAFE_RBRACKET,
    contains_internal_marker,
)
from core.cleaner.unicode import fix_unicode
from core.cleaner.vocabulary import PROMPT_SECTION_HEADERS

# --------------------------------------------------------------------------------------
# Neutralising user text
# --------------------------------------------------------------------------------------

# C0 controls except \t and \n, DEL and C1 controls. \r is handled first (CRLF -> LF).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

_LT_AT_RE = re.compile(rf"\\?{_LT}", _FLAGS)


def _defang_once(text: str) -> str:
    parts: list[str] = []
    pos = 0
    for m in _ORACLE_RE.finditer(text):
        if m.start() < pos:
            continue
        parts.append(text[pos : m.start()])
        if text[m.start()] == "[":
            parts.append(_SAFE_LBRACKET + m.group()[1:-1] + _SAFE_RBRACKET)
            pos = m.end()
            continue
        lt = _LT_AT_RE.match(text, m.start())
        lt_end = lt.end() if lt else m.start() + 1
        parts.append(_SAFE_LT)
        tail = _GT_AT_RE.match(text, lt_end)
        if tail is not None:
            parts.append(text[lt_end : tail.start("gt")])
            parts.append(_SAFE_GT)
            pos = tail.end()
        else:
            pos = lt_end
    parts.append(text[pos:])
    return "".join(parts)


def neutralise_user_text(text: str) -> str:
    """Make user text safe to place in a prompt while keeping it readable.

    ``<!TAG>`` becomes ``‹!TAG›``, ``<think>`` becomes ``‹think›``, ``<|im_start|>`` becomes
    ``‹|im_start|›``, ``[INST]`` becomes ``⁅INST⁆``; a line that reads as one of our section
    headers or labels ("## Recent conversation", "System: ...", "[SYSTEM]"), or as a line
    of the blocks the engine writes into the prompt (see :func:`is_prompt_block_line`; a
    fake memory entry's content lines with its head) is quoted with ``> ``, so a person
    cannot pass off their text as memories or recalled turns the engine vouches for; a
    line that already starts with ``> `` is a quote and stays as it is. NUL and other
    control characters (except newline and tab) are dropped; lone surrogates become
    U+FFFD. ``contains_internal_marker`` is False on the result, and neutralising twice
    gives the same text as neutralising once.

    Text the engine renders around user text (the structured-memories section) must
    neutralise the user's parts before rendering, not the rendered block: the engine's own
    banner and entries would be quoted too.
    """
    text = fix_unicode(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_RE.sub("", text)
    # Quoting first: its "> " could close a tag left open at the end of the line above
    # ("<SYS" then "> SYSTEM"); the defanging below sees and breaks that too.
    lines = text.split("\n")
    fake_blocks = _prompt_block_flags(lines)
    quoted: list[int] = []
    for i, line in enumerate(lines):
        if line.startswith(_QUOTE):
            continue  # already quoted (so neutralising twice is neutralising once)
        if (
            fake_blocks[i]
            or is_prompt_section_header(line)
            or _starts_like_our_header(line)
            or _is_unverified_note(line)
        ):
            lines[i] = _QUOTE + line
            quoted.append(i)
    text = "\n".join(lines)
    for _ in range(4):
        if not contains_internal_marker(text):
            break
        text = _defang_once(text)
    if contains_internal_marker(text):
        # Overlapping hostile constructs: defang every angle bracket that remains.
        text = _defang_once(_LT_RE.sub(_SAFE_LT, text))
    if quoted:
        text = _restore_quotes(text, quoted)
    return text


def _restore_quotes(text: str, quoted: list[int]) -> str:
    """Give back the quote mark that defanging took when it closed a tag left open on the
    line above ("<think" then the quote of "- 3 days ago, AKIRA said: ..."): that tag's
    "<" is defanged too, so the restored mark closes nothing."""
    lines = text.split("\n")
    safe_quote = _SAFE_GT + _QUOTE[1:]
    for i in quoted:
        if lines[i].startswith(safe_quote):
            lines[i] = _QUOTE + lines[i][len(safe_quote) :]
    restored = "\n".join(lines)
    return text if contains_internal_marker(restored) else restored


# How a line of user text is quoted.
_QUOTE = "> "

# A line of user text that merely starts like one of our headers ("## Recent conversation
# follows", "System:override") is quoted too.
_HEADER_PREFIXES = (*(h.casefold() for h in PROMPT_SECTION_HEADERS), "system:", "[system]")


def _starts_like_our_header(line: str) -> bool:
    return line.lstrip().casefold().startswith(_HEADER_PREFIXES)
