"""Start a bot with given plugins in the test's own process and talk to it: no network,
no platform, a scripted LLM whose prompts are kept.

    async with BotTester(plugins=["mybot.dice"], script=["Olá!"]) as bot:
        replies = await bot.send("/roll 2d6", user="7")
        assert "🎲" in replies[0].text
        await bot.send("oi")
        assert "Dice facts" in bot.last_system_prompt

    async with BotTester(plugins=[...]) as bot, bot.chat(user="7") as chat:
        chat.receive("/roll").should_call_send("🎲")

The engine is the real one (:func:`akira_bot.app.build_engine`: storage on a SQLite file
in a temporary folder, every built-in and listed plugin set up); only the model is
scripted and the embeddings are the deterministic hashing ones.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from akira_bot.app import build_engine
from akira_bot.plugins import PluginRef, resolve_all
from akira_bot.settings import Settings, claim_sections
from akira_bot.testing.messages import ask, make_message
from akira_bot.testing.scenario import ChatScenario
from core.engine import Engine
from core.llm import ScriptedProvider
from core.llm.base import ChatMessage
from core.types import Reply

# Fast and deterministic: no model to load, same vectors every run.
TEST_DEFAULTS: dict[str, Any] = {
    "llm": {"provider": "scripted"},
    "embedding": {"backend": "hashing"},
    "emotion": {"detector": "lexicon"},
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class BotTester:
    """A started engine with ``plugins`` (after the built-ins and any the settings list),
    answering from ``script`` (see :class:`~core.llm.ScriptedProvider`; nothing scripted
    echoes the message). ``settings`` are overrides as nested dicts
    (``{"bot": {"builtins": []}}``); ``data_dir`` defaults to a temporary folder removed
    on exit."""

    def __init__(
        self,
        *,
        plugins: Sequence[PluginRef] = (),
        script: Any = None,
        settings: dict[str, Any] | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.plugins = list(plugins)
        self.llm = ScriptedProvider(script)
        self._overrides = settings or {}
        self._data_dir = data_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the bot is not started: use `async with BotTester(...)`")
        return self._engine

    @property
    def settings(self) -> Settings:
        return self.engine.services.require(Settings)

    async def __aenter__(self) -> BotTester:
        data_dir = self._data_dir
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="akira-test-")
            data_dir = Path(self._tmp.name)
        values = _merge({**TEST_DEFAULTS, "data_dir": data_dir}, self._overrides)
        claim_sections(p.name for p in resolve_all(self.plugins))
        try:
            self._engine = build_engine(Settings(**values), llm=self.llm, plugins=self.plugins)
            await self._engine.start()
        except BaseException:
            self._cleanup()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._engine is not None:
                await self._engine.close()
        finally:
            self._engine = None
            self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            from core.embeddings import model_cache

            if model_cache.root() == Path(self._tmp.name) / "cache":
                model_cache.set_root(None)  # the folder goes: nothing more is cached there
            self._tmp.cleanup()
            self._tmp = None

    async def send(
        self, text: str, *, user: str = "42", platform: str = "console", **options: Any
    ) -> list[Reply]:
        """Send ``text`` (a command when it starts with ``/``) as ``platform:user`` and
        return the replies. ``options`` as :func:`~akira_bot.testing.make_message`
        takes them: ``admin=True``, ``kind=ChatKind.GROUP``, ``addressed=False``,
        ``at=datetime(...)``, ``name="Ana"``..."""
        responder = await ask(
            self.engine, make_message(text, user=user, platform=platform, **options)
        )
        # Background work (memory extraction, after-reply hooks) finished, so a test can
        # look at what they stored.
        await self.engine.services.background.drain(10.0)
        return list(responder.sent)

    async def say(self, text: str, **options: Any) -> str:
        """Like :meth:`send`, the replies' texts joined by newlines."""
        return "\n".join(r.text for r in await self.send(text, **options))

    def chat(self, *, user: str = "42", platform: str = "console", **defaults: Any) -> ChatScenario:
        """A NoneBug-style scenario: ``chat.receive(text).should_call_send(...)``, checked
        when its ``async with`` block ends."""
        return ChatScenario(self.engine, user=user, platform=platform, **defaults)

    @property
    def prompts(self) -> list[list[ChatMessage]]:
        """Every prompt the model was given, oldest first."""
        return self.llm.prompts

    @property
    def last_system_prompt(self) -> str:
        """The system part of the last prompt (persona, tone, recalled memories, plugin
        sections)."""
        if not self.prompts:
            raise AssertionError("the model was not called")
        return "\n".join(m.content for m in self.prompts[-1] if m.role == "system")
