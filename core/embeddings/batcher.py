"""Micro-batching of embedding calls, off the event loop.

Embedding is CPU-bound and a model is cheaper per text in a batch. Messages of different
people arrive concurrently, so each call waits at most ``max_wait_ms`` for company (work
off the reply's path, like a reply's own vector, may wait longer: ``wait_ms``), then the
whole batch runs in a worker thread (``asyncio.to_thread``) while the loop keeps serving
other people.

A message's text is asked for by several steps (storage, emotion, recall): the latest
vectors are kept, so the later asks are answered at once, without a model call or a
thread hop; an ask while the same text is on its way (in a batch, or promised by a
caller computing it with another model's in one call: :meth:`EmbeddingBatcher.promise`)
waits for that vector instead of computing it again. Long texts (over ``long_chars``)
never join a batch of short ones, whose people would wait for them: they run one at a
time in a lane of their own, so one person pasting long texts holds at most one core.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.embeddings.base import Embedder

RECENT_VECTORS = 1024  # (kind, text) -> vector, latest first out of the LRU
LONG_CHARS = 600  # ~150 tokens: longer texts take the long lane


@dataclass
class _Queue:
    items: list[tuple[str, asyncio.Future[np.ndarray]]] = field(default_factory=list)
    timer: asyncio.Handle | asyncio.TimerHandle | None = None
    deadline: float = 0.0


class EmbeddingBatcher:
    """``await batcher.embed_passage(text)`` / ``embed_query(text)``: one vector each,
    computed together with whatever other calls arrived within ``max_wait_ms``."""

    def __init__(
        self,
        embedder: Embedder,
        max_batch: int = 32,
        max_wait_ms: float = 5.0,
        *,
        long_chars: int = LONG_CHARS,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.embedder = embedder
        self.max_batch = max_batch
        self.max_wait_ms = max_wait_ms
        self.long_chars = long_chars
        self._queues: dict[str, _Queue] = {}
        # Queues belong to one event loop (tests and CLIs may run several in turn).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._long_lane: asyncio.Lock | None = None
        self._recent: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        # (kind, text) -> its vector on its way (None if that computation failed).
        self._on_the_way: dict[tuple[str, str], asyncio.Future[np.ndarray | None]] = {}
        self.batches = 0  # how many model calls were made (observability, tests)
        self.texts = 0  # how many texts went to the model (observability, tests)
        self.long_texts = 0  # of which through the long lane
        self._running: set[asyncio.Task[None]] = set()  # strong refs: tasks are weakly held

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._queues = {}
            self._long_lane = None
            self._on_the_way = {}
        return loop

    def _queue(self, kind: str) -> _Queue:
        self._bind()
        queue = self._queues.get(kind)
        if queue is None:
            queue = self._queues[kind] = _Queue()
        return queue

    async def embed_passage(self, text: str, *, wait_ms: float | None = None) -> np.ndarray:
        return await self.embed("passage", text, wait_ms=wait_ms)

    async def embed_query(self, text: str, *, wait_ms: float | None = None) -> np.ndarray:
        return await self.embed("query", text, wait_ms=wait_ms)

    async def embed(self, kind: str, text: str, *, wait_ms: float | None = None) -> np.ndarray:
        """One vector of ``kind`` ("query" or "passage"). ``wait_ms``: how long it may wait
        for company (default ``max_wait_ms``); a shorter wait arriving later wins."""
        if kind not in ("query", "passage"):
            raise ValueError(f"unknown embedding kind {kind!r}")
        found = self._recent.get((kind, text))
        if found is not None:
            self._recent.move_to_end((kind, text))
            return found
        if self.embedder.inline:
            fn = self.embedder.embed_queries if kind == "query" else self.embedder.embed_passages
            self.batches += 1
            self.texts += 1
            return np.asarray(fn([text])[0], dtype=np.float32)
        loop = self._bind()
        on_the_way = self._on_the_way.get((kind, text))
        if on_the_way is not None:
            promised = await asyncio.shield(on_the_way)
            if promised is not None:
                return promised
            # Its computation failed or was given up: this ask computes it.
        future: asyncio.Future[np.ndarray | None] = loop.create_future()
        self._on_the_way[(kind, text)] = future
        vector: np.ndarray | None = None
        try:
            if len(text) > self.long_chars:
                vector = await self._long(kind, text)
            else:
                vector = await self._submit(
                    kind, text, self.max_wait_ms if wait_ms is None else wait_ms
                )
            self._remember(kind, text, vector)
        finally:
            self._settle(kind, text, future, vector)
        return vector

    def promise(self, kind: str, text: str) -> bool:
        """Whether the caller is to compute ``text``'s vector of ``kind`` elsewhere (with
        another model's, in one call): asks meanwhile wait for it. The caller then hands
        it over with :meth:`remember`, or gives up with :meth:`give_up`."""
        self._bind()
        key = (kind, text)
        if key in self._recent or key in self._on_the_way:
            return False
        self._on_the_way[key] = asyncio.get_running_loop().create_future()
        return True

    def give_up(self, kind: str, text: str) -> None:
        """A promised vector will not come: whoever waits for it computes it."""
        future = self._on_the_way.get((kind, text))
        if future is not None:
            self._settle(kind, text, future, None)

    def _settle(
        self,
        kind: str,
        text: str,
        future: asyncio.Future[np.ndarray | None],
        vector: np.ndarray | None,
    ) -> None:
        if self._on_the_way.get((kind, text)) is future:
            del self._on_the_way[(kind, text)]
        if not future.done():
            future.set_result(vector)

    def known(self, kind: str, text: str) -> np.ndarray | None:
        """The vector of ``kind`` of ``text`` when it is among the latest, else None."""
        return self._recent.get((kind, text))

    def remember(self, kind: str, text: str, vector: np.ndarray) -> None:
        """Keep a vector computed elsewhere (with another model's in one call) for the
        next ask of ``text`` (and for the asks waiting for it: :meth:`promise`)."""
        vector = np.asarray(vector, dtype=np.float32)
        self._remember(kind, text, vector)
        future = self._on_the_way.get((kind, text))
        if future is not None:
            self._settle(kind, text, future, vector)

    def _remember(self, kind: str, text: str, vector: np.ndarray) -> None:
        vector.flags.writeable = False  # shared by every asker
        self._recent[(kind, text)] = vector
        self._recent.move_to_end((kind, text))
        while len(self._recent) > RECENT_VECTORS:
            self._recent.popitem(last=False)

    async def _long(self, kind: str, text: str) -> np.ndarray:
        self._queue(kind)  # binds the lane to this loop
        if self._long_lane is None:
            self._long_lane = asyncio.Lock()
        fn = self.embedder.embed_queries if kind == "query" else self.embedder.embed_passages
        async with self._long_lane:
            found = self._recent.get((kind, text))  # asked twice while waiting
            if found is not None:
                return found
            vectors = await asyncio.to_thread(fn, [text])
            self.batches += 1
            self.texts += 1
            self.long_texts += 1
        return np.asarray(vectors[0], dtype=np.float32)

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
            self.texts += len(chunk)
        return np.vstack(parts).astype(np.float32, copy=False)

    async def _submit(self, kind: str, text: str, wait_ms: float) -> np.ndarray:
        loop = asyncio.get_running_loop()
        queue = self._queue(kind)
        future: asyncio.Future[np.ndarray] = loop.create_future()
        queue.items.append((text, future))
        deadline = loop.time() + wait_ms / 1000.0
        if len(queue.items) >= self.max_batch:
            self._flush(kind)
        elif not self._running and wait_ms <= self.max_wait_ms:
            # Company comes while a batch is being computed: with none running, a live
            # text would wait the whole window on its person's path for company that
            # rarely comes. The texts asked for in this turn of the loop still join it.
            if queue.timer is not None:
                queue.timer.cancel()
            queue.deadline = loop.time()
            queue.timer = loop.call_soon(self._flush, kind)
        elif queue.timer is None or deadline < queue.deadline:
            if queue.timer is not None:
                queue.timer.cancel()
            queue.deadline = deadline
            queue.timer = loop.call_at(deadline, self._flush, kind)
        return await future

    def hurry(self) -> None:
        """Compute what waits for company now: someone waits for it (a person's next
        message, for their reply's vector, which may wait longer than a live text)."""
        for kind in list(self._queues):
            self._flush(kind)

    def _flush(self, kind: str) -> None:
        queue = self._queues.get(kind)
        if queue is None or not queue.items:
            return
        if queue.timer is not None:
            queue.timer.cancel()
            queue.timer = None
        batch, queue.items = queue.items[: self.max_batch], queue.items[self.max_batch :]
        if queue.items:  # more than one batch waiting: the rest goes right after
            queue.deadline = asyncio.get_running_loop().time()
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
            self.texts += len(texts)
        except Exception as exc:  # every waiter learns of the failure, none hangs
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), vector in zip(batch, vectors, strict=True):
            if not future.done():
                future.set_result(np.asarray(vector, dtype=np.float32))
