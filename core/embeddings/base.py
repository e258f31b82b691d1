"""The embedder interface. Every stored vector carries ``name`` and ``dim`` of its model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class EmbeddingError(RuntimeError):
    """An embedding backend could not be loaded or used."""


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors.

    ``name`` identifies the model (and its variant) so vectors of two models are never
    mixed; ``dim`` is the vector size. Methods are synchronous and CPU-bound: callers run
    them off the event loop (see :class:`core.embeddings.batcher.EmbeddingBatcher`).
    """

    name: str
    dim: int
    # Cheap enough to run on the event loop (no batching wait, no thread hop): a thread
    # only pays off for work that releases the GIL, like a model's matrix products.
    inline: bool = False

    @abstractmethod
    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored content, shape ``(len(texts), dim)``."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for search queries; models with asymmetric prefixes override this."""
        return self.embed_passages(texts)

    def embed_passage(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    # Row norms by einsum: np.linalg.norm's generic path costs ~3x as much on the
    # one-row matrices a message embeds (a few µs, three times a message).
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]
    norms[norms == 0] = 1.0
    return matrix / norms
