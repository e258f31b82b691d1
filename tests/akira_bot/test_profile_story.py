"""The design's story replayed through the real engine with the messages' own times:
day 1 angry about work, day 7 happy cooking, day 30 sad about work again. The profile
learns the favourite topics and the style, recalled lines carry how the person felt, the
emotional trajectory is one line, and the "About this person" section is in the prompt.
Then /profile, /user, /export and /forgetme, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from akira_bot.history_import import import_history
from akira_bot.testing import BotTester
from core.i18n import t
from core.profile import ProfileLearner
from tests.postgres import postgres_database

DAY1 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DAY7 = DAY1 + timedelta(days=6)
DAY30 = DAY1 + timedelta(days=29)

STORY = [
    (DAY1, "Odeio meu chefe, essa reunião de trabalho foi um absurdo!!"),
    (DAY1 + timedelta(minutes=2), "meu chefe gritou comigo no trabalho de novo, que raiva 😡"),
    (DAY1 + timedelta(minutes=4), "tô cansado desse emprego"),
    (DAY7, "hoje cozinhei uma pizza deliciosa, amei 😍"),
    (DAY7 + timedelta(minutes=3), "fiz um bolo de chocolate, ficou incrível kkk"),
]
LAST = (DAY30, "tô triste, não consigo parar de pensar no trabalho 😢")

# Two recent turns in the prompt as chat history, so the story's older messages reach it
# as recalled lines.
SETTINGS: dict[str, Any] = {"memory": {"history_turns": 2}}


async def _tell_story(bot: BotTester, user: str = "42") -> None:
    for at, text in [*STORY, LAST]:
        await bot.send(text, user=user, at=at)


def _section(prompt: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", prompt, re.M | re.S)
    assert match is not None, f"no section {title!r} in:\n{prompt}"
    return match.group(1)


async def test_day_1_7_30_story_learns_topics_style_and_feelings() -> None:
    async with BotTester(script=lambda *_: "Entendo.", settings=SETTINGS) as bot:
        await _tell_story(bot)
        prompt = bot.last_system_prompt

    about = _section(prompt, "About this person")
    style = re.search(r"^Their style \(mirror it\): (.*)$", about, re.M)
    assert style is not None
    assert "informal" in style.group(1)
    assert "uses emoji" in style.group(1)
    assert style.group(1).endswith("writes in Portuguese")
    topics = re.search(r"^Topics they care about: (.*)$", about, re.M)
    assert topics is not None
    named = topics.group(1).split(", ")
    # Work came up on day 1 and again today; food on day 7: both still count, work first.
    assert named[0] == "work"
    assert "food" in named

    recalled = _section(prompt, "What you remember about this person")
    # Day 1's anger, 29 days later, and day 7's joy, each on its recalled line.
    assert re.search(
        r"^- 29 days ago, They felt angry and said: Odeio meu chefe", recalled, re.M
    ), recalled
    assert re.search(r"^- 23 days ago, They felt happy and said: ", recalled, re.M), recalled
    # A neutral message is recalled without a feeling.
    for line in recalled.splitlines():
        assert "felt neutral" not in line

    emotional = _section(prompt, "Emotional Context Instructions")
    assert (
        "Their feelings over the last 30 days: angry (29 days ago) → happy (23 days ago)"
        " → sad (just now)"
    ) in emotional


async def test_profile_command_and_admin_user_show_what_was_learned() -> None:
    async with BotTester(script=lambda *_: "Entendo.", settings=SETTINGS) as bot:
        await _tell_story(bot)
        (reply,) = await bot.send("/profile", at=DAY30)
        assert reply.private
        assert "O que aprendi sobre você:" in reply.text
        topics = re.search(r"^Assuntos de que você gosta: (.*)$", reply.text, re.M)
        assert topics is not None
        assert topics.group(1).startswith("trabalho (4), ")  # in the person's language
        assert "comida (2)" in topics.group(1)
        assert "informal, usa emoji" in reply.text
        assert "Mensagens suas que guardo: 6 (desde 2026-03)" in reply.text

        (english,) = await bot.send("/profile", user="7", at=DAY30, locale="en")
        assert english.text.startswith("I haven't learned much about you yet")

        (admin,) = await bot.send("/user console:42", user="1", admin=True, at=DAY30)
        assert "Assuntos favoritos: trabalho (4), " in admin.text
        assert "Estilo: mensagens " in admin.text

        help_text = "\n".join(r.text for r in await bot.send("/help", at=DAY30))
        assert "/profile — O que aprendi sobre você" in help_text


async def test_interests_fade_with_message_time() -> None:
    """90 days after the story nothing is a favourite any more: one new message about
    food is the only topic left (time is the messages', not the clock's). What a message
    teaches is learned once its vector and tags are stored, off the person's path, so the
    message's own prompt may come before it; their next message waits for it (on either
    backend), and its prompt has it."""
    async with BotTester(script=lambda *_: "Entendo.", settings=SETTINGS) as bot:
        await _tell_story(bot)
        later = DAY30 + timedelta(days=90)
        await bot.send("vou cozinhar um jantar hoje", at=later)
        await bot.send("depois te conto", at=later + timedelta(minutes=1))
        about = _section(bot.last_system_prompt, "About this person")
        assert "Topics they care about: food" in about.splitlines()


async def test_switched_off_the_profile_learns_nothing_and_has_no_command() -> None:
    builtins = ["emotion", "structured_memories", "user_commands", "admin_commands"]
    settings = {**SETTINGS, "bot": {"builtins": builtins}}
    async with BotTester(script=lambda *_: "Entendo.", settings=settings) as bot:
        await _tell_story(bot)
        assert "## About this person" not in bot.last_system_prompt
        assert await bot.engine.storage.profiles.counters("console:42") == []
        (reply,) = await bot.send("/profile", at=DAY30)
        assert reply.text == t("unknown_command", "pt", name="profile")


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    if request.param == "sqlite":
        yield {}
        return
    async with postgres_database() as dsn:
        yield {"storage": {"backend": "postgres", "postgres_dsn": dsn}}


async def test_profile_is_exported_and_forgotten(backend: dict[str, Any]) -> None:
    async with BotTester(script=lambda *_: "Entendo.", settings={**SETTINGS, **backend}) as bot:
        await _tell_story(bot)
        await _tell_story(bot, user="7")  # someone else, kept throughout

        (export,) = await bot.send("/export", at=DAY30)
        assert export.attachment is not None
        data = json.loads(export.attachment.data)
        learned = data["learned_profile"]
        named = [t["topic"] for t in learned["favorite_topics"]]
        assert named[0] == "work"
        assert "food" in named
        assert learned["favorite_topics"][0]["mentions"] == 4
        style = learned["communication_style"]
        assert style["messages"] == 6
        assert style["languages"] == ["pt"]
        assert {"informal", "emoji"} <= set(style["traits"])
        assert {"type": "user_message", "period": "2026-03", "count": 6} in learned["node_index"]
        assert {c["kind"] for c in learned["counters"]} == {"topic", "tag", "style", "language"}

        (ask,) = await bot.send("/forgetme", at=DAY30)
        code = re.search(r"/forgetme (\S+)", ask.text)
        assert code is not None
        await bot.send(f"/forgetme {code.group(1)}", at=DAY30)

        profiles = bot.engine.storage.profiles
        assert await profiles.counters("console:42") == []
        assert await profiles.node_index("console:42") == []
        assert await profiles.counters("console:7") != []
        (again,) = await bot.send("/export", at=DAY30)
        assert again.attachment is not None
        assert "learned_profile" not in json.loads(again.attachment.data)


async def test_an_imported_history_teaches_the_same_profile_as_the_live_one(
    tmp_path: Path,
) -> None:
    """``akira-bot memory import`` learns from each imported message, at its own time:
    the story imported for one person gives the profile the live story gave another.
    Importing the file twice adds nothing."""
    history = tmp_path / "history.jsonl"
    history.write_text(
        "\n".join(
            json.dumps({"user": "console:9", "text": text, "timestamp": at.isoformat(), "id": i})
            for i, (at, text) in enumerate([*STORY, LAST])
        ),
        encoding="utf-8",
    )
    async with BotTester(script=lambda *_: "Entendo.", settings=SETTINGS) as bot:
        await _tell_story(bot)
        for _ in range(2):
            await import_history(bot.engine.services, history, fmt="jsonl")
        learner = bot.engine.services.require(ProfileLearner)
        live = await learner.profile("console:42", at=DAY30)
        imported = await learner.profile("console:9", at=DAY30)
    assert imported.to_dict() == live.to_dict()
    assert imported.favorite_topics[0].name == "work"
    assert imported.style.messages == 6
