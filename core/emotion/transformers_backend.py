"""A Hugging Face transformers model as emotion detector (the seed's "BART analyzer").

Two modes, chosen from the model's config:

* zero-shot (an NLI model such as ``facebook/bart-large-mnli``, whose labels include
  "entailment"): each candidate label is tried as the hypothesis "This text is {}." and
  the entailment scores are normalised across candidates;
* text-classification (an emotion model): the model's own labels.

Either way ``label_map`` maps a model/candidate label to one of our states. Labels that
map to nothing are not renormalised away: their probability mass simply lowers the score
of the best state, so an unmappable reading ("fear") stays under the confidence threshold.

torch and transformers are imported lazily, only when this detector is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.emotion.detector import EmotionDetector, EmotionError, EmotionReading

# Common emotion-model label names -> our states (matched case-insensitively).
DEFAULT_LABEL_MAP: dict[str, str] = {
    "anger": "agressivo",
    "angry": "agressivo",
    "annoyance": "agressivo",
    "disgust": "agressivo",
    "rage": "agressivo",
    "joy": "feliz",
    "happy": "feliz",
    "happiness": "feliz",
    "amusement": "feliz",
    "excitement": "feliz",
    "gratitude": "feliz",
    "love": "feliz",
    "optimism": "feliz",
    "relief": "feliz",
    "pride": "feliz",
    "sadness": "triste",
    "sad": "triste",
    "grief": "triste",
    "disappointment": "triste",
    "remorse": "triste",
    "confusion": "confuso",
    "confused": "confuso",
    "neutral": "neutro",
}

# Zero-shot candidates (hypothesis phrase -> our state), English as NLI models expect.
DEFAULT_CANDIDATES: dict[str, str] = {
    "angry": "agressivo",
    "happy": "feliz",
    "sad": "triste",
    "confused": "confuso",
    "neutral": "neutro",
}

HYPOTHESIS_TEMPLATE = "This text is {}."


def _import() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise EmotionError(
            "the 'transformers' emotion detector needs torch and transformers "
            "(pip install 'akira-bot[ml]'); or set AKIRA_EMOTION__DETECTOR=classifier or lexicon"
        ) from exc
    return torch, transformers


class TransformersDetector(EmotionDetector):
    """``model`` is a hub id or a local directory; loading happens in the constructor."""

    name = "transformers"

    def __init__(
        self,
        model: str,
        *,
        label_map: Mapping[str, str] | None = None,
        hypothesis_template: str = HYPOTHESIS_TEMPLATE,
        max_length: int = 256,
        batch_size: int = 16,
    ) -> None:
        torch, transformers = _import()
        try:
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(model)
            self._model = transformers.AutoModelForSequenceClassification.from_pretrained(model)
        except Exception as exc:  # hub/network/format errors come in many types
            raise EmotionError(f"cannot load transformers emotion model {model!r}: {exc}") from exc
        self._model.eval()
        self._torch = torch
        self.model_name = model
        self._max_length = max_length
        self._batch_size = batch_size
        self._template = hypothesis_template
        id2label = {int(i): str(n) for i, n in self._model.config.id2label.items()}
        self._entailment = next(
            (i for i, n in id2label.items() if n.lower().startswith("entail")), None
        )
        self.mode = "zero-shot" if self._entailment is not None else "text-classification"
        if self.mode == "zero-shot":
            mapping = dict(label_map) if label_map else dict(DEFAULT_CANDIDATES)
            self.candidates = list(mapping)
            self._column_states = [mapping[c] for c in self.candidates]
        else:
            mapping = {k.lower(): v for k, v in DEFAULT_LABEL_MAP.items()}
            if label_map:
                mapping.update({k.lower(): v for k, v in label_map.items()})
            self.candidates = [id2label[i] for i in sorted(id2label)]
            self._column_states = [mapping.get(n.lower()) for n in self.candidates]  # type: ignore[misc]
            multi = (
                getattr(self._model.config, "problem_type", None) == "multi_label_classification"
            )
            self._multi_label = multi
        if not any(self._column_states):
            raise EmotionError(
                f"none of the labels of {model!r} ({', '.join(self.candidates)}) map to an "
                "emotional state; pass a label_map (model label -> state)"
            )
        self.states = sorted({s for s in self._column_states if s})

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        out: list[EmotionReading] = []
        for start in range(0, len(texts), self._batch_size):
            block = list(texts[start : start + self._batch_size])
            if self.mode == "zero-shot":
                proba = self._zero_shot(block)
            else:
                proba = self._classify(block)
            out.extend(self._aggregate(row) for row in proba)
        return out

    def _logits(self, first: list[str], second: list[str] | None = None) -> np.ndarray:
        encoded = self._tokenizer(
            first,
            second,
            padding=True,
            truncation=True,
            max_length=self._max_length,
            return_tensors="pt",
        )
        with self._torch.no_grad():
            logits = self._model(**encoded).logits
        return np.asarray(logits.float().cpu().numpy(), dtype=np.float64)

    def _classify(self, texts: list[str]) -> np.ndarray:
        logits = self._logits(texts)
        if self._multi_label:
            return 1.0 / (1.0 + np.exp(-logits))
        return _softmax(logits)

    def _zero_shot(self, texts: list[str]) -> np.ndarray:
        k = len(self.candidates)
        premises = [t for t in texts for _ in range(k)]
        hypotheses = [self._template.format(c) for _ in texts for c in self.candidates]
        logits = self._logits(premises, hypotheses)[:, self._entailment]
        return _softmax(logits.reshape(len(texts), k))

    def _aggregate(self, row: np.ndarray) -> EmotionReading:
        totals: dict[str, float] = {}
        for state, p in zip(self._column_states, row, strict=True):
            if state:
                totals[state] = totals.get(state, 0.0) + float(p)
        label = max(totals, key=lambda s: totals[s])
        return EmotionReading(label, round(min(1.0, totals[label]), 4))


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return np.asarray(e / e.sum(axis=-1, keepdims=True))
