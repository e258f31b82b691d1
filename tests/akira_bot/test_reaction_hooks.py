"""``api.on_reaction``: a plugin's hook gets every reaction the engine is handed, after
the message of that person being handled (so a reply just sent is already stored), and
one hook failing costs nothing to the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from akira_bot.app import build_engine
from akira_bot.plugins import PluginAPI
from akira_bot.settings import Settings
from core.llm import ScriptedProvider
from core.services import Services
from core.types import ChatRef, IncomingReaction, RecordingResponder, Reply, UserRef
from tests.conftest import make_message

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
EVENTS: list[str] = []


def reaction(user: str = "42", added: tuple[str, ...] = ("👍",)) -> IncomingReaction:
    return IncomingReaction(
        platform="telegram",
        chat=ChatRef("telegram", f"dm-{user}"),
        author=UserRef("telegram", user),
        message_id="1001",
        sent_at=T0,
        added=added,
    )


def recording_plugin(api: PluginAPI) -> None:
    @api.on_reaction
    async def broken(reaction: IncomingReaction, services: Services) -> None:
        raise RuntimeError("a broken hook")

    @api.on_reaction
    async def record(reaction: IncomingReaction, services: Services) -> None:
        EVENTS.append(f"reaction {reaction.owner} {''.join(reaction.added)}")


class OrderResponder(RecordingResponder):
    async def send(self, reply: Reply) -> None:
        EVENTS.append("reply")


@pytest.fixture
def settings(settings_factory: Callable[..., Settings]) -> Settings:
    return settings_factory(bot={"default_language": "en"})


async def test_hooks_run_in_the_persons_order_and_survive_a_broken_one(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    EVENTS.clear()
    engine = build_engine(
        settings, llm=ScriptedProvider(["ok"], latency_s=0.3), plugins=[recording_plugin]
    )
    async with engine:
        message = asyncio.create_task(engine.handle(make_message("hi", at=T0), OrderResponder()))
        await asyncio.sleep(0.05)  # the model is answering Ana now
        other = reaction(user="7", added=("🎉",))
        with caplog.at_level(logging.ERROR):
            await asyncio.gather(engine.handle_reaction(reaction()), engine.handle_reaction(other))
        await message
    # Bob's reaction did not wait for Ana's message; Ana's came after her reply.
    assert EVENTS == ["reaction telegram:7 🎉", "reply", "reaction telegram:42 👍"]
    assert sum("a reaction hook failed" in r.getMessage() for r in caplog.records) == 2


async def test_without_hooks_a_reaction_is_a_no_op(settings: Settings) -> None:
    engine = build_engine(
        settings.model_copy(update={"bot": settings.bot.model_copy(update={"builtins": []})}),
        llm=ScriptedProvider(["ok"]),
    )
    async with engine:
        assert engine.services.on_reaction == []
        await engine.handle_reaction(reaction())  # nothing to do, nothing fails


def test_the_feedback_builtin_registers_its_hook_and_stage(settings: Settings) -> None:
    engine = build_engine(settings, llm=ScriptedProvider(["ok"]))
    names: list[Any] = engine.pipeline.names
    assert names.index("feedback_links") == names.index("remember") + 1
    assert [h.__name__ for h in engine.services.on_reaction] == ["record_reaction"]
