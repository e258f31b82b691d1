"""The topics' description vectors are kept in the models cache between starts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings import HashingEmbedder, model_cache
from core.memory.tags import Tagger, Topic


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.texts = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed_passages(texts)


TOPICS = [
    Topic(name="music", description="songs, bands and concerts", keywords=("música",)),
    Topic(name="food", description="cooking, recipes and restaurants", keywords=("comida",)),
]


def test_topic_vectors_are_read_back_until_the_descriptions_change(tmp_path: Path) -> None:
    model_cache.set_root(tmp_path)
    try:
        first = CountingEmbedder()
        matrix = Tagger(TOPICS, embedder=first, topic_margin=0.05).topic_matrix()
        assert matrix is not None and first.texts == 2
        again = CountingEmbedder()
        cached = Tagger(TOPICS, embedder=again, topic_margin=0.05).topic_matrix()
        assert again.texts == 0 and cached is not None and np.array_equal(cached, matrix)
        # Another description: embedded again (and the old entry replaced).
        edited = [TOPICS[0], Topic(name="food", description="eating out", keywords=("comida",))]
        other = CountingEmbedder()
        assert Tagger(edited, embedder=other, topic_margin=0.05).topic_matrix() is not None
        assert other.texts == 2 and len(list(tmp_path.iterdir())) == 1
    finally:
        model_cache.set_root(None)
