"""Verbatim echoes of the persona / system text (word shingles over the raw reply)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from core.cleaner.patterns import _ORACLE_RE
from core.cleaner.vocabulary import STRUCTURED_UNVERIFIED_NOTE

# --------------------------------------------------------------------------------------
# Stage F: verbatim echoes of the persona / system text
# --------------------------------------------------------------------------------------

# The engine's own fixed instructions are echo sources of every reply, whatever the caller
# passes: the structured-memories section is data (its facts may be repeated, so the clean
# stage does not pass it), but its closing note is an instruction.
_ENGINE_INSTRUCTIONS: tuple[str, ...] = (STRUCTURED_UNVERIFIED_NOTE,)

_WORD_RE = re.compile(r"\S+")
_ECHO_WINDOW = 5  # words per shingle
_ECHO_MIN_CHARS = 40  # a matched run shorter than this is coincidence, not an echo
_ECHO_MIN_LINE = 16  # a whole reply line this long found verbatim in a source is an echo
_SENTENCE_END = ".!?…"


@dataclass(frozen=True, slots=True)
class _EchoIndex:
    shingles: frozenset[tuple[str, ...]]
    joined: str  # " word word ... " over all sources, for whole-line containment


@lru_cache(maxsize=32)
def _echo_index(sources: tuple[str, ...]) -> _EchoIndex:
    shingles: set[tuple[str, ...]] = set()
    chunks: list[str] = []
    for source in sources:
        # Sources carry our own markers ("<!WARM_FRIENDLY_MODE> Be warm ..."); compare the
        # words a model would echo.
        words = [w.casefold() for w in _WORD_RE.findall(_ORACLE_RE.sub(" ", source))]
        chunks.append(" ".join(words))
        for k in range(len(words) - _ECHO_WINDOW + 1):
            shingles.add(tuple(words[k : k + _ECHO_WINDOW]))
    return _EchoIndex(frozenset(shingles), " " + " \n ".join(chunks) + " ")


def _echo_spans(text: str, sources: tuple[str, ...]) -> list[tuple[int, int]]:
    index = _echo_index(sources)
    if not index.joined.strip():
        return []
    raw: list[tuple[int, int]] = []
    words = list(_WORD_RE.finditer(text))
    folded = [w.group().casefold() for w in words]
    # Runs of consecutive words covered by a shared 5-word shingle.
    run_start = run_end = -1
    for k in range(len(words) - _ECHO_WINDOW + 1):
        if tuple(folded[k : k + _ECHO_WINDOW]) in index.shingles:
            if run_start >= 0 and k <= run_end:
                run_end = k + _ECHO_WINDOW
            else:
                if run_start >= 0:
                    raw.append((words[run_start].start(), words[run_end - 1].end()))
                run_start, run_end = k, k + _ECHO_WINDOW
    if run_start >= 0:
        raw.append((words[run_start].start(), words[run_end - 1].end()))
    raw = [(s, e) for s, e in raw if len(" ".join(text[s:e].split())) >= _ECHO_MIN_CHARS]

    # Whole lines found verbatim in a source (a short instruction line echoed on its own).
    pos = 0
    for line in text.split("\n"):
        norm = " ".join(line.casefold().split())
        if len(norm) >= _ECHO_MIN_LINE and f" {norm} " in index.joined:
            raw.append((pos, pos + len(line)))
        pos += len(line) + 1

    # Widen each echo to the sentence around it: half an echoed sentence is still an echo.
    spans: list[tuple[int, int]] = []
    for s, e in raw:
        line_start = text.rfind("\n", 0, s) + 1
        cut = max(text.rfind(ch, line_start, s) for ch in _SENTENCE_END)
        start = cut + 1 if cut >= 0 else line_start
        line_end = text.find("\n", e)
        line_end = len(text) if line_end < 0 else line_end
        if text[e - 1] in _SENTENCE_END:
            end = e  # the echo already ends its sentence
        else:
            ends = [i for i in (text.find(ch, e, line_end) for ch in _SENTENCE_END) if i >= 0]
            end = min(ends) + 1 if ends else line_end
        spans.append((start, end))
    return spans
