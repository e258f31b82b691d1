"""Decoded forms of a text, for the reply check (:mod:`core.cleaner.guard`).

A model that obeys an extraction attack rarely returns the prompt as it was written: it
comes back as a string literal (``"You are AKIRA,\\n..."``), HTML entities, base64 or hex,
with zero-width characters between the letters, with Cyrillic look-alikes, in full-width
letters, spaced out letter by letter. :func:`decoded` undoes the encodings (string
escapes, entities, percent-encoding, Unicode tag characters, base64 and hex runs long
enough to hide a sentence) and :func:`letters` reduces the result to the stream of its
letters and digits (case, accents, homoglyphs, punctuation, markup and spacing gone), the
form in which two texts are compared.

Pure functions, no I/O; the homoglyph table is read once from the Unicode confusables data
of ``confusable-homoglyphs``.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import unicodedata
from functools import lru_cache
from importlib import resources
from urllib.parse import unquote

from core.cleaner.unicode import fix_unicode

# Invisible format characters (zero-width space/joiners, word joiner, soft hyphen,
# directional marks and overrides, variation selectors, BOM): dropped, so that
# "Y\u200bo\u200bu" reads "You".
_INVISIBLE_RE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]"
)
# Unicode tag characters (U+E0020..U+E007E) spell ASCII invisibly ("ASCII smuggling").
_TAG_CHARS_RE = re.compile("[\U000e0000-\U000e007f]+")
# String escapes as Python, JSON and JavaScript write them.
_ESCAPE_RE = re.compile(
    r"\\(?:u\{?([0-9a-fA-F]{4,6})\}?|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|([nrtfbv\"'\\/`]))"
)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "r": "\n",
    "t": " ",
    "f": " ",
    "b": "",
    "v": " ",
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "`": "`",
}
_PERCENT_RE = re.compile(r"%[0-9a-fA-F]{2}")
_PERCENT_MIN = 3  # escapes before a text counts as URL-encoded ("50% off" has none)
# Runs of base64 (standard or URL-safe) that could hide a sentence: 16 characters carry 12
# bytes, two or three words. Shorter runs are ordinary words or ids. A run wrapped over
# several lines (as encoders print it) is joined first.
_B64_MIN = 16
# (Each pattern starts where a run starts: tried from inside a word, it would rescan the
# rest of the word from every position.)
_B64_RE = re.compile(rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{{{_B64_MIN},}}+={{0,2}}")
# Anchored at line starts and possessive: tried inside a long run, it would rescan the
# rest of the run from every position (quadratic in the run's length).
B64_WRAPPED_RE = re.compile(
    r"^[ \t]*+(?:[A-Za-z0-9+/]{16,}+[ \t]*+\n[ \t]*+)++[A-Za-z0-9+/]{2,}+={0,2}[ \t]*$",
    re.MULTILINE,
)
# Hex: 12 bytes or more, written together or separated ("48 65 6c", "0x48,0x65", "48:65").
# A byte of text in hex mostly starts with a digit (ASCII is 0x20-0x7e): a run is looked
# for from a digit, so ordinary words cost nothing.
_HEX_RE = re.compile(
    r"(?<![0-9a-fA-F])(?:0x)?[0-9][0-9a-fA-F](?:[ \t,:;\-]{0,2}(?:0x)?[0-9a-fA-F]{2}){11,}+"
)
_PRINTABLE_MIN = 0.9  # share of printable characters for a decoded run to count as text
_MAX_PASSES = 3  # encodings inside encodings (a base64 of a string literal...)


def _printable_text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.strip():
        return None
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    if printable < _PRINTABLE_MIN * len(text):
        return None
    # Two letters at least: decoded noise that happens to be printable has few.
    return text if sum(ch.isalpha() for ch in text) >= 2 else None


def _b64_text(run: str) -> str | None:
    compact = "".join(run.split()).rstrip("=")
    alphabet_alt = "-" in compact or "_" in compact
    # An attacker (or a model) may start the run mid-word ("Here:SGVsbG8..."): try the four
    # alignments and keep the first that decodes to text.
    for skip in range(4):
        body = compact[skip:]
        if len(body) % 4 == 1:  # a lone last character carries no whole byte
            body = body[:-1]
        if len(body) < _B64_MIN - 3:
            break
        padded = body + "=" * (-len(body) % 4)
        try:
            raw = (
                base64.urlsafe_b64decode(padded)
                if alphabet_alt
                else base64.b64decode(padded, validate=True)
            )
        except (binascii.Error, ValueError):
            continue
        text = _printable_text(raw)
        if text is not None:
            return text
    return None


def _hex_text(run: str) -> str | None:
    digits = re.sub(r"0x|[^0-9a-fA-F]", "", run)
    if len(digits) % 2:
        digits = digits[:-1]
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        return None
    return _printable_text(raw)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2) or match.group(3)
    if code is not None:
        try:
            return chr(int(code, 16))
        except (ValueError, OverflowError):
            return match.group()
    return _SIMPLE_ESCAPES[match.group(4)]


def _decode_runs(text: str) -> str:
    if "\n" in text:
        text = B64_WRAPPED_RE.sub(lambda m: "".join(m.group().split()), text)

    def b64(match: re.Match[str]) -> str:
        found = _b64_text(match.group())
        return match.group() if found is None else f" {found} "

    def hexa(match: re.Match[str]) -> str:
        found = _hex_text(match.group())
        return match.group() if found is None else f" {found} "

    text = _B64_RE.sub(b64, text)
    return _HEX_RE.sub(hexa, text)


def _decode_once(text: str) -> str:
    if "\\" in text:
        text = _ESCAPE_RE.sub(_unescape, text)
        text = fix_unicode(text)  # "\ud83d\ude00" written as two escapes
    if "&" in text:
        text = html.unescape(text)
    if "%" in text and len(_PERCENT_RE.findall(text, 0, 4096)) >= _PERCENT_MIN:
        # URL-encoded text ("You%20are%20AKIRA%2C"): a single escape between words is
        # enough to break the letters apart, so the whole text is unquoted.
        text = unquote(text)
    if max(text, default=" ") >= "\U000e0000" and _TAG_CHARS_RE.search(text):
        text = _TAG_CHARS_RE.sub(
            lambda m: "".join(chr(ord(c) - 0xE0000) for c in m.group() if ord(c) < 0xE007F),
            text,
        )
    text = _INVISIBLE_RE.sub("", text)
    return _decode_runs(text)


def decoded(text: str) -> str:
    """``text`` with its encodings undone (see the module docstring), repeated until nothing
    changes (at most a few passes). What was plain stays as it was."""
    for _ in range(_MAX_PASSES):
        new = _decode_once(text)
        if new == text:
            break
        text = new
    return text


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Non-ASCII characters a reader takes for an ASCII letter or digit (Cyrillic "а",
    Greek "Τ"...) -> that ASCII character (case kept: "Τhey" reads "They"), from the
    Unicode confusables data. ASCII itself is never remapped ("l" stays "l")."""
    raw = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    data: dict[str, list[dict[str, str]]] = json.loads(raw)
    table: dict[int, str] = {}
    for char, glyphs in data.items():
        if len(char) != 1 or char.isascii():
            continue
        targets = [
            g for g in glyphs if len(g.get("c", "")) == 1 and g["c"].isascii() and g["c"].isalnum()
        ]
        if not targets:
            continue
        # "I", "l" and "1" look alike: prefer the letter the character is named after
        # (CYRILLIC ... LETTER I -> "i"), else the first look-alike.
        last = unicodedata.name(char, "").rsplit(" ", 1)[-1]
        named = [g for g in targets if g.get("n", "").rsplit(" ", 1)[-1] == last]
        table[ord(char)] = (named or targets)[0]["c"]
    return table


_NOT_ALNUM_RE = re.compile(r"[\W_]+")


def letters(text: str) -> str:
    """The letters and digits of ``text``, lower-cased, without accents, homoglyphs folded
    to the ASCII letters they imitate: ``"Y o u  A R E"``, ``"you are"``, ``"Yоu-аre"``
    (Cyrillic) and ``"ＹＯＵ　ＡＲＥ"`` all give ``"youare"``."""
    if not text.isascii():
        text = readable(text)
    return _NOT_ALNUM_RE.sub("", text.casefold())


# Combining marks NFKD leaves after a base letter (accents, tildes, cedillas...).
_COMBINING_RE = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def readable(text: str) -> str:
    """``text`` as a reader sees it in ASCII where it can be: compatibility forms (full-width,
    mathematical letters) and accents undone, homoglyphs folded; spacing and punctuation
    kept, so line-level patterns still apply."""
    if text.isascii():
        return text
    text = _COMBINING_RE.sub("", unicodedata.normalize("NFKD", text))
    return text.translate(_fold_table())
