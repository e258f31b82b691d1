"""Reply cleaning and user-text neutralising: "nothing internal reaches a user".

Two directions, both pure functions with no I/O:

* :func:`clean_reply` takes whatever the model produced and removes hidden reasoning
  (``<think>`` and friends, nested, unclosed or with a stray closer), every ``<!TAG>``
  marker and its neutralised look-alike (``‹!TAG›``), chat-template tokens and the turns
  of other roles, echoed prompt sections with their bodies, the blocks the engine writes
  into the prompt (memory entries, counts, recalled turns) and verbatim echoes of the
  persona/instructions. It fails closed: when in doubt it removes more, and when nothing
  visible is left it says so (``fell_back``) instead of returning anything raw.
* :func:`neutralise_user_text` takes what a person typed and makes sure it cannot smuggle
  our tags, template tokens or section headers into a prompt, nor pass off lines of the
  blocks the engine writes there (memory entries, recalled turns) as the engine's own,
  while keeping the words readable.

:func:`contains_internal_marker` is the strict oracle both sides (and every leak test in the
project) agree on. Every pattern it knows starts with an angle bracket (or one of its
look-alikes / HTML entities) or a square bracket; that is what lets both functions give a
hard guarantee: as a last resort they remove or defang those brackets.

All regular expressions here are written so that no pattern can backtrack more than a
bounded amount per starting position (bounded repetitions, character classes that stop at
the next ``<``), so a hostile 200 KB reply is cleaned in linear-ish time.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = [
    "ECHO_LABELS",
    "EMOTION_SECTION_TITLE",
    "HISTORY_SECTION_TITLE",
    "PROMPT_SECTION_HEADERS",
    "RECALL_LINE_FORMAT",
    "RECALL_SECTION_TITLE",
    "RECALL_SPEAKER_BOT",
    "RECALL_SPEAKER_PERSON",
    "RESPONSE_STYLE_FORMAT",
    "SECTION_HEADER_FORMAT",
    "STRUCTURED_COUNTS_FORMAT",
    "STRUCTURED_ENTRY_FORMAT",
    "STRUCTURED_MORE_FORMAT",
    "STRUCTURED_RECALL_HEADER",
    "STRUCTURED_SECTION_TITLE",
    "STRUCTURED_UNVERIFIED_NOTE",
    "CleanedReply",
    "clean_reply",
    "contains_internal_marker",
    "is_prompt_block_line",
    "is_prompt_section_header",
    "neutralise_user_text",
]

# --------------------------------------------------------------------------------------
# Public constants
# --------------------------------------------------------------------------------------

# What the engine itself writes into the system prompt. The texts live here, in the one
# module of the project that imports nothing from it (the prompt builders - core.stages.basic,
# core.stages.emotion, core.memory.structured - import the cleaner, so the cleaner cannot
# import them back): the builders import these constants and the cleaner derives its
# patterns from them, so an echoed block is recognised however the prompt's wording is
# edited. Only the operator's texts (persona, emotional states) are not here; the clean
# stage passes those as ``echo_sources``.

#: How the prompt builder heads each section (``core.stages.basic.PromptStage``).
SECTION_HEADER_FORMAT = "## {title}"
#: The titles of the sections the engine's stages write.
EMOTION_SECTION_TITLE = "Emotional Context Instructions"
RECALL_SECTION_TITLE = "What you remember about this person"
STRUCTURED_SECTION_TITLE = "Structured memories"
HISTORY_SECTION_TITLE = "Recent conversation"

#: The structured-memories recall text (``core.memory.structured.render_recall``): a banner,
#: the counts, one entry per memory (its content lines indented under the head), a note on
#: how many were left out, then the instruction on unverified entries.
STRUCTURED_RECALL_HEADER = "=== STRUCTURED MEMORIES ==="
STRUCTURED_COUNTS_FORMAT = "{total} total ({verified} verified, {unverified} unverified)"
STRUCTURED_ENTRY_FORMAT = "[{index:03d}] {category} ({priority}) [{mark}] {key}"
STRUCTURED_MORE_FORMAT = "... and {more} more"
STRUCTURED_UNVERIFIED_NOTE = (
    "Entries marked [unverified] were inferred, not confirmed by the person: "
    "do not state them as certain."
)

#: One recalled conversation turn (``core.stages.basic.RecallStage``).
RECALL_LINE_FORMAT = "- {when}, {who} said: {content}"
RECALL_SPEAKER_BOT = "AKIRA"
RECALL_SPEAKER_PERSON = "They"

#: The last line of the emotional section (``core.stages.emotion.EmotionTracker.section``).
RESPONSE_STYLE_FORMAT = "Response style: {style}"

#: The section headers of the prompt: the ones the builder writes, and a few a model might
#: invent around them. The cleaner (which drops echoed sections) and the neutraliser (which
#: quotes fake ones in user text) use this tuple, so both agree with the prompt. Matching
#: ignores the ``#`` level, case, surrounding ``*``/``_`` emphasis and a trailing colon.
PROMPT_SECTION_HEADERS: tuple[str, ...] = tuple(
    SECTION_HEADER_FORMAT.format(title=title)
    for title in (
        "Persona",
        EMOTION_SECTION_TITLE,
        RECALL_SECTION_TITLE,
        STRUCTURED_SECTION_TITLE,
        HISTORY_SECTION_TITLE,
        "Current message",
        "Instructions",
        "Reply rules",
    )
)

#: Further labels a model uses when it echoes its instructions ("System: ...",
#: "Emotional context: ..."). A line that starts with one of these (optionally followed by a
#: colon and content) is treated like a section header: it and its block are dropped.
ECHO_LABELS: tuple[str, ...] = (
    "system",
    "system prompt",
    "system message",
    "system instructions",
    "developer",
    "developer message",
    "persona",
    "instructions",
    "hidden instructions",
    "internal",
    "internal notes",
    "emotional context",
    "emotional context instructions",
    "emotional state",
    "emotional tag",
    "recalled context",
    "memory context",
    "contexto emocional",
    "instruções",
    "instruções do sistema",
    "instruções de contexto emocional",
)

# --------------------------------------------------------------------------------------
# Building blocks for the patterns
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Splicing: remove spans and join the text on either side
# --------------------------------------------------------------------------------------

# A removed span between two of these and a closing punctuation mark joins without a space.
_OPENING = frozenset("([{«“‘¿¡\"'`")
_CLOSING = frozenset(".,;:!?)]}»”’…%\"'`")


def _splice(text: str, spans: Iterable[tuple[int, int]], removed: list[str]) -> str:
    """Remove ``spans`` from ``text``; the words on either side stay, separated by a single
    space or by the newlines that were there (at most one blank line)."""
    ordered = sorted((s, e) for s, e in spans if e > s)
    if not ordered:
        return text
    # Merge overlapping spans and spans separated only by whitespace: the whitespace between
    # two removed pieces is itself left-over, and merging keeps every kept piece non-blank.
    merged: list[list[int]] = []
    for s, e in ordered:
        if merged and (s <= merged[-1][1] or not text[merged[-1][1] : s].strip()):
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    if merged[0][0] > 0 and not text[: merged[0][0]].strip():
        merged[0][0] = 0
    if merged[-1][1] < len(text) and not text[merged[-1][1] :].strip():
        merged[-1][1] = len(text)

    kept = [text[: merged[0][0]]]
    for i, (s, e) in enumerate(merged):
        removed.append(text[s:e])
        nxt = merged[i + 1][0] if i + 1 < len(merged) else len(text)
        kept.append(text[e:nxt])

    parts: list[str] = [kept[0]]
    for i, (s, e) in enumerate(merged):
        left, right = parts[-1], kept[i + 1]
        left_body, right_body = left.rstrip(), right.lstrip()
        if not left_body or not right_body:
            # Start or end of the text: the final whitespace pass strips the edge.
            parts[-1] = left_body
            parts.append(right_body)
            continue
        lws, rws = left[len(left_body) :], right[: len(right) - len(right_body)]
        newlines = min(2, max(lws.count("\n"), rws.count("\n")))
        if newlines:
            indent = rws.rsplit("\n", 1)[1] if "\n" in rws else ""
            sep = "\n" * newlines + indent
        elif (not rws and right_body[0] in _CLOSING) or (not lws and left_body[-1] in _OPENING):
            sep = ""
        elif lws or rws:
            sep = " "
        else:
            sep = "\n" if "\n" in text[s:e] else " "
        parts[-1] = left_body + sep
        parts.append(right_body)
    return "".join(parts)


# --------------------------------------------------------------------------------------
# Stage A: harmony (gpt-oss) analysis / commentary channels
# --------------------------------------------------------------------------------------

_HARMONY_CHANNEL_RE = re.compile(rf"{_LT}{_PIPE}channel{_PIPE}{_GT}{_S}(?P<ch>[a-z]*)", _FLAGS)
_HARMONY_END_RE = re.compile(rf"{_LT}{_PIPE}(?:end|start|channel|return|call){_PIPE}{_GT}", _FLAGS)


def _harmony_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = _HARMONY_CHANNEL_RE.search(text, pos)
        if m is None:
            return spans
        if m.group("ch").lower() in ("analysis", "commentary", "thinking", "reasoning"):
            end = _HARMONY_END_RE.search(text, m.end())
            stop = end.start() if end else len(text)
            spans.append((m.start(), stop))
            pos = max(stop, m.end())
        else:  # "final": only the channel token and its name go
            spans.append((m.start(), m.end()))
            pos = m.end()


# --------------------------------------------------------------------------------------
# Stage B: thinking blocks
# --------------------------------------------------------------------------------------

_THINK_TAG_RE = re.compile(
    rf"(?P<angle>\\?{_LT}(?P<pre>(?:{_WS}|[\\/!|\uff5c]){{0,12}})(?P<edge>{_EDGE})?"
    rf"{_THINK_ROOT}[\w\-]*+(?P<tail>{_TAG_BODY}\\?{_GT})?)"
    rf"|(?P<bracket>\[{_S}(?P<bslash>/)?{_S}(?:think|thinking|reasoning){_S}\])",
    _FLAGS,
)
_SELF_CLOSING_RE = re.compile(rf"/{_S}\\?{_S}{_GT}$", _FLAGS)


def _thinking_spans(text: str) -> list[tuple[int, int]]:
    """Balanced, nested, unclosed and stray-closed reasoning blocks.

    * an opener at depth 0 starts a block, the closer that brings the depth back to 0
      ends it (nested blocks of any of the names count together);
    * an opener that is never closed hides everything after it;
    * a closer with no opener (the model started thinking without a tag) hides everything
      before it, from the start of the text.
    """
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for m in _THINK_TAG_RE.finditer(text):
        if m.group("bracket") is not None:
            closing = m.group("bslash") is not None
        else:
            edge = (m.group("edge") or "").lower()
            closing = "/" in m.group("pre") or edge.startswith("end")
            tail = m.group("tail")
            if tail and _SELF_CLOSING_RE.search(tail) and not closing:
                # <think/>: an empty block; the tag alone goes.
                if depth == 0:
                    spans.append((m.start(), m.end()))
                continue
        if closing:
            if depth == 0:
                spans.append((0, m.end()))  # stray closer: everything before it was thinking
            else:
                depth -= 1
                if depth == 0:
                    spans.append((start, m.end()))
        else:
            if depth == 0:
                start = m.start()
            depth += 1
    if depth > 0:
        spans.append((start, len(text)))
    return spans


# --------------------------------------------------------------------------------------
# Stage C: chat-template tokens and the turns of other roles
# --------------------------------------------------------------------------------------

_TEMPLATE_RE = re.compile(
    rf"(?P<pipe>{_LT}{_WS}{{0,3}}{_PIPE}(?P<pname>[^<>\n|\uff5c]{{0,64}}){_PIPE}{_WS}{{0,3}}{_GT})"
    rf"|(?P<pipeopen>{_LT}{_WS}{{0,3}}{_PIPE}/?[a-z_\u2581][\w\u2581\-]*)"
    rf"|(?P<simple>{_LT}{_S}(?P<sslash>/)?{_S}(?P<sname>s|bos|eos|pad|unk){_S}{_GT})"
    rf"|(?P<turn>{_LT}{_S}(?P<tslash>/)?{_S}(?P<tname>start|end)_of_turn(?:{_S}{_GT})?)"
    rf"|(?P<sys>{_LT}{_S}{_LT}?{_S}(?P<yslash>/)?{_S}sys{_S}{_GT}{_S}{_GT}?)"
    rf"|(?P<inst>\[{_S}(?P<islash>/)?{_S}inst{_S}\])",
    _FLAGS,
)
_ROLE_WORD_RE = re.compile(
    rf"{_S}(?P<role>system|user|assistant|model|human|developer|tool|ai|bot|ipython|function)\b"
    rf"(?:{_S}{_LT}{_PIPE}end_header_id{_PIPE}{_GT})?[ \t]*:?",
    _FLAGS,
)
_ASSISTANT_ROLES = frozenset({"assistant", "model", "ai", "bot"})
_ROLE_NAMES = frozenset(
    {"assistant", "user", "system", "human", "model", "bot", "developer", "tool", "ai"}
)
_ROLE_START_NAMES = frozenset({"im_start", "start_header_id", "start"})
_EOT_NAMES = frozenset(
    {
        "im_end",
        "eot_id",
        "eom_id",
        "end",
        "endoftext",
        "end_of_text",
        "return",
        "eos",
        "end\u2581of\u2581sentence",
        "end_of_sentence",
        "endofprompt",
    }
)


def _classify_template(m: re.Match[str], text: str) -> tuple[str, int]:
    """Return (kind, end) where kind is keep (an assistant turn starts), drop (another
    role's turn starts), eot (a turn ends) or neutral; end includes a role word that
    belongs to the token."""
    end = m.end()
    if m.group("pipe") is not None:
        name = m.group("pname").strip().lower()
        if name in _ROLE_NAMES:
            return ("keep" if name in _ASSISTANT_ROLES else "drop"), end
        if name in _ROLE_START_NAMES:
            role = _ROLE_WORD_RE.match(text, end)
            if role is None:
                return "drop", end  # a turn of unknown role: fail closed
            kind = "keep" if role.group("role").lower() in _ASSISTANT_ROLES else "drop"
            return kind, role.end()
        if name in _EOT_NAMES or (name.startswith("end") and name != "end_header_id"):
            return "eot", end
        return "neutral", end
    if m.group("pipeopen") is not None:
        return "neutral", end
    if m.group("simple") is not None:
        if m.group("sslash") or m.group("sname").lower() == "eos":
            return "eot", end
        return "neutral", end
    if m.group("turn") is not None:
        if m.group("tslash") or m.group("tname").lower() == "end":
            return "eot", end
        role = _ROLE_WORD_RE.match(text, end)
        if role is None:
            return "drop", end
        kind = "keep" if role.group("role").lower() in _ASSISTANT_ROLES else "drop"
        return kind, role.end()
    if m.group("sys") is not None:
        # Llama-2: [INST] <<SYS>> system <</SYS>> user text [/INST] answer
        return "drop", end
    return ("keep" if m.group("islash") else "drop"), end


def _template_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    state = "keep"
    pos = 0  # start of the text run not yet attributed
    kept_visible = False
    for m in _TEMPLATE_RE.finditer(text):
        if m.start() < pos:
            continue  # inside a role word we already consumed
        kind, end = _classify_template(m, text)
        if state == "drop":
            spans.append((pos, m.start()))
        elif text[pos : m.start()].strip():
            kept_visible = True
        spans.append((m.start(), end))
        if kind == "keep":
            state = "keep"
        elif kind == "drop":
            state = "drop"
        elif kind == "eot":
            # Text after an end-of-turn token is the model writing past its turn (fake
            # user turns and the like). A leading end token is only junk.
            state = "drop" if kept_visible else "keep"
        pos = end
    if state == "drop":
        spans.append((pos, len(text)))
    return spans


# --------------------------------------------------------------------------------------
# Stage D: <!TAG> markers
# --------------------------------------------------------------------------------------

_MARKER_RE = re.compile(
    rf"\\?{_LT}(?P<pre>(?:{_WS}|[\\/]){{0,12}})!(?P<post>(?:{_WS}|[\\/]){{0,12}})"
    rf"(?P<name>[\w\-.:\\]*+)(?P<tail>{_TAG_BODY}\\?{_GT})?",
    _FLAGS,
)


def _marker_spans(text: str) -> list[tuple[int, int]]:
    """Every ``<!...>`` marker; a marker wrapped as ``<!TAG> ... </!TAG>`` takes its content
    with it (wrapped content is an instruction block, not reply text)."""
    spans: list[tuple[int, int]] = []
    open_at: dict[str, int] = {}
    for m in _MARKER_RE.finditer(text):
        start, end = m.start(), m.end()
        # `<!TAG>` written as inline code: the empty backticks go too.
        if start > 0 and end < len(text) and text[start - 1] == "`" and text[end] == "`":
            start, end = start - 1, end + 1
        spans.append((start, end))
        name = m.group("name").replace("\\", "").upper()
        if not name:
            continue
        closing = "/" in m.group("pre") or m.group("post").lstrip().startswith("/")
        if closing:
            opened = open_at.pop(name, None)
            if opened is not None:
                spans.append((opened, end))
        else:
            open_at.setdefault(name, start)
    return spans


# --------------------------------------------------------------------------------------
# Stage D2: neutralised look-alikes of internal tokens
# --------------------------------------------------------------------------------------

# User text reaches the prompt neutralised ("<!STRICT_MODE_AGGRESSIVE>" as
# "‹!STRICT_MODE_AGGRESSIVE›", "[INST]" as "⁅INST⁆"), and so do stored memories and
# recalled turns. A model that echoes them would show a person our tag names: the same
# alternatives as the oracle, with the neutraliser's brackets, find them.
_LOOKALIKE_RE = re.compile(
    _internal_token_pattern(_SAFE_LT, _SAFE_GT, _SAFE_LBRACKET, _SAFE_RBRACKET), _FLAGS
)
# The rest of an angle look-alike: up to its "›" on the same line, else its name ("‹!TAG"
# is what an unclosed "<!TAG" becomes). Bounded, and never crossing another "‹".
_LOOKALIKE_TAIL_RE = re.compile(rf"[^{_SAFE_LT}{_SAFE_GT}\n]{{0,200}}?{_SAFE_GT}|[\w\-.:]*+")


def _lookalike_spans(text: str) -> list[tuple[int, int]]:
    """Each neutralised token, alone: unlike a real ``<think>``, a ``‹think›`` opens no
    block (it is an echo of user text, not reasoning), so nothing around it goes."""
    spans: list[tuple[int, int]] = []
    for m in _LOOKALIKE_RE.finditer(text):
        end = m.end()
        if text[m.start()] == _SAFE_LT and text[end - 1] != _SAFE_GT:
            tail = _LOOKALIKE_TAIL_RE.match(text, end)
            end = tail.end() if tail else end
        spans.append((m.start(), end))
    return spans


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
    _line_re(
        RECALL_LINE_FORMAT,
        {
            "when": r"[^,\n]{1,40}",
            # Case-sensitive, as the engine writes them: "Last week, they said: ..." is
            # ordinary English, "- 2 days ago, They said: ..." is the engine's line.
            "who": "(?-i:"
            + "|".join(re.escape(w) for w in (RECALL_SPEAKER_BOT, RECALL_SPEAKER_PERSON))
            + ")",
            "content": r".*",
        },
    ),
    _line_re(RESPONSE_STYLE_FORMAT, {"style": r"[\w\-]{1,40}"}),
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


def _clean_once(text: str, sources: tuple[str, ...], removed: list[str]) -> str:
    text = _splice(text, _harmony_spans(text), removed)
    text = _splice(text, _thinking_spans(text), removed)
    text = _splice(text, _template_spans(text), removed)
    text = _splice(text, _marker_spans(text), removed)
    text = _splice(text, _lookalike_spans(text), removed)
    text = _splice(text, _header_spans(text), removed)
    text = _splice(text, _prompt_block_spans(text), removed)
    text = _splice(text, _echo_spans(text, sources), removed)
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
    current = text
    settled = False
    for _ in range(_MAX_ROUNDS):
        cleaned = _clean_once(current, sources, removed)
        if cleaned == current:
            settled = True
            break
        current = cleaned
    # Text that never settled is hostile: refuse it rather than guess.
    if not settled or contains_internal_marker(current) or not _has_visible(current):
        if current:
            removed.append(current)
        return CleanedReply(text="", removed=tuple(removed), fell_back=True)
    return CleanedReply(text=current, removed=tuple(removed), fell_back=False)


# --------------------------------------------------------------------------------------
# Neutralising user text
# --------------------------------------------------------------------------------------

# C0 controls except \t and \n, DEL and C1 controls. \r is handled first (CRLF -> LF).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_LT_AT_RE = re.compile(rf"\\?{_LT}", _FLAGS)


def fix_unicode(text: str) -> str:
    """``text`` with lone UTF-16 surrogates (from bytes that were not UTF-8, or JSON
    escapes such as "\\udcff") replaced by U+FFFD: SQLite and the models refuse them."""
    if not _SURROGATE_RE.search(text):
        return text
    # Pairs written as two code units become one character; lone halves become U+FFFD.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _SURROGATE_RE.sub("\ufffd", fixed)


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
    text = "\n".join(lines)
    for _ in range(4):
        if not contains_internal_marker(text):
            break
        text = _defang_once(text)
    if contains_internal_marker(text):
        # Overlapping hostile constructs: defang every angle bracket that remains.
        text = _defang_once(_LT_RE.sub(_SAFE_LT, text))
    return text


# How a line of user text is quoted.
_QUOTE = "> "

# A line of user text that merely starts like one of our headers ("## Recent conversation
# follows", "System:override") is quoted too.
_HEADER_PREFIXES = (*(h.casefold() for h in PROMPT_SECTION_HEADERS), "system:", "[system]")


def _starts_like_our_header(line: str) -> bool:
    return line.lstrip().casefold().startswith(_HEADER_PREFIXES)
