"""Calibration figures: ECE and the fitted temperature, on made-up logits."""

from __future__ import annotations

import numpy as np

from training.emotion.calibration import (
    ece_of_logits,
    expected_calibration_error,
    fit_temperature,
)


def test_ece_is_the_gap_between_confidence_and_accuracy() -> None:
    # Always 0.9 sure, right half the time: ECE 0.4. Right 9 times in 10: ECE 0.
    confidence = np.full(10, 0.9)
    assert np.isclose(expected_calibration_error(confidence, np.arange(10) % 2 == 0), 0.4)
    assert np.isclose(expected_calibration_error(confidence, np.arange(10) < 9), 0.0)


def test_an_overconfident_model_gets_a_temperature_above_one() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, 4000)
    # Logits whose true class is only mildly favoured, then scaled up 4x: overconfident.
    logits = rng.standard_normal((4000, 5))
    logits[np.arange(4000), labels] += 1.0
    sharp = 4.0 * logits
    temperature = fit_temperature(sharp, labels)
    assert 3.0 <= temperature <= 4.0
    assert ece_of_logits(sharp, labels, temperature) < ece_of_logits(sharp, labels) / 3
