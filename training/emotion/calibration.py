"""Calibration of a classifier's scores: expected calibration error (ECE) and one
temperature that divides the logits before the softmax.

The emotion state changes only on readings whose score passes the confidence threshold
(0.5 by default), so a score should mean what it says: of readings scored 0.7, about 70%
right. The temperature is fitted on out-of-fold logits of the training rows (never on the
dev files), by minimising the negative log-likelihood over a grid.
"""

from __future__ import annotations

import numpy as np

from core.emotion.classifier import softmax


def expected_calibration_error(
    confidence: np.ndarray, correct: np.ndarray, bins: int = 10, weights: np.ndarray | None = None
) -> float:
    """ECE of the top label's probability: over equal-width bins of ``confidence``, the
    share of rows in the bin times |mean confidence - accuracy| there."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    w = np.ones(len(confidence)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not len(confidence) or w.sum() <= 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, bins + 1)
    # Bin i holds (edges[i], edges[i + 1]]; a confidence of exactly 0 goes to the first.
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        inside = index == b
        mass = w[inside].sum()
        if mass > 0:
            gap = np.average(confidence[inside], weights=w[inside]) - np.average(
                correct[inside], weights=w[inside]
            )
            total += mass / w.sum() * abs(gap)
    return float(total)


def ece_of_logits(
    logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0, bins: int = 10
) -> float:
    proba = softmax(np.asarray(logits, dtype=np.float32) / temperature)
    return expected_calibration_error(proba.max(axis=1), proba.argmax(axis=1) == labels, bins)


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """Mean negative log-likelihood of ``labels`` under ``softmax(logits / temperature)``."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1))
    return float(np.mean(log_norm - z[np.arange(len(labels)), labels]))


def fit_temperature(
    logits: np.ndarray, labels: np.ndarray, grid: np.ndarray | None = None
) -> float:
    """The temperature in ``grid`` (default 0.25..4, log-spaced) with the lowest NLL."""
    candidates = np.exp(np.linspace(np.log(0.25), np.log(4.0), 81)) if grid is None else grid
    scores = [nll(logits, labels, float(t)) for t in candidates]
    return round(float(candidates[int(np.argmin(scores))]), 4)
