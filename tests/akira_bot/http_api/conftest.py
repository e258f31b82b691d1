"""The HTTP side over a real engine (scripted LLM, real SQLite file) on a free port."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from akira_bot.app import build_engine
from akira_bot.http.server import HttpAdapter
from akira_bot.settings import Settings
from core.engine import Engine
from core.llm import ScriptedProvider

SECRET = "test-secret-0123456789-abcdefghijklmnop"
ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Bot:
    engine: Engine
    adapter: HttpAdapter
    settings: Settings
    provider: ScriptedProvider
    # What the LLM answers next, in order (an exception entry is raised); then "ok".
    script: list[str | Exception] = field(default_factory=list)

    @property
    def url(self) -> str:
        assert self.adapter.server is not None
        return self.adapter.server.url

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_cli(self.settings.data_dir, *args, **env)

    async def acli(self, *args: str, **env: str) -> str:
        """Run ``akira-bot ARGS`` beside the running bot; its stdout's first line."""
        proc = await asyncio.to_thread(self.cli, *args, **env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().splitlines()[0]


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of an ``akira-bot`` run on ``data_dir``: no ML, a scripted LLM,
    the HTTP settings of these tests, none of the caller's own AKIRA_ settings but the
    storage (the bot's own database: ``AKIRA_TEST_STORAGE=postgres``, tests/conftest.py)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AKIRA_") or k.startswith("AKIRA_STORAGE__")
    }
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_EMOTION__DETECTOR": "lexicon",
            "AKIRA_LLM__PROVIDER": "scripted",
            "AKIRA_HTTP__JWT_SECRET": SECRET,
            "AKIRA_HTTP__PORT": "8765",
            "PYTHONPATH": str(ROOT),
            **extra,
        }
    )
    return env


def run_cli(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "akira_bot.cli", *args],
        capture_output=True,
        text=True,
        env=cli_env(data_dir, **extra),
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
async def http_bot(settings_factory: Callable[..., Settings]) -> AsyncIterator[Bot]:
    settings = settings_factory(http={"port": 0, "jwt_secret": SECRET})
    script: list[str | Exception] = []

    def answer(messages: Any) -> str:
        entry = script.pop(0) if script else "ok"
        if isinstance(entry, Exception):
            raise entry
        return entry

    provider = ScriptedProvider(answer)
    engine = build_engine(settings, llm=provider)
    await engine.start()
    adapter = HttpAdapter(settings, engine)
    await adapter.start()
    try:
        yield Bot(engine, adapter, settings, provider, script)
    finally:
        await adapter.stop()
        await engine.close()


def sdk(bot: Bot, mind_key: str, jwt: str | None = None) -> Any:
    from synapse_memory import Synapse

    # No retries: a 5xx must fail the test at once, not be retried into hiding.
    return Synapse(bot.url, mind_key, jwt=jwt, timeout=20, max_retries=0)
