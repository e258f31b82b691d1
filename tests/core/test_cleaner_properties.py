"""Property tests for the reply cleaner: whatever the model emits, nothing internal comes
out, the visible words around the removed parts survive in order, and cleaning twice is
the same as cleaning once."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.cleaner import ECHO_LABELS, PROMPT_SECTION_HEADERS, clean_reply, contains_internal_marker

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Visible text: letters (with Portuguese accents), digits, spaces, newlines and the
# punctuation a reply uses. No "<", "[", "&", "|", "\\", "#", "*", "_", "`" or ":" so the
# visible text can never itself form a tag or a "Label:" line.
VISIBLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "áàâãéêíóôõúçÁÂÃÉÊÍÓÔÕÚÇ0123456789"
    "     \n\n.,!?'\"()-…😊"
)
# A line that is only one of our section titles or labels ("Persona", "System prompt") is
# dropped on purpose (fail closed); visible text here never contains one.
_TITLES = [
    " ".join(t.strip("# ").casefold().split()) for t in (*PROMPT_SECTION_HEADERS, *ECHO_LABELS)
]


def _free_of_titles(text: str) -> bool:
    flat = " ".join(text.casefold().split())
    return not any(title in flat for title in _TITLES)


visible = st.text(alphabet=VISIBLE_ALPHABET, max_size=40)

_tag_name = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,24}", fullmatch=True)
_space = st.sampled_from(["", " ", "  ", "\u200b"])


@st.composite
def open_marker(draw: st.DrawFn) -> str:
    # Opening markers only, with an "O" prefix: a closer with the same name would (rightly)
    # take the text between them along, which this property does not model.
    name = "O" + draw(_tag_name)
    lt, gt = draw(st.sampled_from([("<", ">"), ("&lt;", "&gt;"), ("＜", "＞"), ("\\<", "\\>")]))
    return f"{lt}{draw(_space)}!{draw(_space)}{name}{draw(_space)}{gt}"


@st.composite
def close_marker(draw: st.DrawFn) -> str:
    name = "C" + draw(_tag_name)
    form = draw(st.sampled_from(["</!{}>", "<!/{}>", "< / ! {} >"]))
    return form.format(name)


OPENERS = [
    "<think>",
    "<THINK>",
    "<Thinking>",
    "<thinking mode='deep'>",
    "< think >",
    "<!THINKING>",
    "<|thinking|>",
    "<reasoning>",
    "<reflection>",
    "[THINK]",
]
CLOSERS = [
    "</think>",
    "</THINK>",
    "</Thinking >",
    "<!/THINKING>",
    "</!THINKING>",
    "<|/thinking|>",
    "</reasoning>",
    "</reflection>",
    "<\\/think>",
    "[/THINK]",
]
# Anything at all may be inside a thinking block except a tag that would end it early.
inner_text = st.text(
    alphabet=st.characters(blacklist_characters="<>[]&＜﹤\\", blacklist_categories=("Cs",)),
    max_size=30,
)


def thinking_block() -> st.SearchStrategy[str]:
    return st.recursive(
        inner_text,
        lambda inner: st.tuples(
            st.sampled_from(OPENERS), st.lists(inner, max_size=3), st.sampled_from(CLOSERS)
        ).map(lambda t: t[0] + "".join(t[1]) + t[2]),
        max_leaves=6,
    ).filter(lambda s: contains_internal_marker(s))


neutral_template = st.sampled_from(
    ["<s>", "<|begin_of_text|>", "<bos>", "<pad>", "<|message|>", "<|im_sep|>"]
)
internal = st.one_of(open_marker(), close_marker(), thinking_block(), neutral_template)


@st.composite
def reply_with_internals(draw: st.DrawFn) -> tuple[list[str], str]:
    """Visible segments with internal pieces between (and maybe around) them."""
    segments = draw(st.lists(visible, min_size=1, max_size=6))
    pieces: list[str] = []
    if draw(st.booleans()):
        pieces.append(draw(internal))
    for i, seg in enumerate(segments):
        pieces.append(seg)
        if i < len(segments) - 1 or draw(st.booleans()):
            pieces.append(draw(internal))
    return segments, "".join(pieces)


def _runs(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def _has_visible(text: str) -> bool:
    return any(ch.isalnum() or ch == "😊" for ch in text)


@SETTINGS
@given(reply_with_internals())
def test_internals_removed_and_visible_words_kept_in_order(case: tuple[list[str], str]) -> None:
    segments, raw = case
    assume(_free_of_titles(" ".join(segments)))
    result = clean_reply(raw)
    assert not contains_internal_marker(result.text)
    joined = "".join(segments)
    if not _has_visible(joined):
        assert result.fell_back and result.text == ""
        return
    assert not result.fell_back
    # Every word outside the removed regions is still there, in order, and nothing but
    # whitespace was added or dropped around them.
    assert _runs(result.text) == [run for seg in segments for run in _runs(seg)]
    assert "".join(result.text.split()) == "".join(joined.split())


@SETTINGS
@given(visible)
def test_text_without_internals_only_changes_whitespace(text: str) -> None:
    assume(_free_of_titles(text))
    result = clean_reply(text)
    if _has_visible(text):
        assert "".join(result.text.split()) == "".join(text.split())
        assert result.removed == ()
    else:
        assert result.fell_back
    assert "\n\n\n" not in result.text
    assert result.text == result.text.strip()


@SETTINGS
@given(reply_with_internals())
def test_idempotent_on_replies(case: tuple[list[str], str]) -> None:
    once = clean_reply(case[1])
    twice = clean_reply(once.text)
    assert twice.text == once.text
    assert twice.removed == ()


TAG_FRAGMENTS = [
    "<",
    ">",
    "!",
    "/",
    "\\",
    "|",
    "｜",
    "[",
    "]",
    " ",
    "\n",
    "\n\n",
    "&lt;",
    "&gt;",
    "＜",
    "＞",
    "\u200b",
    "think",
    "THINKING",
    "reasoning",
    "</",
    "<!",
    "<|",
    "|>",
    "im_start",
    "im_end",
    "assistant",
    "user",
    "system",
    "s>",
    "INST",
    "SYS",
    "end_of_turn",
    "STRICT_MODE",
    "System:",
    "## Structured memories",
    "Olá",
    "ação",
    "word",
    "-->",
    "<!--",
]
tag_soup = st.lists(
    st.one_of(st.sampled_from(TAG_FRAGMENTS), st.text(max_size=3)), max_size=40
).map("".join)
any_text = st.one_of(st.text(max_size=200), tag_soup)


@SETTINGS
@given(any_text)
def test_no_marker_survives_any_text(text: str) -> None:
    result = clean_reply(text)
    assert not contains_internal_marker(result.text)
    assert result.fell_back == (result.text == "")


@SETTINGS
@given(any_text, st.lists(st.text(max_size=80), max_size=2))
def test_idempotent_on_any_text(text: str, sources: list[str]) -> None:
    once = clean_reply(text, echo_sources=sources)
    assert clean_reply(once.text, echo_sources=sources).text == once.text


@SETTINGS
@given(any_text)
def test_fell_back_never_returns_raw_text(text: str) -> None:
    result = clean_reply(text)
    if result.fell_back:
        assert result.text == ""
    else:
        assert result.text.strip() == result.text != ""
