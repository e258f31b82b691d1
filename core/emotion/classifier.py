"""The default detector: a small numpy classifier over sentence embeddings, with a
linear model over hashed n-grams of the text beside it (:mod:`core.emotion.ngrams`).

The weights (``weights/classifier.npz``) ship with the package beside a JSON recipe
(``weights/classifier.json``) naming the embedding model and dimension they were trained
on, the training data and hyper-parameters. Vectors from another model are meaningless to
the head, so loading with a different embedder raises :class:`WeightsMismatchError`
instead of returning nonsense. ``python -m training.emotion.train`` rebuilds both files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import Embedder, HashingEmbedder
from core.emotion.detector import (
    EmotionDetector,
    EmotionError,
    EmotionReading,
    WeightsMismatchError,
)
from core.emotion.encoders import check_checksums, embedder_for, fits, parts_of
from core.emotion.language import guess_language
from core.emotion.ngrams import ngram_rows, sparse_logits

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
DEFAULT_WEIGHTS = WEIGHTS_DIR / "classifier.npz"
# Arrays of the Portuguese head (``Head.pt_head``) in a weights file carry this prefix.
PT_PREFIX = "pt_head."


@dataclass
class Head:
    """Standardise -> optional ReLU hidden layer -> linear, plus (if ``ngram_w``) the
    logits of a linear model over hashed n-grams of the text times ``ngram_scale``
    (:mod:`core.emotion.ngrams`), plus per-class log-prior adjustments (chosen on
    out-of-fold training predictions, see ``train.py``): ``log_adjust`` for
    English/unknown text, ``log_adjust_pt`` for Portuguese; then softmax.

    ``pt_head`` (optional): a head of the same input fitted on Portuguese rows only; for
    text guessed Portuguese the raw logits are ``(1 - pt_weight) * own + pt_weight *
    pt_head``'s (its n-grams included), before the Portuguese adjustment."""

    labels: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    w_hidden: np.ndarray | None = None
    b_hidden: np.ndarray | None = None
    log_adjust: np.ndarray | None = None
    log_adjust_pt: np.ndarray | None = None
    # Width of the hashed word/char-trigram block appended to the sentence embedding
    # (0 = embedding only). Lexical cues (insults, "kkk") complement the embedding.
    hash_dim: int = 0
    ngram_w: np.ndarray | None = None  # (ngram buckets, classes)
    ngram_b: np.ndarray | None = None
    ngram_scale: float = 1.0
    pt_head: Head | None = None
    pt_weight: float = 0.0

    @property
    def dim(self) -> int:
        """The sentence-embedding dimension the head expects."""
        return int(self.mean.shape[0]) - self.hash_dim

    def features(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        return features(vectors, texts, self.hash_dim)

    def embedding_logits(self, vectors: np.ndarray) -> np.ndarray:
        """The embedding part alone (``vectors`` = :meth:`features`)."""
        z = (np.asarray(vectors, dtype=np.float32) - self.mean) / self.scale
        if self.w_hidden is not None and self.b_hidden is not None:
            z = np.maximum(z @ self.w_hidden + self.b_hidden, 0.0)
        return np.asarray(z @ self.w_out + self.b_out, dtype=np.float32)

    def ngram_logits(self, texts: Sequence[str]) -> np.ndarray:
        """The n-gram part alone, unscaled (zeros when the head has none)."""
        if self.ngram_w is None or self.ngram_b is None:
            return np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        return sparse_logits(ngram_rows(texts, self.ngram_w.shape[0]), self.ngram_w, self.ngram_b)

    def raw_logits(
        self,
        vectors: np.ndarray,
        texts: Sequence[str] | None = None,
        languages: Sequence[str] | None = None,
    ) -> np.ndarray:
        """Embedding + scaled n-gram logits; rows whose ``languages`` entry is "pt"
        blended with the Portuguese head's (when there is one)."""
        out = self.embedding_logits(vectors)
        if self.ngram_w is not None:
            if texts is None:
                raise EmotionError("this classifier head reads n-grams: pass the texts too")
            out = out + self.ngram_scale * self.ngram_logits(texts)
        if self.pt_head is not None and self.pt_weight and languages is not None:
            pt = np.flatnonzero([lang == "pt" for lang in languages])
            if len(pt):
                own = out[pt]
                rows = [texts[int(i)] for i in pt] if texts is not None else None
                theirs = self.pt_head.raw_logits(vectors[pt], rows)
                out[pt] = (1.0 - self.pt_weight) * own + self.pt_weight * theirs
        return out

    def logits(
        self,
        vectors: np.ndarray,
        languages: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
    ) -> np.ndarray:
        """Adjusted logits; ``languages`` ("pt"/"en" per row) selects the Portuguese head
        (if any) and the adjustment."""
        out = self.raw_logits(vectors, texts, languages)
        if self.log_adjust is not None:
            out = out + self.log_adjust
        if self.log_adjust_pt is not None and languages is not None:
            pt = np.array([lang == "pt" for lang in languages], dtype=bool)
            base = self.log_adjust if self.log_adjust is not None else 0.0
            out[pt] += self.log_adjust_pt - base
        return out

    def proba(
        self,
        vectors: np.ndarray,
        languages: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
    ) -> np.ndarray:
        return softmax(self.logits(vectors, languages, texts))

    def save(self, path: Path) -> None:
        arrays = self._arrays()
        if self.pt_head is not None:
            if self.pt_head.pt_head is not None:
                raise ValueError("a Portuguese head cannot carry one of its own")
            arrays.update({f"{PT_PREFIX}{k}": v for k, v in self.pt_head._arrays().items()})
            arrays["pt_weight"] = np.array(self.pt_weight, dtype=np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, **arrays)

    def _arrays(self) -> dict[str, Any]:
        arrays: dict[str, Any] = {
            "labels": np.array(self.labels),
            "mean": self.mean.astype(np.float32),
            "scale": self.scale.astype(np.float32),
            "w_out": self.w_out.astype(np.float32),
            "b_out": self.b_out.astype(np.float32),
            "hash_dim": np.array(self.hash_dim),
        }
        if self.w_hidden is not None and self.b_hidden is not None:
            # float16 halves the file; the hidden layer loses nothing measurable.
            arrays["w_hidden"] = self.w_hidden.astype(np.float16)
            arrays["b_hidden"] = self.b_hidden.astype(np.float32)
        if self.ngram_w is not None and self.ngram_b is not None:
            arrays["ngram_w"] = self.ngram_w.astype(np.float16)
            arrays["ngram_b"] = self.ngram_b.astype(np.float32)
            arrays["ngram_scale"] = np.array(self.ngram_scale, dtype=np.float32)
        if self.log_adjust is not None:
            arrays["log_adjust"] = self.log_adjust.astype(np.float32)
        if self.log_adjust_pt is not None:
            arrays["log_adjust_pt"] = self.log_adjust_pt.astype(np.float32)
        return arrays

    @classmethod
    def load(cls, path: Path) -> Head:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        head = cls._from_arrays(arrays, "")
        if f"{PT_PREFIX}mean" in arrays:
            head.pt_head = cls._from_arrays(arrays, PT_PREFIX)
            head.pt_weight = float(arrays["pt_weight"])
        return head

    @classmethod
    def _from_arrays(cls, data: dict[str, np.ndarray], prefix: str) -> Head:
        def get(key: str) -> np.ndarray | None:
            key = prefix + key
            return data[key].astype(np.float32) if key in data else None

        def need(key: str) -> np.ndarray:
            return data[prefix + key]

        return cls(
            labels=tuple(str(x) for x in need("labels")),
            mean=need("mean").astype(np.float32),
            scale=need("scale").astype(np.float32),
            w_out=need("w_out").astype(np.float32),
            b_out=need("b_out").astype(np.float32),
            w_hidden=get("w_hidden"),
            b_hidden=get("b_hidden"),
            log_adjust=get("log_adjust"),
            log_adjust_pt=get("log_adjust_pt"),
            hash_dim=int(need("hash_dim")) if prefix + "hash_dim" in data else 0,
            ngram_w=get("ngram_w"),
            ngram_b=get("ngram_b"),
            ngram_scale=float(need("ngram_scale")) if prefix + "ngram_scale" in data else 1.0,
        )


def features(vectors: np.ndarray, texts: Sequence[str], hash_dim: int) -> np.ndarray:
    """The head's input: sentence vectors, then (if ``hash_dim``) hashed lexical features."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if not hash_dim:
        return vectors
    lexical = HashingEmbedder(dim=hash_dim).embed_passages(list(texts))
    return np.concatenate([vectors, lexical], axis=1)


def readings(proba: np.ndarray, labels: Sequence[str]) -> list[EmotionReading]:
    """The most probable label of each row, with its probability as the score."""
    best = proba.argmax(axis=1)
    return [
        EmotionReading(labels[int(i)], round(float(proba[row, i]), 4)) for row, i in enumerate(best)
    ]


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float32)


def recipe_path(weights: Path) -> Path:
    return weights.with_suffix(".json")


def load_recipe(path: Path, kind: str, section: str) -> dict[str, Any]:
    """A detector's JSON recipe at ``path``, which must hold a ``section`` object; any
    failure is an :class:`EmotionError` naming the ``kind`` of recipe."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmotionError(f"cannot read {kind} recipe {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get(section), dict):
        raise EmotionError(f"{kind} recipe {path} has no '{section}' section")
    return data


def read_recipe(weights: Path = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """The JSON metadata beside a weights file."""
    return load_recipe(recipe_path(weights), "classifier", "embedder")


def weights_fit(embedder: Embedder, weights: Path = DEFAULT_WEIGHTS) -> bool:
    """Whether ``weights`` read ``embedder``'s vectors (same name and dim): the whole
    encoder, or one part of a combined one (the other parts are then built beside it)."""
    try:
        meta = read_recipe(weights)["embedder"]
    except EmotionError:
        return False
    return fits(embedder, meta) or any(fits(embedder, part) for part in parts_of(meta))


def fallback_weights(weights: Path = DEFAULT_WEIGHTS) -> Path | None:
    """The head shipped beside ``weights`` for when one of its encoders is missing (the
    recipe's ``fallback``: an e5-only head beside the e5 + USE one), if any."""
    try:
        name = read_recipe(weights).get("fallback")
    except EmotionError:
        return None
    return weights.parent / str(name) if name else None


class ClassifierDetector(EmotionDetector):
    """Embeds each message with ``embedder`` and classifies the vector."""

    name = "classifier"

    def __init__(self, embedder: Embedder, weights: Path = DEFAULT_WEIGHTS) -> None:
        recipe = read_recipe(weights)
        meta = recipe["embedder"]
        if not fits(embedder, meta):
            if not any(fits(embedder, part) for part in parts_of(meta)):
                raise WeightsMismatchError(
                    f"emotion classifier weights {weights.name} were trained on embedder "
                    f"{meta.get('name')!r} (dim {meta.get('dim')}), but the configured embedder "
                    f"is {embedder.name!r} (dim {embedder.dim}); use that embedder, retrain with "
                    "`python -m training.emotion.train`, or choose another emotion detector"
                )
            # One part of a combined encoder (the app's e5): build the others beside it
            # (EmbeddingError when their package is missing).
            embedder = embedder_for(meta, embedder)
        if problem := check_checksums(embedder, meta):
            raise WeightsMismatchError(f"emotion classifier weights {weights.name}: {problem}")
        try:
            self._head = Head.load(weights)
        except (OSError, KeyError, ValueError) as exc:
            raise EmotionError(f"cannot load emotion classifier weights {weights}: {exc}") from exc
        if self._head.dim != embedder.dim:
            raise WeightsMismatchError(
                f"weights {weights.name} expect {self._head.dim}-d vectors, embedder gives {embedder.dim}"
            )
        self._embedder = self.query_embedder = embedder
        self.recipe = recipe
        self.labels = self._head.labels
        # Logits are divided by it before the softmax, so that a score of 0.7 is right
        # about 70% of the time (fitted on held-out rows, see docs/emotion.md).
        calibration = recipe.get("calibration")
        self.temperature = (
            float(calibration.get("temperature", 1.0)) if isinstance(calibration, dict) else 1.0
        )
        if not self.temperature > 0:
            raise EmotionError(f"emotion classifier recipe {weights.name}: temperature must be > 0")

    def raw_logits(self, texts: Sequence[str]) -> np.ndarray:
        """Embedding + scaled n-gram logits (the Portuguese head's blended in for text
        guessed Portuguese), before the prior adjustments."""
        vectors = self._embedder.embed_queries(list(texts))
        languages = [guess_language(t) for t in texts]
        return self._head.raw_logits(self._head.features(vectors, texts), texts, languages)

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, columns in :attr:`labels` order."""
        return self._proba_of_vectors(texts, self._embedder.embed_queries(list(texts)))

    def _proba_of_vectors(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        languages = [guess_language(t) for t in texts]
        logits = self._head.logits(self._head.features(vectors, texts), languages, texts)
        return softmax(logits / self.temperature)

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        return readings(self.probabilities(texts), self.labels)

    def _detect_vectors(self, texts: Sequence[str], vectors: np.ndarray) -> list[EmotionReading]:
        return readings(self._proba_of_vectors(texts, vectors), self.labels)
