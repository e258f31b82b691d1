"""Out-of-fold logits, shared by the classifier's training and the ensemble's selection."""

from __future__ import annotations

import numpy as np

from core.emotion.detector import LABELS
from training.emotion.train import HyperParams, out_of_fold_logits


def test_every_row_is_scored_by_heads_that_never_saw_it() -> None:
    rng = np.random.default_rng(0)
    n, dim = 200, 16
    labels = np.arange(n) % len(LABELS)
    centres = rng.normal(size=(len(LABELS), dim)) * 4
    vectors = (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32)
    sources = ["goemotions" if i % 2 else "brighter_ptbr" for i in range(n)]
    fold = np.arange(n) % 4
    emb, ngram = out_of_fold_logits(vectors, None, labels, sources, fold, HyperParams())
    assert emb.shape == (n, len(LABELS)) and np.all(ngram == 0)
    assert np.all(np.abs(emb).sum(axis=1) > 0)  # every row got logits
    assert (emb.argmax(axis=1) == labels).mean() > 0.9  # separable: held-out rows right
    # Moving row 0 leaves the other rows of its fold as they were: their heads were
    # fitted without that fold.
    moved = vectors.copy()
    moved[0] = centres[(labels[0] + 1) % len(LABELS)] * 3
    emb2, _ = out_of_fold_logits(moved, None, labels, sources, fold, HyperParams())
    same_fold = fold == fold[0]
    same_fold[0] = False
    assert np.allclose(emb2[same_fold], emb[same_fold])


def test_the_portuguese_head_learns_from_portuguese_rows_only() -> None:
    """Where the languages disagree, the Portuguese head's held-out logits follow the
    Portuguese rows; the shared head's are torn between the two."""
    from core.emotion.ngrams import ngram_rows
    from training.emotion.train import portuguese_out_of_fold

    rng = np.random.default_rng(1)
    n, dim = 240, 8
    labels = np.arange(n) % 2  # agressivo / feliz
    portuguese = np.arange(n) % 4 < 2
    direction = np.where(portuguese, 1.0, -1.0)  # the same cue means the opposite
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors[:, 0] = (np.where(labels == 0, 2.0, -2.0) * direction).astype(np.float32)
    sources = ["brighter_ptbr" if p else "goemotions" for p in portuguese]
    fold = rng.integers(0, 4, n)
    rows = ngram_rows(["x"] * n, 64)
    params = HyperParams(epochs=20)
    pt_logits, _ = portuguese_out_of_fold(vectors, rows, labels, sources, fold, portuguese, params)
    pt_right = (pt_logits[portuguese].argmax(axis=1) == labels[portuguese]).mean()
    en_right = (pt_logits[~portuguese].argmax(axis=1) == labels[~portuguese]).mean()
    assert pt_right > 0.95 and en_right < 0.05
