"""Reading labelled emotion files: TSVs whose header names ``text`` and ``label`` columns
(the dev files in ``shared/data``, a user's own files), and the one-line message for a
benchmark whose data is missing. The readers of the public training sets and their mapping
to our five states live with the training code (``training/emotion/data.py``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


def missing_data(path: Path, what: str = "the evaluation and training data") -> str | None:
    """None when ``path`` exists, else one line for the person running a benchmark or a
    training script: the data is not in the repository (its licences and size keep it
    apart), but in the shared ``data`` folder beside the checkout (``../shared/data``)."""
    if path.exists():
        return None
    return (
        f"{path} not found: {what} lives in the shared data folder beside the checkout "
        "(../shared/data, see its README); pass another path to use your own"
    )


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    source: str


def read_labelled_tsv(path: Path) -> list[Example]:
    """A TSV whose header names ``text`` and ``label`` columns (our dev files, our examples).

    Lines starting with ``#`` before the header are comments (source notes).
    """
    out: list[Example] = []
    with path.open(encoding="utf-8", newline="") as handle:
        header = handle.readline()
        while header.startswith("#"):
            header = handle.readline()
        fields = next(csv.reader([header], delimiter="\t"))
        reader = csv.DictReader(handle, fieldnames=fields, delimiter="\t")
        for row in reader:
            text, label = (row.get("text") or "").strip(), (row.get("label") or "").strip()
            if text and label:
                out.append(Example(text, label, f"file:{path.name}"))
    return out
