"""The default detector: a small numpy classifier over sentence embeddings.

The weights (``weights/classifier.npz``) ship with the package beside a JSON recipe
(``weights/classifier.json``) naming the embedding model and dimension they were trained
on, the training data and hyper-parameters. Vectors from another model are meaningless to
the head, so loading with a different embedder raises :class:`WeightsMismatchError`
instead of returning nonsense. ``python -m core.emotion.train`` rebuilds both files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import Embedder
from core.emotion.detector import (
    EmotionDetector,
    EmotionError,
    EmotionReading,
    WeightsMismatchError,
)

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
DEFAULT_WEIGHTS = WEIGHTS_DIR / "classifier.npz"


@dataclass
class Head:
    """Standardise -> optional ReLU hidden layer -> linear -> softmax, plus a per-class
    log-prior adjustment (chosen on held-out training data, see ``train.py``)."""

    labels: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    w_hidden: np.ndarray | None = None
    b_hidden: np.ndarray | None = None
    log_adjust: np.ndarray | None = None

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def logits(self, vectors: np.ndarray) -> np.ndarray:
        z = (np.asarray(vectors, dtype=np.float32) - self.mean) / self.scale
        if self.w_hidden is not None and self.b_hidden is not None:
            z = np.maximum(z @ self.w_hidden + self.b_hidden, 0.0)
        out = z @ self.w_out + self.b_out
        if self.log_adjust is not None:
            out = out + self.log_adjust
        return np.asarray(out, dtype=np.float32)

    def proba(self, vectors: np.ndarray) -> np.ndarray:
        return softmax(self.logits(vectors))

    def save(self, path: Path) -> None:
        arrays: dict[str, Any] = {
            "labels": np.array(self.labels),
            "mean": self.mean.astype(np.float32),
            "scale": self.scale.astype(np.float32),
            "w_out": self.w_out.astype(np.float32),
            "b_out": self.b_out.astype(np.float32),
        }
        if self.w_hidden is not None and self.b_hidden is not None:
            # float16 halves the file; the hidden layer loses nothing measurable.
            arrays["w_hidden"] = self.w_hidden.astype(np.float16)
            arrays["b_hidden"] = self.b_hidden.astype(np.float32)
        if self.log_adjust is not None:
            arrays["log_adjust"] = self.log_adjust.astype(np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: Path) -> Head:
        with np.load(path, allow_pickle=False) as data:

            def get(key: str) -> np.ndarray | None:
                return data[key].astype(np.float32) if key in data.files else None

            return cls(
                labels=tuple(str(x) for x in data["labels"]),
                mean=data["mean"].astype(np.float32),
                scale=data["scale"].astype(np.float32),
                w_out=data["w_out"].astype(np.float32),
                b_out=data["b_out"].astype(np.float32),
                w_hidden=get("w_hidden"),
                b_hidden=get("b_hidden"),
                log_adjust=get("log_adjust"),
            )


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float32)


def recipe_path(weights: Path) -> Path:
    return weights.with_suffix(".json")


def read_recipe(weights: Path = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """The JSON metadata beside a weights file."""
    path = recipe_path(weights)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmotionError(f"cannot read classifier recipe {path}: {exc}") from exc
    if not isinstance(data, dict) or "embedder" not in data:
        raise EmotionError(f"classifier recipe {path} has no 'embedder' section")
    return data


def weights_fit(embedder: Embedder, weights: Path = DEFAULT_WEIGHTS) -> bool:
    """Whether ``weights`` were trained on ``embedder``'s vectors (same name and dim)."""
    try:
        meta = read_recipe(weights)["embedder"]
    except EmotionError:
        return False
    return bool(meta.get("name") == embedder.name and int(meta.get("dim", -1)) == embedder.dim)


class ClassifierDetector(EmotionDetector):
    """Embeds each message with ``embedder`` and classifies the vector."""

    name = "classifier"

    def __init__(self, embedder: Embedder, weights: Path = DEFAULT_WEIGHTS) -> None:
        recipe = read_recipe(weights)
        meta = recipe["embedder"]
        if meta.get("name") != embedder.name or int(meta.get("dim", -1)) != embedder.dim:
            raise WeightsMismatchError(
                f"emotion classifier weights {weights.name} were trained on embedder "
                f"{meta.get('name')!r} (dim {meta.get('dim')}), but the configured embedder is "
                f"{embedder.name!r} (dim {embedder.dim}); use that embedder, retrain with "
                "`python -m core.emotion.train`, or choose another emotion detector"
            )
        try:
            self._head = Head.load(weights)
        except (OSError, KeyError, ValueError) as exc:
            raise EmotionError(f"cannot load emotion classifier weights {weights}: {exc}") from exc
        if self._head.dim != embedder.dim:
            raise WeightsMismatchError(
                f"weights {weights.name} expect {self._head.dim}-d vectors, embedder gives {embedder.dim}"
            )
        self._embedder = embedder
        self.recipe = recipe
        self.labels = self._head.labels

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, columns in :attr:`labels` order."""
        return self._head.proba(self._embedder.embed_queries(list(texts)))

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        proba = self.probabilities(texts)
        best = proba.argmax(axis=1)
        return [
            EmotionReading(self.labels[int(i)], round(float(proba[row, i]), 4))
            for row, i in enumerate(best)
        ]
