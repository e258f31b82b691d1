"""Chunked on-disk cache of embeddings, so training and evaluation can be re-run cheaply.

Keys are the embedder name plus the texts of a chunk; a chunk is written as soon as it is
embedded, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings import Embedder

log = logging.getLogger(__name__)

CHUNK = 256


def embed_cached(
    embedder: Embedder, texts: Sequence[str], cache_dir: Path | None, *, chunk: int = CHUNK
) -> np.ndarray:
    """``embedder.embed_queries`` over ``texts``; chunks found in ``cache_dir`` are reused.

    e5 models want the ``query:`` prefix for classification-like (symmetric) uses.
    """
    parts: list[np.ndarray] = []
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
    for start in range(0, len(texts), chunk):
        block = list(texts[start : start + chunk])
        path = None
        if cache_dir is not None:
            digest = hashlib.sha1(
                ("\x1f".join([embedder.name, str(embedder.dim), *block])).encode("utf-8")
            ).hexdigest()
            path = cache_dir / f"{digest}.npy"
            if path.exists():
                parts.append(np.load(path))
                continue
        vectors = embedder.embed_queries(block).astype(np.float32)
        if path is not None:
            np.save(path, vectors)
        parts.append(vectors)
        log.info("embedded %d/%d", min(start + chunk, len(texts)), len(texts))
    if not parts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate(parts, axis=0)
