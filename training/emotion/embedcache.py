"""On-disk cache of embeddings per text, so training and evaluation can be re-run cheaply.

Each file holds one chunk (texts + vectors) for one embedder, named after the embedder
and a digest; a chunk is written as soon as it is embedded, so an interrupted run resumes
where it stopped, and any subset or reordering of already-seen texts costs nothing.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings import Embedder

log = logging.getLogger(__name__)

CHUNK = 256


def _prefix(embedder: Embedder) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{embedder.name}-{embedder.dim}")


def load_cache(embedder: Embedder, cache_dir: Path) -> dict[str, np.ndarray]:
    known: dict[str, np.ndarray] = {}
    for path in sorted(cache_dir.glob(f"{_prefix(embedder)}--*.npz")):
        with np.load(path, allow_pickle=False) as data:
            for text, vector in zip(data["texts"], data["vectors"], strict=True):
                known[str(text)] = vector
    return known


def save_chunk(
    embedder: Embedder, cache_dir: Path, texts: Sequence[str], vectors: np.ndarray
) -> None:
    digest = hashlib.sha1("\x1f".join(texts).encode("utf-8")).hexdigest()[:16]
    path = cache_dir / f"{_prefix(embedder)}--{digest}.npz"
    np.savez(path, texts=np.array(list(texts)), vectors=vectors.astype(np.float32))


def embed_cached(
    embedder: Embedder, texts: Sequence[str], cache_dir: Path | None, *, chunk: int = CHUNK
) -> np.ndarray:
    """``embedder.embed_queries`` over ``texts``, reusing vectors found in ``cache_dir``.

    e5 models want the ``query:`` prefix for classification-like (symmetric) uses.
    """
    known: dict[str, np.ndarray] = {}
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        known = load_cache(embedder, cache_dir)
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    for start in range(0, len(missing), chunk):
        block = missing[start : start + chunk]
        vectors = embedder.embed_queries(block).astype(np.float32)
        if cache_dir is not None:
            save_chunk(embedder, cache_dir, block, vectors)
        known.update(zip(block, vectors, strict=True))
        log.info("embedded %d/%d new texts", min(start + chunk, len(missing)), len(missing))
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([known[t] for t in texts]).astype(np.float32)


class CachedEmbedder(Embedder):
    """``inner`` with its query vectors looked up in ``cache_dir`` first (same name and
    dimension, so a classifier accepts it): evaluation over texts already embedded for
    training costs no model time. Passages are not cached (the cache holds queries)."""

    def __init__(self, inner: Embedder, cache_dir: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.cache_dir = cache_dir
        self._known = load_cache(inner, cache_dir) if cache_dir.exists() else {}

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_passages(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._known]
        if missing:
            self._known.update(zip(missing, self.inner.embed_queries(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._known[t] for t in texts]).astype(np.float32)
