"""The shipped classifier, the lexicon, the factory and its fallbacks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from core.embeddings import HashingEmbedder
from core.emotion import (
    DEFAULT_WEIGHTS,
    LABELS,
    ClassifierDetector,
    EmotionError,
    EmotionReading,
    LexiconDetector,
    WeightsMismatchError,
    build_detector,
    read_recipe,
    weights_fit,
)
from core.emotion.classifier import Head
from core.emotion.encoders import embedder_for
from core.emotion.finetuned import FinetunedDetector


@pytest.fixture(scope="module")
def shipped() -> ClassifierDetector:
    """The embedding classifier (the fallback when the fine-tuned model cannot load)."""
    spec = read_recipe()["embedder"]
    return ClassifierDetector(embedder_for(spec))


CLEAR = [
    ("você é inútil! essa resposta é ridícula", "agressivo"),
    ("que lixo de serviço, vocês são uns incompetentes", "agressivo"),
    ("You are useless, this is the stupidest answer ever", "agressivo"),
    ("muito obrigado, adorei a ajuda!", "feliz"),
    ("Thank you so much, I love it!", "feliz"),
    ("meu cachorro morreu hoje e eu tô arrasado", "triste"),
    ("I miss my grandmother so much, I cried all night", "triste"),
    ("não entendi nada, pode explicar de novo?", "confuso"),
    ("I'm confused, what do you mean by that?", "confuso"),
    ("a reunião foi marcada para quinta às 14h", "neutro"),
    ("The meeting is on Thursday at 2pm.", "neutro"),
]


def test_shipped_classifier_on_clear_examples(shipped: ClassifierDetector) -> None:
    readings = shipped.detect_many([text for text, _ in CLEAR])
    wrong = [(t, want, r) for (t, want), r in zip(CLEAR, readings, strict=True) if r.label != want]
    assert not wrong
    seed = shipped.detect("você é inútil! essa resposta é ridícula")
    assert seed.label == "agressivo" and seed.score >= 0.5


def test_detect_many_keeps_order_and_reads_empty_as_unsure_neutral(
    shipped: ClassifierDetector,
) -> None:
    readings = shipped.detect_many(["", "obrigado, adorei!", "   \n", "não entendi nada"])
    assert [r.label for r in readings] == ["neutro", "feliz", "neutro", "confuso"]
    assert readings[0].score < 0.5 and readings[2].score < 0.5
    assert all(0.0 <= r.score <= 1.0 for r in readings)
    assert shipped.detect("") == EmotionReading("neutro", readings[0].score)


def test_query_vectors_handed_over_give_the_same_readings(shipped: ClassifierDetector) -> None:
    texts = ["", *(text for text, _ in CLEAR), "  "]
    assert shipped.query_embedder is not None
    vectors = shipped.query_embedder.embed_queries(texts)
    vectors[0] = vectors[-1] = np.nan  # rows of empty texts are never read
    assert shipped.detect_many(texts, query_vectors=vectors) == shipped.detect_many(texts)
    with pytest.raises(ValueError, match="2 query vectors for 3 texts"):
        shipped.detect_many(["a", "b", "c"], query_vectors=vectors[:2])


def test_a_detector_without_an_embedder_refuses_query_vectors() -> None:
    lexicon = LexiconDetector()
    assert lexicon.query_embedder is None
    with pytest.raises(EmotionError, match="reads no query vectors"):
        lexicon.detect_many(["oi"], query_vectors=np.zeros((1, 384), dtype=np.float32))


def test_weights_are_small_and_described() -> None:
    assert DEFAULT_WEIGHTS.stat().st_size < 2_000_000
    recipe = read_recipe()
    assert recipe["labels"] == list(LABELS)
    # e5 and USE side by side (tests/core/emotion/test_emotion_encoders.py).
    assert recipe["embedder"]["dim"] == 384 + 512
    assert recipe["embedder"]["name"].startswith("multilingual-e5-small")
    assert recipe["training_data"] and recipe["hyper_parameters"] and recipe["trained_at"]
    assert not any("dev" in item for item in recipe["training_data"])


def test_mismatched_embedder_is_a_clear_error() -> None:
    wrong = HashingEmbedder(dim=384)  # same dimension, different model: still refused
    assert not weights_fit(wrong)
    with pytest.raises(WeightsMismatchError, match="hashing-384") as info:
        ClassifierDetector(wrong)
    assert read_recipe()["embedder"]["name"] in str(info.value)
    with pytest.raises(WeightsMismatchError):
        build_detector("classifier", embedder=wrong, strict=True)


def test_factory_falls_back_to_lexicon_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        detector = build_detector("classifier", embedder=HashingEmbedder(dim=256))
    assert isinstance(detector, LexiconDetector)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "lexicon" in warnings[0].getMessage() and "hashing-256" in warnings[0].getMessage()


def test_auto_picks_classifier_only_when_weights_fit(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert isinstance(build_detector("auto", embedder=HashingEmbedder()), LexiconDetector)
        assert isinstance(build_detector("auto", embedder=None), LexiconDetector)
    assert not caplog.records
    spec = read_recipe()["embedder"]
    fitting = embedder_for(spec)
    assert weights_fit(fitting)
    # The fine-tuned model when it loads (tests/core/emotion/test_emotion_finetuned.py).
    assert isinstance(
        build_detector("auto", embedder=fitting), (ClassifierDetector, FinetunedDetector)
    )


def test_unknown_kind_and_missing_model_are_errors() -> None:
    with pytest.raises(EmotionError, match="unknown emotion detector"):
        build_detector("bart", embedder=None)
    with pytest.raises(EmotionError, match="needs a model"):
        build_detector("transformers", embedder=None)


def test_weights_trained_elsewhere_load_with_their_embedder(tmp_path: Path) -> None:
    """A recipe naming the hashing embedder works with it: the check is by name and dim."""
    embedder = HashingEmbedder(dim=16)
    rng = np.random.default_rng(0)
    head = Head(
        labels=LABELS,
        mean=np.zeros(16, np.float32),
        scale=np.ones(16, np.float32),
        w_out=rng.standard_normal((16, 5)).astype(np.float32),
        b_out=np.array([0, 0, 0, 0, 50], np.float32),  # everything is neutral
    )
    weights = tmp_path / "w.npz"
    head.save(weights)
    recipe = {"embedder": {"backend": "hashing", "model": "16", "name": embedder.name, "dim": 16}}
    weights.with_suffix(".json").write_text(json.dumps(recipe), encoding="utf-8")
    detector = build_detector("classifier", embedder=None, weights=weights, strict=True)
    assert detector.detect("qualquer coisa") == EmotionReading("neutro", 1.0)
    with pytest.raises(WeightsMismatchError):
        ClassifierDetector(HashingEmbedder(dim=32), weights)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("você é inútil! essa resposta é ridícula", "agressivo"),
        ("VOCÊ É RIDÍCULO", "agressivo"),
        ("I hate this stupid bot", "agressivo"),
        ("não é ridículo, é só diferente", "neutro"),
        ("obrigado, adorei!", "feliz"),
        ("não estou feliz com isso", "triste"),
        ("Tenho ansiedade social", "triste"),
        ("não entendi, como assim?", "confuso"),
        ("I don't understand what you mean", "confuso"),
        ("o ônibus passa às sete", "neutro"),
    ],
)
def test_lexicon(text: str, label: str) -> None:
    assert LexiconDetector().detect(text).label == label


def test_lexicon_scores_are_bounded_and_folded() -> None:
    detector = LexiconDetector()
    accented, plain = detector.detect_many(["Você é INÚTIL", "voce e inutil"])
    assert accented.label == plain.label == "agressivo"
    neutral = detector.detect("o ônibus passa às sete")
    assert 0.5 <= neutral.score < 0.9
    assert detector.detect(" ").score < 0.5
