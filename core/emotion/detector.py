"""The emotion detector interface shared by every backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from core.embeddings import Embedder

LABELS: tuple[str, ...] = ("agressivo", "feliz", "triste", "confuso", "neutro")

# Score given to empty/whitespace input: it is "neutro" only because there is nothing to
# read, so it sits under any sensible confidence threshold and never changes a state.
EMPTY_SCORE = 0.1


class EmotionError(RuntimeError):
    """An emotion backend could not be loaded or used (missing library, bad weights)."""


class WeightsMismatchError(EmotionError):
    """Classifier weights were trained on another embedding model than the one given."""


@dataclass(frozen=True)
class EmotionReading:
    """One detection: a label from :data:`LABELS` (or a user-configured state) and a
    confidence in ``[0, 1]``."""

    label: str
    score: float


class EmotionDetector(ABC):
    """Reads the emotion of one message. Synchronous and CPU-bound: the pipeline runs it
    off the event loop (``asyncio.to_thread``), unless ``inline`` says it costs less than
    the hop to a thread (a word list: microseconds, and a thread would only fight the
    loop for the GIL)."""

    name: str
    inline: bool = False
    # The embedder whose query vectors (``embed_queries``) the detector reads, if any: a
    # caller that batches embeddings (the memory's batcher) may compute them and hand
    # them over (``query_vectors``), batched with other people's texts.
    query_embedder: Embedder | None = None

    def detect(self, text: str) -> EmotionReading:
        return self.detect_many([text])[0]

    def detect_many(
        self, texts: Sequence[str], query_vectors: np.ndarray | None = None
    ) -> list[EmotionReading]:
        """Readings in input order; empty texts are ``neutro`` with :data:`EMPTY_SCORE`.
        ``query_vectors``: one row per text, ``query_embedder``'s ``embed_queries`` of
        it (rows of empty texts are ignored); only for a detector that has one."""
        if query_vectors is not None:
            if self.query_embedder is None:
                raise EmotionError(f"the {self.name} detector reads no query vectors")
            if len(query_vectors) != len(texts):
                raise ValueError(f"{len(query_vectors)} query vectors for {len(texts)} texts")
        results: list[EmotionReading | None] = [None] * len(texts)
        todo: list[int] = []
        for index, text in enumerate(texts):
            if not text or not text.strip():
                results[index] = EmotionReading("neutro", EMPTY_SCORE)
            else:
                todo.append(index)
        if todo:
            todo_texts = [texts[i] for i in todo]
            if query_vectors is None:
                readings = self._detect_batch(todo_texts)
            else:
                readings = self._detect_vectors(todo_texts, np.asarray(query_vectors)[todo])
            for index, reading in zip(todo, readings, strict=True):
                results[index] = reading
        return [r for r in results if r is not None]

    @abstractmethod
    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        """Readings for non-empty texts."""

    def _detect_vectors(self, texts: Sequence[str], vectors: np.ndarray) -> list[EmotionReading]:
        """Readings for non-empty texts from their query vectors (``query_embedder``'s)."""
        raise NotImplementedError
