"""The transformers backend on tiny models built locally (no hub access)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.emotion import LABELS, EmotionError, EmotionReading, build_detector
from core.emotion.transformers_backend import TransformersDetector

REPO = Path(__file__).resolve().parents[3]
WORDS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "i",
    "am",
    "happy",
    "sad",
    "this",
    "text",
    "is",
    "angry",
    "confused",
    "neutral",
    "voce",
    "e",
    "inutil",
]


def _tiny_model(directory: Path, id2label: dict[int, str], bias: list[float]) -> Path:
    """A 1-layer BERT with a 16-d hidden size; the classifier bias decides the output."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    directory.mkdir(parents=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    BertTokenizer(vocab_file=str(vocab), do_lower_case=True).save_pretrained(directory)
    config = BertConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.mul_(0.01)
        model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def emotion_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    labels = {0: "anger", 1: "joy", 2: "sadness", 3: "fear", 4: "Grumpy"}
    return _tiny_model(tmp_path_factory.mktemp("tiny") / "emotion", labels, [0, 6, 0, 0, 0])


@pytest.fixture(scope="module")
def fear_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    labels = {0: "anger", 1: "joy", 2: "fear"}
    return _tiny_model(tmp_path_factory.mktemp("tiny") / "fear", labels, [0, 0, 8])


@pytest.fixture(scope="module")
def nli_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    labels = {0: "contradiction", 1: "neutral", 2: "entailment"}
    return _tiny_model(tmp_path_factory.mktemp("tiny") / "nli", labels, [0, 0, 0])


def test_text_classification_with_default_label_names(emotion_model: Path) -> None:
    detector = build_detector("transformers", embedder=None, model=str(emotion_model))
    assert isinstance(detector, TransformersDetector)
    assert detector.mode == "text-classification"
    readings = detector.detect_many(["i am happy", "", "voce e inutil"])
    assert readings[0].label == "feliz" and readings[0].score > 0.9
    assert readings[1] == EmotionReading("neutro", readings[1].score) and readings[1].score < 0.5
    assert readings[2].label == "feliz"


def test_label_map_overrides_and_adds(emotion_model: Path) -> None:
    detector = build_detector(
        "transformers",
        embedder=None,
        model=str(emotion_model),
        label_map={"joy": "triste", "grumpy": "agressivo"},
    )
    reading = detector.detect("i am happy")
    assert reading.label == "triste" and reading.score > 0.9
    assert isinstance(detector, TransformersDetector)
    assert detector.states == ["agressivo", "triste"]


def test_unmapped_labels_lower_the_score(fear_model: Path) -> None:
    """The model says "fear", which maps to no state: the reading stays under threshold."""
    reading = build_detector("transformers", embedder=None, model=str(fear_model)).detect("sad")
    assert reading.label in ("agressivo", "feliz")
    assert reading.score < 0.01


def test_model_with_no_mappable_label_is_refused(tmp_path: Path) -> None:
    path = _tiny_model(tmp_path / "odd", {0: "LABEL_0", 1: "LABEL_1"}, [0, 0])
    with pytest.raises(EmotionError, match="label_map"):
        TransformersDetector(str(path))
    fixed = TransformersDetector(str(path), label_map={"LABEL_0": "neutro", "LABEL_1": "feliz"})
    assert fixed.detect("this text").label in ("neutro", "feliz")


def test_zero_shot_with_candidate_labels(nli_model: Path) -> None:
    detector = TransformersDetector(str(nli_model))
    assert detector.mode == "zero-shot"
    assert detector.candidates == ["angry", "happy", "sad", "confused", "neutral"]
    readings = detector.detect_many(["i am happy", "this text is sad"])
    for reading in readings:
        assert reading.label in LABELS
        assert 0.0 < reading.score <= 1.0
    custom = TransformersDetector(
        str(nli_model), label_map={"furious": "agressivo", "calm": "neutro"}
    )
    assert custom.candidates == ["furious", "calm"]
    assert custom.detect("i am happy").label in ("agressivo", "neutro")


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmotionError, match="cannot load transformers emotion model"):
        TransformersDetector(str(tmp_path / "does-not-exist"))


def test_missing_libraries_give_a_clear_error() -> None:
    """Run in a fresh interpreter where importing torch fails, as on an install without ML."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from core.emotion import EmotionError, build_detector\n"
        "try:\n"
        "    build_detector('transformers', embedder=None, model='x')\n"
        "except EmotionError as exc:\n"
        "    print('ERR', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.startswith("ERR"), result.stderr
    assert "pip install 'akira-bot[ml]'" in result.stdout
