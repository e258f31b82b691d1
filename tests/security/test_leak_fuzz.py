"""Leak fuzzing: whatever the model emits, no thinking, ``<!TAG>`` marker or chat-template
token reaches a person — through the whole engine and through each adapter's send path
(console pipe mode, Telegram and Discord against their local fakes).

``contains_internal_marker`` is the strict oracle; a thinking block's words (``SECRET``)
must not survive either.
"""

from __future__ import annotations

import io
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.console import ConsoleAdapter, ConsoleConfig
from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.cleaner import contains_internal_marker
from core.llm import ScriptedProvider
from core.types import ChatKind
from tests.conftest import ask, make_message
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegramServer
from tests.reliability.fake_openai import FakeOpenAI
from tests.security.conftest import start_bot
from tests.security.leak_strategies import MODEL_OUTPUT, SECRET


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        # One bot (a fixture) serves every example, as in production.
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,  # CI runs the same examples every time
    )


class Model:
    """A scripted model whose next output the test sets."""

    def __init__(self) -> None:
        self.output = ""
        self.provider = ScriptedProvider(lambda _messages: self.output)


def assert_clean(texts: list[str], output: str) -> None:
    for text in texts:
        assert not contains_internal_marker(text), (output, text)
        assert SECRET not in text, (output, text)


def app_settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": tmp_path / "data",
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "emotion": {"detector": "lexicon"},
            "memory": {"extraction": False},
            "bot": {"rate_limit_messages": 0},
            **extra,
        }
    )


def discord_settings(tmp_path: Path, fake: FakeDiscord) -> Settings:
    """The app's settings pointed at a running fake Discord."""
    return app_settings(
        tmp_path,
        discord={
            "token": fake.token,
            "api_base": fake.api_base,
            "gateway_url": fake.gateway_url,
            "guild_ready_timeout_s": 0.05,
            "ready_timeout_s": 10.0,
        },
    )


_users = count(1)


@pytest.fixture
def stack() -> dict[str, Any]:
    """Filled by the first example of a test and shared by the rest (one bot serves many
    messages, like in production); its engines are closed by ``engine_factory``."""
    return {}


@fuzz(150)
@given(output=MODEL_OUTPUT, group=st.booleans())
async def test_engine_never_delivers_internal_markers(
    engine_factory, stack: dict[str, Any], output: str, group: bool
) -> None:
    if not stack:
        stack["model"] = model = Model()
        stack["engine"], _ = await engine_factory(lambda _m: model.output)
    stack["model"].output = output
    kind = ChatKind.GROUP if group else ChatKind.DM
    message = make_message("oi, tudo bem?", user=str(next(_users)), kind=kind)
    responder = await ask(stack["engine"], message)
    assert len(responder.sent) == 1  # an answer or a fallback, never silence
    assert_clean(list(responder.texts), output)


@fuzz(60)
@given(output=MODEL_OUTPUT)
async def test_console_pipe_mode_never_prints_internal_markers(
    engine_factory, stack: dict[str, Any], output: str
) -> None:
    if not stack:
        stack["model"] = model = Model()
        stack["engine"], _ = await engine_factory(lambda _m: model.output)
    stack["model"].output = output
    stdout = io.StringIO()
    adapter = ConsoleAdapter(
        stack["engine"], ConsoleConfig(user="fuzz"), stdin=io.StringIO("oi!\n"), stdout=stdout
    )
    await adapter.start()
    lines = stdout.getvalue().splitlines()
    assert len(lines) == 1
    assert_clean(lines, output)


async def start_app(running: dict[str, Any], settings: Settings) -> Model:
    model = Model()
    await start_bot(running, settings, model.provider)
    running["model"] = model
    return model


@fuzz(30)
@given(output=MODEL_OUTPUT)
async def test_telegram_send_path_never_delivers_internal_markers(
    tmp_path: Path, running: dict[str, Any], output: str
) -> None:
    if "fake" not in running:
        fake = FakeTelegramServer()
        await fake.start()
        running["exits"].push_async_callback(fake.stop)
        running["fake"] = fake
        settings = app_settings(
            tmp_path,
            telegram={"token": fake.token, "base_url": fake.base_url, "poll_timeout": 1},
        )
        await start_app(running, settings)
    fake, model = running["fake"], running["model"]
    model.output = output
    before = len(fake.sent_texts())
    fake.send_text("oi, tudo bem?", user_id=4242)
    await fake.wait_for(lambda: len(fake.sent_texts()) > before, within=10)
    assert_clean(fake.sent_texts()[before:], output)


@fuzz(30)
@given(output=MODEL_OUTPUT)
async def test_discord_send_path_never_delivers_internal_markers(
    tmp_path: Path, running: dict[str, Any], output: str
) -> None:
    if "fake" not in running:
        fake = FakeDiscord(heartbeat_interval_ms=1000)
        await fake.start()
        running["exits"].push_async_callback(fake.close)
        running["fake"] = fake
        running["alice"] = fake.add_user("alice")
        settings = discord_settings(tmp_path, fake)
        await start_app(running, settings)
    fake, model, alice = running["fake"], running["model"], running["alice"]
    model.output = output
    channel = fake.dm_channel_id(alice)
    before = len(fake.bot_messages_in(channel))
    await fake.user_message(alice, "oi, tudo bem?")
    await fake.wait_for(lambda: len(fake.bot_messages_in(channel)) > before, within=10)
    texts = [str(m["content"]) for m in fake.bot_messages_in(channel)[before:]]
    assert_clean(texts, output)


async def test_provider_reasoning_content_never_reaches_the_person(tmp_path: Path) -> None:
    hidden = f"<think>{SECRET}</think> the user is annoying {SECRET}"
    async with FakeOpenAI(reply="Olá! Como posso ajudar?", reasoning=hidden) as llm:
        settings = app_settings(
            tmp_path, llm={"provider": "openai", "base_url": llm.base_url, "model": "fake"}
        )
        engine = build_engine(settings)
        await engine.start()
        try:
            responder = await ask(engine, make_message("oi"))
            export = await engine.storage.export_owner("telegram:42")
        finally:
            await engine.close()
    assert responder.texts == ["Olá! Como posso ajudar?"]
    assert SECRET not in repr(export)  # nor is it remembered
