"""Hashed word/bigram/character n-gram features and a sparse softmax head over them.

The sentence embedding knows what a message is about; the surface form often tells how it
is said ("kkkk", "pqp", "vsf", "!!!", a spelled-out insult). A linear model over hashed
n-grams of the folded text learns those cues from the training data, and its logits are
added to the embedding head's (:class:`core.emotion.classifier.Head`).

Features per message: folded words (runs of one letter capped at two, so "kkkkkk" and
"kk" are one word), adjacent word pairs, and character 3/4/5-grams of each word padded as
``<word>``; each hashed (CRC-32) into ``dim`` buckets, counts log-scaled, rows
L2-normalised. Everything is numpy: a few hundred bucket look-ups per message.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.embeddings import fold

_TOKEN = re.compile(r"\w+|[!?]+", re.UNICODE)
_RUN = re.compile(r"(.)\1{2,}")
CHAR_SIZES = (3, 4, 5)


def grams(text: str) -> list[str]:
    """The n-gram strings of one message (before hashing)."""
    tokens = [_RUN.sub(r"\1\1", t) for t in _TOKEN.findall(fold(text))]
    out = ["w:" + t for t in tokens]
    out.extend(f"b:{a}_{b}" for a, b in itertools.pairwise(tokens))
    for token in tokens:
        padded = f"<{token}>"
        for n in CHAR_SIZES:
            if len(padded) > n:
                out.extend("c:" + padded[i : i + n] for i in range(len(padded) - n + 1))
    return out


@dataclass
class SparseRows:
    """Rows in CSR form: row ``i`` is ``indices[indptr[i]:indptr[i+1]]`` with ``values``."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def take(self, rows: np.ndarray) -> SparseRows:
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if len(rows) and lengths.sum():
            offsets = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        else:
            offsets = np.zeros(0, dtype=np.int64)
        return SparseRows(indptr, self.indices[offsets], self.values[offsets])


def ngram_rows(texts: Sequence[str], dim: int) -> SparseRows:
    indptr = [0]
    indices: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for text in texts:
        counts: dict[int, float] = {}
        for gram in grams(text):
            bucket = zlib.crc32(gram.encode("utf-8")) % dim
            counts[bucket] = counts.get(bucket, 0.0) + 1.0
        idx = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        val = np.log1p(np.fromiter(counts.values(), dtype=np.float32, count=len(counts)))
        norm = float(np.sqrt(np.sum(val * val))) or 1.0
        indices.append(idx)
        values.append(val / norm)
        indptr.append(indptr[-1] + len(idx))
    return SparseRows(
        np.asarray(indptr, dtype=np.int64),
        np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64),
        np.concatenate(values).astype(np.float32) if values else np.zeros(0, dtype=np.float32),
    )


def sparse_logits(rows: SparseRows, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``rows @ weights + bias`` for CSR rows."""
    n = len(rows)
    out = np.tile(np.asarray(bias, dtype=np.float32), (n, 1))
    if len(rows.indices):
        row_of = np.repeat(np.arange(n), np.diff(rows.indptr))
        np.add.at(out, row_of, weights[rows.indices] * rows.values[:, None])
    return out


def fit_sparse_head(
    rows: SparseRows,
    labels: np.ndarray,
    sample_weights: np.ndarray,
    dim: int,
    n_classes: int,
    *,
    epochs: int = 10,
    l2: float = 1e-4,
    learning_rate: float = 0.05,
    batch_size: int = 64,
    seed: int = 13,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted softmax regression on CSR rows; Adam updates only the touched buckets."""
    rng = np.random.default_rng(seed)
    w = np.zeros((dim, n_classes), dtype=np.float32)
    b = np.zeros(n_classes, dtype=np.float32)
    m_w, v_w = np.zeros_like(w), np.zeros_like(w)
    m_b, v_b = np.zeros_like(b), np.zeros_like(b)
    onehot = np.eye(n_classes, dtype=np.float32)[labels]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    step = 0
    for _epoch in range(epochs):
        order = rng.permutation(len(rows))
        for start in range(0, len(rows), batch_size):
            batch = rows.take(order[start : start + batch_size])
            idx = order[start : start + batch_size]
            logits = sparse_logits(batch, w, b)
            logits -= logits.max(axis=1, keepdims=True)
            proba = np.exp(logits)
            proba /= proba.sum(axis=1, keepdims=True)
            grad = (proba - onehot[idx]) * sample_weights[idx][:, None] / len(idx)
            row_of = np.repeat(np.arange(len(idx)), np.diff(batch.indptr))
            touched, inverse = np.unique(batch.indices, return_inverse=True)
            grad_w = np.zeros((len(touched), n_classes), dtype=np.float32)
            np.add.at(grad_w, inverse, grad[row_of] * batch.values[:, None])
            grad_w += l2 * w[touched]
            step += 1
            c1, c2 = 1 - beta1**step, 1 - beta2**step
            m_w[touched] = beta1 * m_w[touched] + (1 - beta1) * grad_w
            v_w[touched] = beta2 * v_w[touched] + (1 - beta2) * grad_w * grad_w
            w[touched] -= learning_rate * (m_w[touched] / c1) / (np.sqrt(v_w[touched] / c2) + eps)
            grad_b = grad.sum(axis=0)
            m_b = beta1 * m_b + (1 - beta1) * grad_b
            v_b = beta2 * v_b + (1 - beta2) * grad_b * grad_b
            b -= learning_rate * (m_b / c1) / (np.sqrt(v_b / c2) + eps)
    return w, b
