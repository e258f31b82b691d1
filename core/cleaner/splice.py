"""Removing spans from a text and joining what is on either side."""

from __future__ import annotations

from collections.abc import Iterable

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
