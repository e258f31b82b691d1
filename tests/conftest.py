"""Shared fixtures: a real engine on a real SQLite file with a scripted LLM."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from akira_bot.testing.messages import ask, make_message
from core.engine import Engine
from core.llm import ScriptedProvider

__all__ = ["ask", "make_message"]


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """Tests that run the CLI in-process (``main([...])``) point the root logger at that
    test's captured stderr, closed once it ends; a later test's log line would then be a
    "Logging error". Put the root logger back as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sqlite_itself(why): tests SQLite's own machinery (its file, writer, full disk, the"
        " engine workers sharing its file): runs on SQLite whatever AKIRA_TEST_STORAGE says",
    )


@pytest.fixture(autouse=True)
def _storage_backend(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[None]:
    """``AKIRA_TEST_STORAGE=postgres``: every engine a test builds from settings uses a
    PostgreSQL database of its own (tests.postgres), dropped afterwards; the default runs
    on SQLite files. (Tests of SQLite's own machinery open SQLiteStorage directly, or are
    marked ``sqlite_itself``: they run on SQLite either way, each beside a PostgreSQL
    counterpart that the default run runs too.)"""
    if (
        os.environ.get("AKIRA_TEST_STORAGE") != "postgres"
        or request.node.get_closest_marker("sqlite_itself") is not None
    ):
        yield
        return
    import asyncio

    from tests.postgres import create_database, drop_database, dsn_of

    name = asyncio.run(create_database())
    monkeypatch.setenv("AKIRA_STORAGE__BACKEND", "postgres")
    monkeypatch.setenv("AKIRA_STORAGE__POSTGRES_DSN", dsn_of(name))
    try:
        yield
    finally:
        asyncio.run(drop_database(name))


@pytest.fixture
def settings_factory(tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "emotion": {"detector": "lexicon"},
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                base[key] = {**base[key], **value}
            else:
                base[key] = value
        return Settings(**base)

    return make


@pytest.fixture
async def engine_factory(
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[Callable[..., Any]]:
    """``await engine_factory(script=[...], **settings)`` -> (engine, provider), started;
    every engine made is closed at the end of the test."""
    engines: list[Engine] = []

    async def make(
        script: Any = None, *, latency_s: float = 0.0, **overrides: Any
    ) -> tuple[Engine, ScriptedProvider]:
        provider = ScriptedProvider(script, latency_s=latency_s)
        engine = build_engine(settings_factory(**overrides), llm=provider)
        await engine.start()
        engines.append(engine)
        return engine, provider

    yield make
    for engine in engines:
        await engine.close()
