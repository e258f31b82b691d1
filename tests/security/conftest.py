"""Shared by the security tests: a running bot (engine + the adapter its settings name)
stopped at the end of the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from akira_bot.app import build_adapters, build_engine
from akira_bot.settings import Settings
from core.engine import Engine
from core.llm.base import LLMProvider
from core.pipeline import Stage


@pytest.fixture
async def running() -> AsyncIterator[dict[str, Any]]:
    """Fakes, adapters and the engine of one test (or one hypothesis run), stopped at its
    end through ``running["exits"]``."""
    async with AsyncExitStack() as exits:
        yield {"exits": exits}


async def start_bot(
    running: dict[str, Any],
    settings: Settings,
    llm: LLMProvider,
    *,
    after_prompt: Stage | None = None,
) -> Engine:
    """The engine and its one adapter, started; ``after_prompt``: a stage put right after
    the prompt stage (to look at what the clean stage will see)."""
    engine = build_engine(settings, llm=llm)
    if after_prompt is not None:
        engine.pipeline.add(after_prompt, after="prompt")
    (adapter,) = build_adapters(settings, engine)
    await engine.start()
    running["exits"].push_async_callback(engine.close)
    await adapter.start()
    running["exits"].push_async_callback(adapter.stop)
    return engine
