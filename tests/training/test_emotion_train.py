"""Pieces of the training recipe (``python -m training.emotion.train``) on small made-up data."""

from __future__ import annotations

import numpy as np
import pytest

from core.emotion import LABELS
from training.emotion.data import Example
from training.emotion.train import (
    HyperParams,
    choose_adjustment,
    fit_head,
    macro_f1,
    merge_heads,
    neutral_as_aggressive,
    selection_weights,
)

AGR, NEU = LABELS.index("agressivo"), LABELS.index("neutro")


def test_macro_f1_row_weights_count_rows_that_many_times() -> None:
    true = np.array([0, 0, 1, 1])
    pred = np.array([0, 1, 1, 1])
    repeated = macro_f1(np.array([0, 0, 1, 1, 1, 1]), np.array([0, 1, 1, 1, 1, 1]), [0, 1])
    assert np.isclose(macro_f1(true, pred, [0, 1], np.array([1, 1, 2, 2.0])), repeated)
    assert not np.isclose(macro_f1(true, pred, [0, 1]), repeated)


def test_selection_weights_apply_only_to_goemotions_rows() -> None:
    examples = [
        Example("a", "neutro", "goemotions:train.tsv"),
        Example("b", "agressivo", "goemotions:train.tsv"),
        Example("c", "neutro", "brighter:track_a_train_ptbr.csv"),
    ]
    weights = selection_weights(examples, {"neutro": 5.0})
    assert weights.tolist() == [5.0, 1.0, 1.0]


def test_adjustment_keeps_neutral_as_aggressive_under_the_cap() -> None:
    rng = np.random.default_rng(0)
    labels = np.array([AGR] * 100 + [NEU] * 100)
    logits = np.zeros((200, len(LABELS)), np.float32)
    # Aggressive rows lean aggressive, neutral rows are ambiguous: uncapped, the best
    # macro-F1 reads many neutral rows as aggressive.
    logits[:100, AGR] = rng.normal(1.0, 1.0, 100)
    logits[100:, AGR] = rng.normal(0.3, 1.0, 100)
    free = choose_adjustment([logits], [labels])
    capped = choose_adjustment([logits], [labels], max_neutral_as_aggressive=(0.05,))
    assert neutral_as_aggressive(labels, (logits + free).argmax(axis=1)) > 0.05
    assert neutral_as_aggressive(labels, (logits + capped).argmax(axis=1)) <= 0.06
    # Classes absent from the data are left alone.
    assert capped[LABELS.index("confuso")] == 0.0


@pytest.mark.parametrize("hidden", [0, 8])
def test_merged_heads_give_the_mean_of_their_logits(hidden: int) -> None:
    """An ensemble of per-encoder heads is shipped as one head over the concatenated
    vectors: its logits are exactly the mean of the heads' logits."""
    rng = np.random.default_rng(3)
    blocks = [rng.standard_normal((60, 6)).astype(np.float32) for _ in range(2)]
    labels = rng.integers(0, len(LABELS), 60)
    weights = np.ones(60, dtype=np.float32)
    params = HyperParams(hidden=hidden, epochs=3, dropout=0.0)
    heads = [fit_head(x, labels, weights, params) for x in blocks]
    merged = merge_heads(heads)
    expected = np.mean([h.embedding_logits(x) for h, x in zip(heads, blocks, strict=True)], axis=0)
    got = merged.embedding_logits(np.concatenate(blocks, axis=1))
    assert merged.dim == 12
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
