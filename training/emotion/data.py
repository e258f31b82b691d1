"""Training data readers, mapped to our five states.

Mapping (see ``shared/data/README.md``): agressivo = anger, annoyance, disgust; feliz =
joy, amusement, excitement, gratitude, love, optimism, relief, pride; triste = sadness,
grief, disappointment, remorse; confuso = confusion; neutro = neutral (GoEmotions).
BRIGHTER: anger and/or disgust -> agressivo, joy -> feliz, sadness -> triste, none ->
neutro. A row is kept only when all its labels map to one state; any other label (fear,
surprise, admiration, ...) drops the row, because we cannot say which state it is.

For *training* only, :func:`read_brighter_mixed` reads some of the BRIGHTER rows that rule
drops (``MIXED_RULES``); evaluation files keep the strict mapping.
"""

from __future__ import annotations

import csv
from pathlib import Path

from core.emotion.data import Example, missing_data, read_labelled_tsv

GOEMOTIONS_MAP: dict[str, str] = {
    "anger": "agressivo",
    "annoyance": "agressivo",
    "disgust": "agressivo",
    "joy": "feliz",
    "amusement": "feliz",
    "excitement": "feliz",
    "gratitude": "feliz",
    "love": "feliz",
    "optimism": "feliz",
    "relief": "feliz",
    "pride": "feliz",
    "sadness": "triste",
    "grief": "triste",
    "disappointment": "triste",
    "remorse": "triste",
    "confusion": "confuso",
    "neutral": "neutro",
}

BRIGHTER_MAP: dict[str, str] = {
    "anger": "agressivo",
    "disgust": "agressivo",
    "joy": "feliz",
    "sadness": "triste",
}

# Training-only readings of BRIGHTER rows whose labels map to more than one state (or carry
# an unmapped label), see :func:`read_brighter_mixed`:
# * "agressivo": anger or disgust without joy is agressivo, whatever else is marked
#   ("anger, sadness" is an angry complaint more often than a sad one);
# * "lenient": that, and unmapped labels (fear, surprise) are ignored when the remaining
#   ones map to one state ("joy, surprise" -> feliz, "sadness, fear" -> triste).
MIXED_RULES = ("agressivo", "lenient")

# Written by the AKIRA authors for this project (no external source).
WRITTEN_EXAMPLES = Path(__file__).resolve().parent / "examples_pt.tsv"
# More written Portuguese examples, used by the ensemble's classifier only
# (``weights/ensemble_classifier.npz``, see :mod:`training.emotion.ensemble_train`).
WRITTEN_MORE = Path(__file__).resolve().parent / "examples_pt_more.tsv"


def _single_state(labels: list[str], mapping: dict[str, str]) -> str | None:
    states = {mapping.get(name) for name in labels}
    if not labels or None in states or len(states) != 1:
        return None
    return next(iter(states))  # type: ignore[return-value]


def read_goemotions(path: Path, emotions_file: Path | None = None) -> list[Example]:
    """The raw GoEmotions TSV: ``text<TAB>comma-separated label ids<TAB>id``."""
    names_path = emotions_file or path.parent / "emotions.txt"
    names = names_path.read_text(encoding="utf-8").split()
    out: list[Example] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            labels = [names[int(i)] for i in parts[1].split(",") if i.strip()]
            state = _single_state(labels, GOEMOTIONS_MAP)
            if state is not None and parts[0].strip():
                out.append(Example(parts[0], state, f"goemotions:{path.name}"))
    return out


def read_brighter(path: Path) -> list[Example]:
    """A BRIGHTER track-A CSV with one 0/1 column per emotion."""
    out: list[Example] = []
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            emotions = [k for k, v in row.items() if k not in ("id", "text") and v == "1"]
            state = "neutro" if not emotions else _single_state(emotions, BRIGHTER_MAP)
            if state is not None and row["text"].strip():
                out.append(Example(row["text"], state, f"brighter:{path.name}"))
    return out


def mixed_state(emotions: list[str], rule: str) -> str | None:
    """The training state of a BRIGHTER row the strict mapping drops, under ``rule``
    (one of ``MIXED_RULES``); None when the rule has no reading for it either (or when
    the strict mapping already reads it)."""
    if rule not in MIXED_RULES:
        raise ValueError(f"unknown mixed-row rule {rule!r}; one of {MIXED_RULES}")
    if not emotions or _single_state(emotions, BRIGHTER_MAP) is not None:
        return None
    present = set(emotions)
    if present & {"anger", "disgust"} and "joy" not in present:
        return "agressivo"
    if rule == "lenient":
        return _single_state([e for e in emotions if e in BRIGHTER_MAP], BRIGHTER_MAP)
    return None


def read_brighter_mixed(path: Path, rule: str) -> list[Example]:
    """BRIGHTER rows that :func:`read_brighter` drops but ``rule`` reads (training only);
    their source is ``brighter-mixed:<file name>``."""
    out: list[Example] = []
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            emotions = [k for k, v in row.items() if k not in ("id", "text") and v == "1"]
            state = mixed_state(emotions, rule)
            if state is not None and row["text"].strip():
                out.append(Example(row["text"], state, f"brighter-mixed:{path.name}"))
    return out


__all__ = [
    "BRIGHTER_MAP",
    "GOEMOTIONS_MAP",
    "MIXED_RULES",
    "WRITTEN_EXAMPLES",
    "WRITTEN_MORE",
    "Example",
    "missing_data",
    "mixed_state",
    "read_brighter",
    "read_brighter_mixed",
    "read_goemotions",
    "read_labelled_tsv",
]
