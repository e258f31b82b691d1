"""Learned readings recall makes of chat lines: whether a message asks for a suggestion
or help, whether a line of the person states what a suggestion for them must fit (a diet,
an allergy, a budget, who they live with, what they cannot do), and whether it opens a
matter a later message may take up without its words (a problem, a plan awaiting its
outcome: "the boiler's making that noise again", "biópsia mês que vem").

The word grammar of :mod:`core.memory.query` (``asks_for_help``, ``describes_self``)
reads the forms it was written from; people phrase both in more ways than any list
("bora pensar num presente?", "Sábado tem churrasco, qual bebida eu levo?", "We are Jain,
so no onion"). Each head is a logistic regression over the memory's second encoder's
vector of the line alone (the vector the emotion stage computes for every message, so
reading it costs no model pass). Recall takes a line as either of the first two readings
when the grammar or the head says so. The third marks lines as awaiting an outcome beside
the grammar's (``QueryConfig.opens_threshold``, the thread priors) and is a signal of the
learned order (:mod:`core.memory.rerank`).

The weights (``weights/recall_heads.npz``) ship with the package beside a JSON recipe
naming the encoder they were fitted on; vectors of another encoder mean nothing to them,
so :func:`load_heads` gives None for any other. ``python -m training.recall.heads``
rebuilds both files from the dev chats of ``benchmarks/data``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
DEFAULT_HEADS = WEIGHTS_DIR / "recall_heads.npz"
HEAD_NAMES = ("asks", "states")
# Read when the file has it (heads fitted before it existed load without it).
OPTIONAL_HEADS = ("opens",)


@dataclass(frozen=True, slots=True)
class LinearHead:
    """Standardise, then a logistic unit: ``sigmoid(((x - mean) / scale) . weights + bias)``."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def probabilities(self, matrix: np.ndarray) -> np.ndarray:
        """One probability a row of ``matrix`` (or one for a single vector)."""
        z = ((np.asarray(matrix, dtype=np.float32) - self.mean) / self.scale) @ self.weights
        return 1.0 / (1.0 + np.exp(-(z + self.bias)))

    def read(self, vectors: Mapping[str, np.ndarray]) -> dict[str, float]:
        """One probability an id of ``vectors`` (id -> vector), in one product."""
        if not vectors:
            return {}
        ids = list(vectors)
        read = self.probabilities(np.stack([vectors[i] for i in ids]))
        return {i: float(p) for i, p in zip(ids, read, strict=True)}


@dataclass(frozen=True, slots=True)
class RecallHeads:
    """The heads and the encoder whose vectors they read. ``opens``: a line of the person
    opens a matter a later message will follow up without its words (a problem, a plan
    awaiting its outcome); the thread priors and the learned order read it. None in
    heads fitted before it existed."""

    encoder: str
    asks: LinearHead
    states: LinearHead
    opens: LinearHead | None = None


def recipe_path(weights: Path) -> Path:
    return weights.with_suffix(".json")


def save_heads(heads: RecallHeads, path: Path, recipe: dict[str, object]) -> None:
    """Write ``heads`` to ``path`` and ``recipe`` (with the encoder's name) beside it."""
    arrays: dict[str, np.ndarray] = {}
    for name in (*HEAD_NAMES, *OPTIONAL_HEADS):
        head: LinearHead | None = getattr(heads, name)
        if head is None:
            continue
        arrays[f"{name}.mean"] = head.mean.astype(np.float32)
        arrays[f"{name}.scale"] = head.scale.astype(np.float32)
        arrays[f"{name}.weights"] = head.weights.astype(np.float32)
        arrays[f"{name}.bias"] = np.array([head.bias], dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)  # type: ignore[arg-type]
    recipe_path(path).write_text(
        json.dumps({**recipe, "encoder": heads.encoder}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )


@functools.lru_cache(maxsize=8)
def _read(path: Path) -> RecallHeads | None:
    try:
        recipe = json.loads(recipe_path(path).read_text(encoding="utf-8"))
        with np.load(path) as data:
            heads = {
                name: LinearHead(
                    mean=data[f"{name}.mean"],
                    scale=data[f"{name}.scale"],
                    weights=data[f"{name}.weights"],
                    bias=float(data[f"{name}.bias"][0]),
                )
                for name in (*HEAD_NAMES, *OPTIONAL_HEADS)
                if name in HEAD_NAMES or f"{name}.mean" in data
            }
    except (OSError, ValueError, KeyError) as exc:
        # Recall goes on with the word grammar alone: a missing file is not worth a
        # failed reply.
        log.warning("recall heads not loaded from %s: %s", path, exc)
        return None
    return RecallHeads(encoder=str(recipe.get("encoder", "")), **heads)


def load_heads(encoder: str, path: str | Path | None = None) -> RecallHeads | None:
    """The heads at ``path`` (default: the shipped ones) when they were fitted on
    ``encoder``'s vectors; None when they were not, or cannot be read."""
    heads = _read(Path(path) if path else DEFAULT_HEADS)
    if heads is None or heads.encoder != encoder:
        return None
    return heads
