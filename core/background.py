"""Bounded background work (memory extraction...) that never crashes the engine."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable

log = logging.getLogger(__name__)


class BackgroundTasks:
    """Runs coroutines in the background, at most ``limit`` at once; failures are logged.
    ``drain`` waits for what is running (graceful shutdown, tests)."""

    def __init__(self, limit: int = 4) -> None:
        self._semaphore = asyncio.Semaphore(limit)
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Awaitable[None], name: str = "background") -> asyncio.Task[None]:
        async def run() -> None:
            try:
                async with self._semaphore:
                    await work
            except asyncio.CancelledError:
                # Cancelled before it started (shutdown): close it so it is not reported
                # as "never awaited". Closing a finished coroutine is harmless.
                if inspect.iscoroutine(work):
                    work.close()
                raise
            except Exception:
                log.exception("background task %s failed", name)

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def wait_all(self) -> None:
        """Wait until nothing is running, work spawned meanwhile included; no time limit,
        nothing cancelled (writes that must land before a store closes)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def drain(self, timeout: float | None = None) -> None:
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
