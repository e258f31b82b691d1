"""Micro-batching: concurrent calls share one model call, run off the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from core.embeddings import Embedder, HashingEmbedder
from core.embeddings.batcher import EmbeddingBatcher


class CountingEmbedder(Embedder):
    """A real hashing embedder that records batch sizes and the thread it ran on."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.name, self.dim = self.inner.name, self.inner.dim
        self.sizes: list[int] = []
        self.threads: set[int] = set()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.sizes.append(len(texts))
        self.threads.add(threading.get_ident())
        if any(t == "boom" for t in texts):
            raise RuntimeError("model failed")
        return self.inner.embed_passages(texts)


async def test_concurrent_calls_share_batches_off_the_loop() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=20)
    texts = [f"mensagem {i}" for i in range(20)]
    vectors = await asyncio.gather(*(batcher.embed_passage(t) for t in texts))
    assert sorted(embedder.sizes, reverse=True) == [8, 8, 4]
    assert threading.get_ident() not in embedder.threads
    for text, vector in zip(texts, vectors, strict=True):
        assert np.allclose(vector, embedder.inner.embed_passage(text))


async def test_a_lone_call_waits_at_most_max_wait() -> None:
    batcher = EmbeddingBatcher(CountingEmbedder(), max_batch=32, max_wait_ms=5)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await batcher.embed_query("oi")
    assert loop.time() - start < 1.0


async def test_a_failure_reaches_every_waiter() -> None:
    batcher = EmbeddingBatcher(CountingEmbedder(), max_batch=4, max_wait_ms=20)
    results = await asyncio.gather(
        batcher.embed_passage("ok"), batcher.embed_passage("boom"), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(ValueError):
        EmbeddingBatcher(CountingEmbedder(), max_batch=0)


class InlineCountingEmbedder(CountingEmbedder):
    inline = True


async def test_inline_embedder_runs_on_the_loop_without_waiting() -> None:
    embedder = InlineCountingEmbedder()
    # A wait this long would show: inline embedders neither batch nor hop threads.
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=10_000)
    vector = await asyncio.wait_for(batcher.embed_passage("oi, tudo bem?"), timeout=5)
    assert embedder.sizes == [1]
    assert embedder.threads == {threading.get_ident()}
    np.testing.assert_allclose(vector, embedder.inner.embed_passage("oi, tudo bem?"))
    assert HashingEmbedder.inline


async def test_a_text_asked_again_is_answered_without_the_model() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=5)
    first = await batcher.embed_query("oi, tudo bem?")
    # Storage, emotion and recall ask for the same text: one model call in all.
    again = await asyncio.wait_for(batcher.embed_query("oi, tudo bem?"), timeout=5)
    assert embedder.sizes == [1] and batcher.texts == 1
    np.testing.assert_array_equal(first, again)
    assert not again.flags.writeable  # shared by every asker
    # Another prefix is another vector.
    await batcher.embed_passage("oi, tudo bem?")
    assert batcher.texts == 2
    with pytest.raises(ValueError):
        await batcher.embed("document", "oi")


async def test_long_texts_take_their_own_lane_one_at_a_time() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=20, long_chars=100)
    long = [f"{i} " + "texto longo colado de uma vez " * 10 for i in range(3)]
    short = [f"mensagem curta {i}" for i in range(5)]
    await asyncio.gather(*(batcher.embed_query(t) for t in [*long, *short]))
    # The short ones shared one batch; each long one ran alone, never mixed with them.
    assert sorted(embedder.sizes) == [1, 1, 1, 5]
    assert batcher.long_texts == 3


async def test_a_short_wait_arriving_later_shortens_the_batch_wait() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    # Work off the reply's path may wait a minute for company; a live message that
    # arrives meanwhile takes it along after its own few milliseconds.
    later = asyncio.ensure_future(batcher.embed_query("a reply", wait_ms=60_000))
    await asyncio.sleep(0)
    await asyncio.wait_for(batcher.embed_query("a message"), timeout=10)
    await asyncio.wait_for(later, timeout=10)
    assert embedder.sizes == [2]
    assert loop.time() - started < 30


async def test_a_text_asked_while_on_its_way_waits_for_that_vector() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=20)
    first, second = await asyncio.gather(
        batcher.embed_passage("a mesma"), batcher.embed_passage("a mesma")
    )
    assert sum(embedder.sizes) == 1
    assert np.array_equal(first, second)


async def test_a_promised_vector_is_waited_for_and_a_broken_promise_computed() -> None:
    embedder = CountingEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=5)
    assert batcher.promise("passage", "prometido")
    assert not batcher.promise("passage", "prometido")  # one promise a text
    waiting = asyncio.create_task(batcher.embed_passage("prometido"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    handed = np.ones(embedder.dim, dtype=np.float32)
    batcher.remember("passage", "prometido", handed)
    assert np.array_equal(await waiting, handed)
    assert embedder.sizes == []  # the model was never asked
    # Given up: the waiting ask computes the vector itself.
    assert batcher.promise("passage", "outro")
    waiting = asyncio.create_task(batcher.embed_passage("outro"))
    await asyncio.sleep(0.05)
    batcher.give_up("passage", "outro")
    assert np.allclose(await waiting, embedder.inner.embed_passage("outro"))
    assert embedder.sizes == [1]


class HeldEmbedder(CountingEmbedder):
    """Holds every model call until released: a batch being computed."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.release.wait(timeout=30)
        return super().embed_passages(texts)


async def test_a_live_text_runs_at_once_when_nothing_is_being_computed() -> None:
    embedder = CountingEmbedder()
    # A window this long would show: with nothing running, no company is coming.
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=10_000)
    await asyncio.wait_for(batcher.embed_query("oi, tudo bem?"), timeout=5)
    # Texts asked for in the same turn of the loop still share the call.
    await asyncio.wait_for(
        asyncio.gather(*(batcher.embed_query(f"mensagem {i}") for i in range(3))), timeout=5
    )
    assert embedder.sizes == [1, 3]


async def test_while_a_batch_runs_the_next_texts_wait_for_company() -> None:
    embedder = HeldEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=8, max_wait_ms=200)
    running = asyncio.create_task(batcher.embed_query("primeira"))
    await asyncio.sleep(0.05)  # its call is held in its thread
    later = [asyncio.create_task(batcher.embed_query(f"depois {i}")) for i in range(3)]
    await asyncio.sleep(0)
    # Arriving one by one, while a batch runs: each waits for the others, up to the window.
    for i in range(3, 5):
        later.append(asyncio.create_task(batcher.embed_query(f"depois {i}")))
        await asyncio.sleep(0.01)
    embedder.release.set()
    await asyncio.wait_for(asyncio.gather(running, *later), timeout=10)
    assert embedder.sizes == [1, 5]
    # A text that may wait longer (a reply's vector, off its person's path) still waits
    # for company when nothing runs.
    reply = asyncio.create_task(batcher.embed_query("a reply", wait_ms=60_000))
    await asyncio.sleep(0.3)
    assert not reply.done()
    batcher.hurry()
    await asyncio.wait_for(reply, timeout=10)
    assert embedder.sizes == [1, 5, 1]
