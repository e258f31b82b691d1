"""Recognising the prompt's own blocks in a text: section headers and instruction labels,
and the lines the engine writes (memory entries, counts, recalled turns, the style line).
The cleaner removes them from replies; the neutraliser quotes them in user text."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Literal

from core.cleaner.patterns import _FLAGS
from core.cleaner.vocabulary import (
    ABOUT_STYLE_FORMAT,
    ABOUT_TOPICS_FORMAT,
    ECHO_LABELS,
    PROMPT_SECTION_HEADERS,
    RECALL_FELT_LINE_FORMAT,
    RECALL_LINE_FORMAT,
    RECALL_SPEAKER_BOT,
    RECALL_SPEAKER_PERSON,
    RESPONSE_STYLE_FORMAT,
    STRUCTURED_COUNTS_FORMAT,
    STRUCTURED_ENTRY_FORMAT,
    STRUCTURED_MORE_FORMAT,
    STRUCTURED_RECALL_HEADER,
    STRUCTURED_UNVERIFIED_NOTE,
    TRAJECTORY_LINE_FORMAT,
)

# --------------------------------------------------------------------------------------
# Stage E: echoed section headers and instruction labels
# --------------------------------------------------------------------------------------


def _normalise_title(value: str) -> str:
    return " ".join(value.strip(" \t*_#>:：").casefold().split())


_TITLES = frozenset(
    {_normalise_title(h) for h in PROMPT_SECTION_HEADERS}
    | {_normalise_title(label) for label in ECHO_LABELS}
)
_BRACKET_LABEL_RE = re.compile(
    r"\[\s{0,8}(?:system(?:\s{1,8}prompt)?|sys|instructions?|internal|hidden|persona|"
    r"context|emotional\s{1,8}context|developer)\s{0,8}\]",
    _FLAGS,
)
_MD_HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_LEAD_DECOR = " \t#>*_-•+"


def _header_match(line: str) -> tuple[int, bool] | None:
    """Where an echoed header/label starts in ``line`` (its block is dropped from there) and
    whether the line is a bare header (nothing after the title), or None. A label at the
    start of the line ("System: ...", "## Structured memories", "**Emotional context:**")
    or a bracket label anywhere ("[SYSTEM]")."""
    body = line.lstrip(_LEAD_DECOR)
    if body:
        head = body[:120]
        colon = min((i for i in (head.find(":"), head.find("：")) if i >= 0), default=-1)
        title = head[:colon] if colon >= 0 else (body if len(body) <= 120 else "")
        if title and _normalise_title(title) in _TITLES:
            return 0, not body[len(title) :].strip(" \t*_#:：")
    bracket = _BRACKET_LABEL_RE.search(line)
    if bracket is not None:
        col = 0 if not line[: bracket.start()].strip(_LEAD_DECOR) else bracket.start()
        return col, not line[bracket.end() :].strip(" \t*_#:：")
    return None


def is_prompt_section_header(line: str) -> bool:
    """True when ``line`` reads as one of our prompt section headers or instruction labels
    (the neutraliser quotes such lines in user text; the cleaner drops them from replies)."""
    return _header_match(line) is not None


def _header_spans(text: str) -> list[tuple[int, int]]:
    lines = text.split("\n")
    offsets: list[int] = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        found = _header_match(lines[i])
        if found is None:
            i += 1
            continue
        col, bare = found
        start = offsets[i] + col
        j = i + 1
        if bare:
            # "## Structured memories" then a blank line then the memories: the block is
            # the next paragraph even across the blank lines.
            while j < len(lines) and not lines[j].strip():
                j += 1
        while (
            j < len(lines)
            and lines[j].strip()
            and not _MD_HEADING_RE.match(lines[j])
            and _header_match(lines[j]) is None
        ):
            j += 1
        last = max(j - 1, i)
        spans.append((start, offsets[last] + len(lines[last])))
        i = max(j, i + 1)
    return spans


# --------------------------------------------------------------------------------------
# Stage E2: the blocks the engine writes into the prompt, echoed without their header
# --------------------------------------------------------------------------------------


def _format_pattern(template: str, fields: Mapping[str, str]) -> str:
    """A pattern for the lines ``template.format(...)`` writes: its literal text (a run of
    spaces may be any run of spaces or tabs, or none: models re-space what they echo) with
    each ``{field}`` matched by ``fields[field]``. The patterns below come from the
    builder's own templates this way, so an edited template is still recognised; a field
    with no pattern here is a KeyError at import, not a silent miss."""
    parts: list[str] = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        for chunk in re.split(r"(\s+)", literal):
            if chunk:
                parts.append(r"[ \t]{0,8}" if chunk.isspace() else re.escape(chunk))
        if field is not None:
            parts.append(f"(?:{fields[field]})")
    return "".join(parts)


def _line_re(template: str, fields: Mapping[str, str]) -> re.Pattern[str]:
    # Matched against a line stripped of list markers and emphasis (the model may make the
    # echo a bullet or bold it), so the template is stripped the same way.
    return re.compile(_format_pattern(template.lstrip(_LEAD_DECOR), fields) + r"[\s*_]*", _FLAGS)


_NUMBER = r"\d{1,9}"
_WORD = r"[^\s()\[\]]{1,40}"
# A memory's head line: its content lines (and its tags) follow it, up to the blank line
# between entries.
_ENTRY_HEAD_RE = _line_re(
    STRUCTURED_ENTRY_FORMAT,
    {"index": _NUMBER, "category": _WORD, "priority": _WORD, "mark": _WORD, "key": r".*"},
)
# Lines that are an echo on their own.
_PROMPT_LINE_RES: tuple[re.Pattern[str], ...] = (
    _line_re(
        STRUCTURED_COUNTS_FORMAT, {"total": _NUMBER, "verified": _NUMBER, "unverified": _NUMBER}
    ),
    _line_re(STRUCTURED_MORE_FORMAT, {"more": _NUMBER}),
    *(
        _line_re(
            template,
            {
                "when": r"[^,\n]{1,40}",
                # Case-sensitive, as the engine writes them: "Last week, they said: ..." is
                # ordinary English, "- 2 days ago, They said: ..." is the engine's line.
                "who": "(?-i:"
                + "|".join(re.escape(w) for w in (RECALL_SPEAKER_BOT, RECALL_SPEAKER_PERSON))
                + ")",
                "feeling": r"[\w\-]{1,20}(?: [\w\-]{1,20}){0,2}",
                "content": r".*",
            },
        )
        for template in (RECALL_LINE_FORMAT, RECALL_FELT_LINE_FORMAT)
    ),
    # A recalled turn cut short after its speaker ("- 7 days ago, They felt angry and"):
    # what is left of a line when an echo is split into pieces (a base64 run wrapped
    # over lines, each decoded alone). Only the engine's own English times ("N days ago",
    # "just now") and its case-sensitive speakers, so a person's bullet is not one.
    _line_re(
        "- {when}, {who}{rest}",
        {
            "when": r"(?:\d{1,4} (?:minute|hour|day|month|year)s? ago|just now)",
            "who": "(?-i:"
            + "|".join(re.escape(w) for w in (RECALL_SPEAKER_BOT, RECALL_SPEAKER_PERSON))
            + r")\b",
            "rest": r"(?: .*)?",
        },
    ),
    _line_re(RESPONSE_STYLE_FORMAT, {"style": r"[\w\-]{1,40}"}),
    _line_re(TRAJECTORY_LINE_FORMAT, {"days": _NUMBER, "trajectory": r".{1,400}"}),
    _line_re(ABOUT_STYLE_FORMAT, {"style": r".{1,200}"}),
    _line_re(ABOUT_TOPICS_FORMAT, {"topics": r".{1,300}"}),
)
_ALNUM_RE = re.compile(r"[^\W_]")


def _banner_title(value: str) -> str:
    """The words between a banner's fences: "=== STRUCTURED MEMORIES ===",
    "**Structured Memories**" and "== structured memories" all give "structured
    memories". Two searches rather than ``[\\W_]+$``, which rescans a long run of
    punctuation from every position (quadratic on hostile input)."""
    first = _ALNUM_RE.search(value)
    last = _ALNUM_RE.search(value[::-1])
    if first is None or last is None:
        return ""
    return " ".join(value[first.start() : len(value) - last.start()].casefold().split())


_BANNER_TITLES = frozenset({_banner_title(STRUCTURED_RECALL_HEADER)})


def _prompt_line_kind(line: str) -> Literal["entry", "line"] | None:
    """``entry`` for a memory's head line (its block follows), ``line`` for another line
    of the engine's prompt blocks, None for anything else."""
    body = line.strip().lstrip(_LEAD_DECOR)
    if not body:
        return None
    if _ENTRY_HEAD_RE.fullmatch(body):
        return "entry"
    if _banner_title(body) in _BANNER_TITLES or any(r.fullmatch(body) for r in _PROMPT_LINE_RES):
        return "line"
    return None


def _prompt_block_flags(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to one of the engine's prompt blocks: the
    structured-memories banner and counts, a memory entry's head line and its content
    lines, "... and N more", a recalled turn ("- 2 days ago, They said: ...") or the
    response-style line. A sentence that merely mentions a memory is none of these. The
    cleaner removes such lines from replies; the neutraliser quotes them in user text."""
    flags: list[bool] = []
    in_entry = False
    for line in lines:
        kind = _prompt_line_kind(line)
        if kind is not None:
            in_entry = kind == "entry"
            flags.append(True)
        elif in_entry:
            # format_memory indents an entry's content lines under its head, but a model
            # (or a person faking an entry) may not: the entry's paragraph is its content
            # (fail closed, as a header's).
            in_entry = bool(
                line.strip() and not _MD_HEADING_RE.match(line) and _header_match(line) is None
            )
            flags.append(in_entry)
        else:
            flags.append(False)
    return flags


def _prompt_block_spans(text: str) -> list[tuple[int, int]]:
    """The engine's prompt blocks echoed line by line, without (or after) their section
    header (see :func:`_prompt_block_flags`). Lines the splice finds separated only by
    blank lines are removed as one block."""
    spans: list[tuple[int, int]] = []
    pos = 0
    lines = text.split("\n")
    for line, flagged in zip(lines, _prompt_block_flags(lines), strict=True):
        end = pos + len(line)
        if flagged:
            spans.append((pos, end))
        pos = end + 1
    return spans


# The closing note of the structured-memories section. A reply that echoes it is caught as
# an echo of the engine's instructions (stage F); in user text, a line that starts with its
# lead-in (up to its first colon: the note may be split over two lines) is a fake one.
_UNVERIFIED_NOTE_RE = re.compile(
    _format_pattern(STRUCTURED_UNVERIFIED_NOTE.partition(":")[0], {}), _FLAGS
)


def is_prompt_block_line(line: str) -> bool:
    """True when ``line``, on its own, reads as a line of the blocks the engine writes into
    the prompt: the "=== STRUCTURED MEMORIES ===" banner, the counts, a memory entry's head
    ("[001] identity (HIGH) [verified] role"), "... and N more", the note on unverified
    entries, a recalled turn ("- 3 days ago, AKIRA said: ...") or "Response style: ...".
    Leading list markers, emphasis and ``>`` are ignored."""
    return _prompt_line_kind(line) is not None or _is_unverified_note(line)


def _is_unverified_note(line: str) -> bool:
    return _UNVERIFIED_NOTE_RE.match(line.strip().lstrip(_LEAD_DECOR)) is not None
