"""The ensemble detector: the fine-tuned e5 model and the embedding classifier together.

Logits = ``(1 - mix) *`` the fine-tuned encoder + head logits (:mod:`core.emotion.finetuned`;
with several fine-tuned models, the mean of theirs)
``+ mix *`` the embedding classifier's raw logits (:mod:`core.emotion.classifier`,
embedding and n-gram heads) ``+ lexicon_vote *`` the word lists' vote
(:func:`lexicon_votes`, 0 when the recipe has none), then a log-prior adjustment, then
softmax. Portuguese text (:func:`core.emotion.language.guess_language`) has its own
``mix_pt``, ``lexicon_vote_pt`` and adjustment. Neither component's own
adjustment is used. ``mix`` and the adjustments were chosen on out-of-fold predictions
over the training rows (``python -m training.emotion.ensemble_train``) and live in
``weights/ensemble.json``, which names both component files by sha256: retrained
components mean the recipe no longer fits and :class:`WeightsMismatchError` is raised
(the factory then warns and falls back). Each component keeps its own checks (the
classifier its embedding model, the fine-tuned model its base file).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import Embedder, build_embedder
from core.emotion.classifier import (
    WEIGHTS_DIR,
    ClassifierDetector,
    load_recipe,
    read_recipe,
    readings,
    softmax,
    weights_fit,
)
from core.emotion.detector import (
    LABELS,
    EmotionDetector,
    EmotionError,
    EmotionReading,
    WeightsMismatchError,
)
from core.emotion.e5numpy import file_sha256
from core.emotion.finetuned import FinetunedDetector
from core.emotion.language import guess_language
from core.emotion.lexicon import LexiconDetector

ENSEMBLE_RECIPE = WEIGHTS_DIR / "ensemble.json"


def lexicon_votes(texts: Sequence[str]) -> np.ndarray:
    """One row per text, columns in ``LABELS`` order: 1 for the state the word lists
    (:class:`core.emotion.lexicon.LexiconDetector`) read, when that is not neutro."""
    votes = np.zeros((len(texts), len(LABELS)), dtype=np.float32)
    for row, reading in enumerate(LexiconDetector().detect_many(list(texts))):
        if reading.label != "neutro":
            votes[row, LABELS.index(reading.label)] = 1.0
    return votes


def read_ensemble_recipe(path: Path = ENSEMBLE_RECIPE) -> dict[str, Any]:
    return load_recipe(path, "emotion ensemble", "components")


def _vector(recipe: dict[str, Any], key: str) -> np.ndarray:
    values = recipe[key]
    return np.array([float(values[label]) for label in LABELS], dtype=np.float32)


class EnsembleDetector(EmotionDetector):
    """Both shipped detectors, their logits mixed as the recipe says."""

    name = "ensemble"

    def __init__(self, embedder: Embedder | None = None, recipe: Path = ENSEMBLE_RECIPE) -> None:
        self.recipe = read_ensemble_recipe(recipe)
        parts = self.recipe["components"]
        try:
            # One fine-tuned model, or several whose logits are averaged.
            tuned_specs = parts["finetuned"]
            if isinstance(tuned_specs, dict):
                tuned_specs = [tuned_specs]
            tuned_paths = [recipe.parent / str(spec["file"]) for spec in tuned_specs]
            classifier_path = recipe.parent / str(parts["classifier"]["file"])
            for path, spec in (
                *zip(tuned_paths, tuned_specs, strict=True),
                (classifier_path, parts["classifier"]),
            ):
                if not path.exists():
                    raise EmotionError(f"emotion ensemble component {path} not found")
                if file_sha256(path) != spec["sha256"]:
                    raise WeightsMismatchError(
                        f"the emotion ensemble was chosen for {path.name} with sha256 "
                        f"{str(spec['sha256'])[:12]}…, but that file is another version "
                        f"({file_sha256(path)[:12]}…); rerun `python -m "
                        "training.emotion.ensemble_train` or use one detector alone"
                    )
            if not tuned_paths:
                raise ValueError("no fine-tuned component")
            self.mix = float(self.recipe["mix"])
            self.mix_pt = float(self.recipe.get("mix_pt", self.mix))
            # Weight of the lexicon's vote (lexicon_votes); recipes without one have none.
            self.vote = float(self.recipe.get("lexicon_vote", 0.0))
            self.vote_pt = float(self.recipe.get("lexicon_vote_pt", self.vote))
            self._adjust = _vector(self.recipe, "log_adjust")
            self._adjust_pt = _vector(self.recipe, "log_adjust_pt")
        except (KeyError, TypeError, ValueError) as exc:
            raise EmotionError(f"emotion ensemble recipe {recipe} is incomplete: {exc}") from exc
        if embedder is None or not weights_fit(embedder, classifier_path):
            # Vectors of another model mean nothing to the classifier: build the one it
            # was trained on (as the "auto" detector does).
            spec = read_recipe(classifier_path)["embedder"]
            embedder = build_embedder(str(spec["backend"]), spec.get("model"))
        # Either may raise WeightsMismatchError (other embedding model, other base file).
        self._classifier = ClassifierDetector(embedder, classifier_path)
        self._tuned = [FinetunedDetector(path) for path in tuned_paths]
        if self._classifier.labels != LABELS or any(t.labels != LABELS for t in self._tuned):
            raise EmotionError("emotion ensemble components disagree on the labels")
        self.labels = LABELS

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """Mixed, adjusted logits, columns in :attr:`labels` order."""
        tuned = np.mean(
            [np.stack([model.embedding_logits(t) for t in texts]) for model in self._tuned], axis=0
        )
        classifier = self._classifier.raw_logits(texts)
        pt = np.array([guess_language(t) == "pt" for t in texts], dtype=bool)[:, None]
        mix = np.where(pt, self.mix_pt, self.mix)
        mixed = (1.0 - mix) * tuned + mix * classifier
        if self.vote or self.vote_pt:
            mixed = mixed + np.where(pt, self.vote_pt, self.vote) * lexicon_votes(texts)
        return np.asarray(mixed + np.where(pt, self._adjust_pt, self._adjust), dtype=np.float32)

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        return softmax(self.logits(texts))

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        return readings(self.probabilities(texts), self.labels)
