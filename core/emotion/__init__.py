"""Emotion: detect a message's emotion, keep a per-user emotional state, pick the tone.

Public API (see each module): :class:`EmotionDetector` and :func:`build_detector` (the
default is :class:`ClassifierDetector`; :class:`EnsembleDetector` and
:class:`FinetunedDetector` are opt-in, and become the default only when their recipe is
marked ``"default": true``); :class:`LLMJudge` and :class:`LLMDetector` (the LLM as a
judge, :mod:`core.emotion.llm_judge`);
:class:`EmotionalState`, :func:`apply_reading` and :func:`current_tone`;
:func:`load_emotional_states`.
"""

from __future__ import annotations

from core.emotion.classifier import DEFAULT_WEIGHTS, ClassifierDetector, read_recipe, weights_fit
from core.emotion.config import EmotionalStateConfig, load_emotional_states
from core.emotion.detector import (
    LABELS,
    EmotionDetector,
    EmotionError,
    EmotionReading,
    WeightsMismatchError,
)
from core.emotion.ensemble import ENSEMBLE_RECIPE, EnsembleDetector
from core.emotion.factory import DETECTORS, build_detector
from core.emotion.finetuned import FINETUNED_WEIGHTS, FinetunedDetector
from core.emotion.lexicon import LexiconDetector
from core.emotion.llm_judge import LLMDetector, LLMJudge
from core.emotion.state import (
    HOSTILE_NOTE_EN,
    HOSTILE_NOTE_PT,
    EmotionalState,
    EmotionHistoryEntry,
    EmotionRules,
    Tone,
    apply_reading,
    current_tone,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "DETECTORS",
    "ENSEMBLE_RECIPE",
    "FINETUNED_WEIGHTS",
    "HOSTILE_NOTE_EN",
    "HOSTILE_NOTE_PT",
    "LABELS",
    "ClassifierDetector",
    "EmotionDetector",
    "EmotionError",
    "EmotionHistoryEntry",
    "EmotionReading",
    "EmotionRules",
    "EmotionalState",
    "EmotionalStateConfig",
    "EnsembleDetector",
    "FinetunedDetector",
    "LLMDetector",
    "LLMJudge",
    "LexiconDetector",
    "Tone",
    "WeightsMismatchError",
    "apply_reading",
    "build_detector",
    "current_tone",
    "load_emotional_states",
    "read_recipe",
    "weights_fit",
]
