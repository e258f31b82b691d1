"""Fixing text that is not valid Unicode for storage and models."""

from __future__ import annotations

import re

_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def fix_unicode(text: str) -> str:
    """``text`` with lone UTF-16 surrogates (from bytes that were not UTF-8, or JSON
    escapes such as "\\udcff") replaced by U+FFFD: SQLite and the models refuse them."""
    if not _SURROGATE_RE.search(text):
        return text
    # Pairs written as two code units become one character; lone halves become U+FFFD.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _SURROGATE_RE.sub("\ufffd", fixed)
