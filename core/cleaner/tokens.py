"""Internal tokens in a model reply: harmony channels, thinking blocks, chat-template
tokens and other roles' turns, ``<!TAG>`` markers and their neutralised look-alikes.
Each function returns the spans the cleaner removes."""

from __future__ import annotations

import re

from core.cleaner.patterns import (
    _EDGE,
    _FLAGS,
    _GT,
    _LT,
    _PIPE,
    _S,
    _SAFE_GT,
    _SAFE_LBRACKET,
    _SAFE_LT,
    _SAFE_RBRACKET,
    _TAG_BODY,
    _THINK_ROOT,
    _WS,
    _internal_token_pattern,
)

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
