"""Feedback through the real discord.py: the fake Discord sends MESSAGE_REACTION_ADD /
_REMOVE (only to a session whose intents ask for reactions, as Discord does); the thumbs
a person puts on a reply reach storage as feedback on that turn, and nothing else does
— in one process, and with the engine in worker processes (``akira-bot run``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from akira_bot.testing import cli_env, start_cli, stop_cli
from akira_bot.testing.discord_api import (
    DIRECT_MESSAGE_REACTIONS,
    GUILD_MESSAGE_REACTIONS,
    FakeDiscord,
)
from core.llm import ScriptedProvider
from core.storage import NodeType, SQLiteStorage
from core.storage.feedback_records import Rating
from tests.adapters.discord.test_discord_engine import (
    REPO,
    running_engine,
    settings_for,
)
from tests.adapters.telegram.test_telegram_engine_e2e import eventually


async def test_thumbs_on_a_dm_reply_are_stored_changed_and_removed(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    alice = fake.add_user("alice")
    owner = f"discord:{alice.id}"
    llm = ScriptedProvider(["Sure, tea is lovely."])
    async with running_engine(settings_for(tmp_path, fake), llm) as (engine, _):
        said = await fake.user_message(alice, "do you like tea?")
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(lambda: fake.bot_messages_in(channel))
        reply_id = int(fake.bot_messages_in(channel)[0]["id"])
        feedback = engine.storage.feedback
        await eventually(lambda: feedback.reply_node(owner, str(channel), str(reply_id)), bool)

        assert await fake.user_reaction(alice, reply_id, "👍🏽")  # a skin tone is still 👍
        up = await eventually(lambda: feedback.ratings(owner), bool)
        await fake.user_reaction(alice, reply_id, "👎")
        both = await eventually(lambda: feedback.ratings(owner), lambda r: len(r) == 2)
        await fake.user_reaction(alice, reply_id, "👍🏽", remove=True)
        down = await eventually(lambda: feedback.ratings(owner), lambda r: len(r) == 1)
        nodes = await engine.storage.nodes.recent(owner, limit=5)

    (reply_node,) = [n for n in nodes if n.type is NodeType.AKIRA_RESPONSE]
    assert reply_node.platform_message_id == str(reply_id)
    assert reply_node.reply_to == said["id"]
    assert [(r.node_id, r.rating, r.emoji) for r in up] == [(reply_node.id, Rating.UP, "👍🏽")]
    assert {r.rating for r in both} == {Rating.UP, Rating.DOWN}
    assert [r.rating for r in down] == [Rating.DOWN]  # removing 👍 left 👎 alone
    # discord.py's default intents ask for reactions in servers and DMs.
    assert fake.identifies[-1]["intents"] & GUILD_MESSAGE_REACTIONS
    assert fake.identifies[-1]["intents"] & DIRECT_MESSAGE_REACTIONS
    assert len(fake.bot_messages_in(channel)) == 1  # nothing is answered to a reaction


async def test_reactions_that_are_not_feedback_on_ones_own_reply_are_ignored(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    club = fake.add_guild("Club")
    club.add_member(alice)
    club.add_member(bob)
    owner = f"discord:{alice.id}"
    channel = club.first_channel_id
    llm = ScriptedProvider(lambda messages: "hello!")
    async with running_engine(settings_for(tmp_path, fake), llm) as (engine, _):
        said = await fake.user_message(alice, "hi all", guild=club, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(channel))
        reply_id = int(fake.bot_messages_in(channel)[0]["id"])
        feedback = engine.storage.feedback
        await eventually(lambda: feedback.reply_node(owner, str(channel), str(reply_id)), bool)

        await fake.user_reaction(bob, reply_id, "👍")  # the reply Alice got, not Bob
        await fake.user_reaction(alice, int(said["id"]), "👍")  # her own message
        await fake.user_reaction(alice, reply_id, "🎉")  # not a thumb
        await fake.user_reaction(alice, reply_id, "thumbsup", custom_emoji_id=4242)  # custom
        await fake.user_reaction(alice, reply_id, "👎", remove=True)  # never added
        await asyncio.sleep(0.3)
        bob_ratings = await feedback.ratings(f"discord:{bob.id}")
        quiet = await feedback.ratings(owner)
        await fake.user_reaction(alice, reply_id, "👎")
        ratings = await eventually(lambda: feedback.ratings(owner), bool)

    assert bob_ratings == [] and quiet == []
    assert [(r.rating, r.message_id, r.chat_id) for r in ratings] == [
        (Rating.DOWN, str(reply_id), str(channel))
    ]
    assert len(fake.bot_messages_in(channel)) == 1


async def test_a_reaction_reaches_storage_through_engine_workers(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    """``AKIRA_BOT__WORKERS=2``: the reply's message id comes back from the parent over
    the worker's socket, and the reaction goes to the worker that owns the person."""
    alice = fake.add_user("alice")
    env = cli_env(
        path=[REPO],
        **fake.settings_env(),
        AKIRA_DATA_DIR=str(tmp_path / "data"),
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_BOT__WORKERS="2",
    )
    proc = await start_cli("run", env=env, cwd=tmp_path)
    try:
        await fake.wait_for(lambda: fake.identifies and fake.command_syncs, within=30)
        await fake.user_message(alice, "hello from discord")
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(lambda: fake.bot_messages_in(channel), within=15)
        reply_id = int(fake.bot_messages_in(channel)[0]["id"])
        async with SQLiteStorage(tmp_path / "data" / "akira.db") as storage:
            owner = f"discord:{alice.id}"
            await eventually(
                lambda: storage.feedback.reply_node(owner, str(channel), str(reply_id)),
                bool,
                within=15,
            )
            await fake.user_reaction(alice, reply_id, "👍")
            ratings = await eventually(lambda: storage.feedback.ratings(owner), bool, within=15)
    finally:
        status, err = await stop_cli(proc, timeout=30)
    assert status == 0, err[-2000:]
    assert [(r.rating, r.message_id) for r in ratings] == [(Rating.UP, str(reply_id))]
