"""The hashed n-gram features and the sparse head beside the embedding head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.emotion import LABELS, EmotionError
from core.emotion.classifier import Head
from core.emotion.ngrams import fit_sparse_head, grams, ngram_rows, sparse_logits


def test_grams_fold_accents_case_and_long_runs() -> None:
    assert "w:kk" in grams("KKKKKKK") and "w:kk" in grams("kk")
    assert "w:voce" in grams("Você") and "b:voce_e" in grams("Você é")
    assert "c:<vo" in grams("você")
    assert "w:!!" in grams("para!!!!!")


def test_rows_are_normalised_and_deterministic() -> None:
    texts = ["que raiva disso", "obrigado, adorei!", ""]
    rows = ngram_rows(texts, 1024)
    again = ngram_rows(texts, 1024)
    assert np.array_equal(rows.indices, again.indices)
    assert len(rows) == 3
    for i in range(2):
        values = rows.values[rows.indptr[i] : rows.indptr[i + 1]]
        assert np.isclose(np.linalg.norm(values), 1.0)
    assert rows.indptr[3] == rows.indptr[2]  # empty text: empty row
    picked = rows.take(np.array([1]))
    assert np.array_equal(
        picked.indices, rows.indices[rows.indptr[1] : rows.indptr[2]]
    ) and np.array_equal(picked.indptr, [0, rows.indptr[2] - rows.indptr[1]])


def test_sparse_head_learns_surface_cues() -> None:
    angry = ["que raiva", "raiva demais", "odeio isso, que raiva", "tô com raiva"]
    happy = ["kkkk adorei", "adorei demais kkk", "kkkkk que massa", "adorei, valeu"]
    texts = angry + happy
    labels = np.array([0] * 4 + [1] * 4)
    rows = ngram_rows(texts, 2048)
    w, b = fit_sparse_head(rows, labels, np.ones(8, np.float32), 2048, 5, epochs=30)
    pred = sparse_logits(ngram_rows(["muita raiva", "kkk adorei"], 2048), w, b).argmax(axis=1)
    assert pred.tolist() == [0, 1]


def _head_with_ngrams(rng: np.random.Generator) -> Head:
    return Head(
        labels=LABELS,
        mean=np.zeros(8, np.float32),
        scale=np.ones(8, np.float32),
        w_out=rng.standard_normal((8, 5)).astype(np.float32),
        b_out=np.zeros(5, np.float32),
        ngram_w=rng.standard_normal((256, 5)).astype(np.float32),
        ngram_b=np.zeros(5, np.float32),
        ngram_scale=2.0,
        log_adjust=np.zeros(5, np.float32),
        log_adjust_pt=np.array([-1, 0, 0, 0, 0], np.float32),
    )


def test_head_with_ngrams_round_trips_and_needs_the_texts(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    head = _head_with_ngrams(rng)
    vectors = rng.standard_normal((2, 8)).astype(np.float32)
    texts = ["que raiva", "obrigado"]
    expected = head.proba(vectors, ["pt", "en"], texts)
    path = tmp_path / "w.npz"
    head.save(path)
    loaded = Head.load(path)
    assert loaded.ngram_scale == 2.0 and loaded.ngram_w is not None
    # The n-gram weights are stored as float16: equal to that precision.
    assert np.allclose(loaded.proba(vectors, ["pt", "en"], texts), expected, atol=2e-3)
    with pytest.raises(EmotionError, match="n-grams"):
        loaded.proba(vectors)
    # The n-gram part moves the logits by exactly scale * its own logits.
    diff = loaded.raw_logits(vectors, texts) - loaded.embedding_logits(vectors)
    assert np.allclose(diff, 2.0 * loaded.ngram_logits(texts), atol=1e-5)


def test_portuguese_head_blends_only_portuguese_rows_and_round_trips(tmp_path: Path) -> None:
    """A Portuguese head beside the shared one: rows read as Portuguese get
    ``(1 - w) * shared + w * portuguese`` raw logits, the others the shared ones alone."""
    rng = np.random.default_rng(1)
    head = _head_with_ngrams(rng)
    head.pt_head = _head_with_ngrams(rng)
    head.pt_head.log_adjust = head.pt_head.log_adjust_pt = None
    head.pt_weight = 0.75
    vectors = rng.standard_normal((3, 8)).astype(np.float32)
    texts = ["que raiva", "thank you", "obrigado"]
    languages = ["pt", "en", "pt"]
    shared = head.raw_logits(vectors, texts)  # no languages: the shared head alone
    portuguese = head.pt_head.raw_logits(vectors, texts)
    blended = head.raw_logits(vectors, texts, languages)
    np.testing.assert_allclose(blended[1], shared[1], atol=1e-6)
    np.testing.assert_allclose(
        blended[[0, 2]], 0.25 * shared[[0, 2]] + 0.75 * portuguese[[0, 2]], atol=1e-5
    )
    assert not np.allclose(blended[0], shared[0])
    path = tmp_path / "w.npz"
    head.save(path)
    loaded = Head.load(path)
    assert loaded.pt_head is not None and loaded.pt_weight == 0.75
    assert loaded.pt_head.ngram_scale == 2.0 and loaded.pt_head.log_adjust is None
    np.testing.assert_allclose(
        loaded.proba(vectors, languages, texts), head.proba(vectors, languages, texts), atol=2e-3
    )
    # Weights without a Portuguese head load as before.
    plain = _head_with_ngrams(rng)
    plain.save(path)
    assert Head.load(path).pt_head is None
