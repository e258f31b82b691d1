"""The ensemble of the fine-tuned model and the embedding classifier, and its fold split."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.embeddings import HashingEmbedder
from core.emotion import (
    LABELS,
    ClassifierDetector,
    EmotionError,
    WeightsMismatchError,
    build_detector,
)
from core.emotion.classifier import WEIGHTS_DIR
from core.emotion.e5numpy import file_sha256
from core.emotion.ensemble import (
    ENSEMBLE_RECIPE,
    EnsembleDetector,
    lexicon_votes,
    read_ensemble_recipe,
)
from core.emotion.finetuned import FINETUNED_WEIGHTS, FinetunedDetector, read_finetuned_recipe
from core.emotion.language import guess_language
from training.emotion.ensemble_train import assign_folds, training_folds
from training.emotion.finetune import split_rows

SEED = "você é inútil! essa resposta é ridícula"
# The ensemble's classifier: the default classifier's recipe with more written examples.
CLASSIFIER = WEIGHTS_DIR / "ensemble_classifier.npz"


@pytest.fixture(scope="module")
def ensemble() -> EnsembleDetector:
    return EnsembleDetector()


def _tuned_specs(recipe: dict[str, Any]) -> list[dict[str, str]]:
    """The recipe's fine-tuned components (one object, or a list of them)."""
    specs = recipe["components"]["finetuned"]
    return [specs] if isinstance(specs, dict) else list(specs)


def _copy_weights(tmp_path: Path, recipe: dict[str, Any]) -> Path:
    """The shipped components and a (changed) recipe in ``tmp_path``."""
    for spec in _tuned_specs(read_ensemble_recipe()):
        tuned = WEIGHTS_DIR / spec["file"]
        shutil.copy(tuned, tmp_path / tuned.name)
        shutil.copy(tuned.with_suffix(".json"), tmp_path / tuned.with_suffix(".json").name)
    shutil.copy(CLASSIFIER, tmp_path / CLASSIFIER.name)
    shutil.copy(CLASSIFIER.with_suffix(".json"), tmp_path / "ensemble_classifier.json")
    path = tmp_path / "ensemble.json"
    path.write_text(json.dumps(recipe), encoding="utf-8")
    return path


def test_ensemble_reads_the_seed_example_and_plain_messages(ensemble: EnsembleDetector) -> None:
    assert isinstance(build_detector("ensemble", embedder=None), EnsembleDetector)
    reading = ensemble.detect(SEED)
    assert reading.label == "agressivo" and reading.score >= 0.5
    readings = ensemble.detect_many(["", "muito obrigado, adorei a ajuda!", "I miss her so much"])
    assert [r.label for r in readings] == ["neutro", "feliz", "triste"]
    # An embedder its classifier was not trained on is replaced by the one it names.
    other = build_detector("ensemble", embedder=HashingEmbedder(dim=384))
    assert isinstance(other, EnsembleDetector) and other.detect(SEED).label == "agressivo"


def test_ensemble_logits_are_the_recipe_mix_of_both_components(
    ensemble: EnsembleDetector,
) -> None:
    recipe = read_ensemble_recipe()
    texts = [SEED, "The meeting is on Thursday at 2pm."]
    assert [guess_language(t) for t in texts] == ["pt", "en"]
    tuned = [FinetunedDetector(WEIGHTS_DIR / spec["file"]) for spec in _tuned_specs(recipe)]
    classifier = build_detector("classifier", embedder=None, weights=CLASSIFIER, strict=True)
    assert isinstance(classifier, ClassifierDetector)
    expected = []
    for text, mix, vote, key in zip(
        texts,
        (recipe["mix_pt"], recipe["mix"]),
        (recipe.get("lexicon_vote_pt", 0.0), recipe.get("lexicon_vote", 0.0)),
        ("log_adjust_pt", "log_adjust"),
        strict=True,
    ):
        adjust = np.array([recipe[key][label] for label in LABELS])
        tuned_logits = np.mean([model.embedding_logits(text) for model in tuned], axis=0)
        raw = (1 - mix) * tuned_logits + mix * classifier.raw_logits([text])[0]
        expected.append(raw + vote * lexicon_votes([text])[0] + adjust)
    assert np.allclose(ensemble.logits(texts), np.array(expected), atol=1e-4)
    assert np.allclose(ensemble.probabilities(texts).sum(axis=1), 1.0, atol=1e-5)


def test_recipe_names_both_components_by_checksum() -> None:
    recipe = read_ensemble_recipe()
    parts = recipe["components"]
    for spec in _tuned_specs(recipe):
        assert spec["sha256"] == file_sha256(WEIGHTS_DIR / spec["file"])
        assert read_finetuned_recipe(WEIGHTS_DIR / spec["file"])["base_model"]["sha256"]
    assert parts["classifier"] == {"file": CLASSIFIER.name, "sha256": file_sha256(CLASSIFIER)}
    assert 0.0 <= recipe["mix"] <= 1.0 and 0.0 <= recipe["mix_pt"] <= 1.0
    # Opt-in: on the Portuguese dev file its macro-F1 is 0.549, under the 0.60 goal.
    assert recipe["default"] is False and "0.60" in recipe["status"]
    assert "dev" not in json.dumps(recipe["selection"]["protocol"])


def test_a_retrained_component_is_refused(tmp_path: Path) -> None:
    recipe = read_ensemble_recipe()
    recipe["components"]["classifier"]["sha256"] = "0" * 64
    path = _copy_weights(tmp_path, recipe)
    with pytest.raises(WeightsMismatchError, match="another version"):
        EnsembleDetector(recipe=path)
    with pytest.raises(WeightsMismatchError):
        build_detector("ensemble", embedder=None, weights=path)
    (tmp_path / _tuned_specs(recipe)[0]["file"]).unlink()
    with pytest.raises(EmotionError, match="not found"):
        EnsembleDetector(recipe=path)


def test_factory_prefers_a_default_ensemble_and_falls_back_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    recipe = read_ensemble_recipe()
    recipe["default"] = True
    path = _copy_weights(tmp_path, recipe)
    monkeypatch.setattr("core.emotion.factory.ENSEMBLE_RECIPE", path)
    assert isinstance(build_detector("classifier", embedder=None), EnsembleDetector)
    recipe["default"] = False
    path.write_text(json.dumps(recipe), encoding="utf-8")
    assert not isinstance(build_detector("classifier", embedder=None), EnsembleDetector)
    recipe["default"] = True
    _tuned_specs(recipe)[0]["sha256"] = "f" * 64  # fine-tuned model retrained
    path.write_text(json.dumps(recipe), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        detector = build_detector("classifier", embedder=None, strict=True)
    assert isinstance(detector, ClassifierDetector)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "ensemble" in warnings[0] and "embedding classifier" in warnings[0]
    assert detector.detect(SEED).label == "agressivo"


def test_shipped_default_is_what_the_recipes_say() -> None:
    detector = build_detector("classifier", embedder=None, strict=True)
    if read_ensemble_recipe(ENSEMBLE_RECIPE).get("default") is True:
        assert isinstance(detector, EnsembleDetector)
    else:
        assert not isinstance(detector, EnsembleDetector)


def test_folds_keep_finetunes_split_as_fold_zero_and_stratify_the_rest() -> None:
    rng = np.random.default_rng(1)
    sources = [str(s) for s in rng.choice(["goemotions", "brighter_ptbr", "written"], 1000)]
    labels = rng.integers(0, len(LABELS), 1000)
    fold = assign_folds(sources, labels, 5, 0.2, 13)
    assert np.array_equal(fold == 0, split_rows(sources, 0.2, 13))
    assert set(fold.tolist()) == {0, 1, 2, 3, 4}
    src = np.array(sources)
    for s in set(sources):
        for c in range(len(LABELS)):
            counts = np.bincount(fold[(src == s) & (labels == c) & (fold > 0)], minlength=5)[1:]
            assert counts.max() - counts.min() <= 1  # dealt round-robin
    assert np.array_equal(fold, assign_folds(sources, labels, 5, 0.2, 13))


def test_mixed_rows_leave_the_other_rows_folds_alone() -> None:
    rng = np.random.default_rng(2)
    sources = [str(s) for s in rng.choice(["goemotions", "brighter_ptbr", "written"], 600)]
    labels = rng.integers(0, len(LABELS), 600)
    extra = 100
    with_mixed = sources + ["brighter_ptbr_mixed"] * extra
    extra_labels = np.concatenate([labels, np.zeros(extra, dtype=labels.dtype)])
    fold = training_folds(with_mixed, extra_labels, 5, 0.2, 13)
    assert np.array_equal(fold[:600], assign_folds(sources, labels, 5, 0.2, 13))
    assert np.bincount(fold[600:], minlength=5).tolist() == [20] * 5


def test_lexicon_vote_is_added_as_the_recipe_says(tmp_path: Path) -> None:
    votes = lexicon_votes([SEED, "The meeting is on Thursday.", "que dia lindo, adorei!"])
    assert votes[0, LABELS.index("agressivo")] == 1.0 and votes[0].sum() == 1.0
    assert not votes[1].any()  # a neutral reading casts no vote
    assert votes[2, LABELS.index("feliz")] == 1.0
    recipe = read_ensemble_recipe()
    recipe["lexicon_vote"], recipe["lexicon_vote_pt"] = 0.0, 2.0
    voting = EnsembleDetector(recipe=_copy_weights(tmp_path, recipe))
    recipe["lexicon_vote_pt"] = 0.0
    (tmp_path / "ensemble.json").write_text(json.dumps(recipe), encoding="utf-8")
    silent = EnsembleDetector(recipe=tmp_path / "ensemble.json")
    texts = [SEED, "you are useless and stupid"]  # Portuguese, English
    assert [guess_language(t) for t in texts] == ["pt", "en"]
    difference = voting.logits(texts) - silent.logits(texts)
    assert np.allclose(difference, [2.0 * votes[0], np.zeros(len(LABELS))], atol=1e-5)


def test_several_fine_tuned_components_are_averaged(tmp_path: Path) -> None:
    """A recipe naming two fine-tuned files mixes the mean of their logits: a second
    file whose head bias is shifted moves the logits by half the shift (times 1 - mix)."""
    with np.load(FINETUNED_WEIGHTS) as data:
        arrays = {key: data[key] for key in data.files}
    shift = np.array([1.0, -2.0, 0.5, 0.0, 3.0], dtype=np.float32)
    arrays["head.b"] = arrays["head.b"] + shift
    np.savez_compressed(tmp_path / "shifted.npz", **arrays)
    shutil.copy(FINETUNED_WEIGHTS.with_suffix(".json"), tmp_path / "shifted.json")
    recipe = read_ensemble_recipe()
    recipe["components"]["finetuned"] = {
        "file": FINETUNED_WEIGHTS.name,
        "sha256": file_sha256(FINETUNED_WEIGHTS),
    }
    single = EnsembleDetector(recipe=_copy_weights(tmp_path, recipe))
    shutil.copy(FINETUNED_WEIGHTS, tmp_path / FINETUNED_WEIGHTS.name)
    shutil.copy(FINETUNED_WEIGHTS.with_suffix(".json"), tmp_path / "finetuned.json")
    recipe["components"]["finetuned"] = [
        recipe["components"]["finetuned"],
        {"file": "shifted.npz", "sha256": file_sha256(tmp_path / "shifted.npz")},
    ]
    (tmp_path / "ensemble.json").write_text(json.dumps(recipe), encoding="utf-8")
    averaged = EnsembleDetector(recipe=tmp_path / "ensemble.json")
    texts = [SEED, "The meeting is on Thursday at 2pm."]  # Portuguese, English
    mixes = np.array([[recipe["mix_pt"]], [recipe["mix"]]])
    expected = single.logits(texts) + (1 - mixes) * shift / 2
    assert np.allclose(averaged.logits(texts), expected, atol=1e-4)
    recipe["components"]["finetuned"][1]["sha256"] = "0" * 64
    (tmp_path / "ensemble.json").write_text(json.dumps(recipe), encoding="utf-8")
    with pytest.raises(WeightsMismatchError, match=r"shifted\.npz"):
        EnsembleDetector(recipe=tmp_path / "ensemble.json")
