"""Deterministic hashing embedder: no ML, stable across runs, good enough for tests."""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from core.embeddings.base import Embedder, normalise_rows

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_CACHE = 50_000  # words whose buckets are kept


def fold(text: str) -> str:
    """Lowercase and strip accents: "Cabeça" -> "cabeca"."""
    lowered = text.lower()
    if lowered.isascii():  # most chat text: nothing to strip
        return lowered
    return unicodedata.normalize("NFKD", lowered).translate(_COMBINING)


class _CombiningMarks(dict[int, int | None]):
    """``str.translate`` table deleting combining marks, filled as characters are seen
    (a C-speed lookup per character instead of a Python call)."""

    def __missing__(self, code: int) -> int | None:
        value = None if unicodedata.combining(chr(code)) else code
        self[code] = value
        return value


_COMBINING = _CombiningMarks()


class HashingEmbedder(Embedder):
    """Feature hashing of folded words and character trigrams into ``dim`` buckets."""

    inline = True  # ~0.1 ms a text of pure Python: a thread would only add GIL contention

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._words: dict[str, tuple[list[int], list[float]]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        value = _feature_hash(feature)
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def _word(self, word: str) -> tuple[list[int], list[float]]:
        """A word's buckets and weights: the word itself (x2) and its trigrams."""
        cached = self._words.get(word)
        if cached is None:
            index, sign = self._bucket("w:" + word)
            indices, weights = [index], [2.0 * sign]
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                index, sign = self._bucket("t:" + padded[i : i + 3])
                indices.append(index)
                weights.append(sign)
            cached = (indices, weights)
            if len(self._words) >= _WORD_CACHE:
                self._words.clear()  # chat vocabulary is Zipfian: refills with the common
            self._words[word] = cached
        return cached

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            indices: list[int] = []
            weights: list[float] = []
            for word in _WORD.findall(fold(text)):
                word_indices, word_weights = self._word(word)
                indices += word_indices
                weights += word_weights
            if indices:
                out[row] = np.bincount(indices, weights=weights, minlength=self.dim)
        return normalise_rows(out) if len(texts) else out


@functools.lru_cache(maxsize=1 << 17)
def _feature_hash(feature: str) -> int:
    # Words and trigrams repeat endlessly in chat: each is hashed once (bounded memory).
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")
