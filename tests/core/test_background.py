"""Background work: bounded, failures logged, and waited for before shutdown."""

from __future__ import annotations

import asyncio

from core.background import BackgroundTasks


async def test_wait_all_waits_for_work_spawned_while_it_waits() -> None:
    tasks = BackgroundTasks(limit=10)
    done: list[str] = []

    async def second() -> None:
        await asyncio.sleep(0.01)
        done.append("second")

    async def first() -> None:
        await asyncio.sleep(0.01)
        tasks.spawn(second(), name="second")  # spawned after wait_all began
        done.append("first")

    tasks.spawn(first(), name="first")
    await tasks.wait_all()
    assert done == ["first", "second"]
    assert tasks.pending == 0


async def test_wait_all_returns_when_work_fails() -> None:
    tasks = BackgroundTasks()

    async def broken() -> None:
        raise RuntimeError("disk full")

    tasks.spawn(broken(), name="broken")
    await asyncio.wait_for(tasks.wait_all(), 5)  # logged by spawn, not raised here
    assert tasks.pending == 0
