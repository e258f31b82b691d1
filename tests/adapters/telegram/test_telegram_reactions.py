"""Feedback through the real python-telegram-bot: the fake Bot API sends
``message_reaction`` updates (only when the bot asked for them in ``allowed_updates``,
and in groups only to an administrator bot, as Telegram does); the thumbs a person puts
on a reply reach storage as feedback on that turn, and nothing else does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from akira_bot.testing.telegram_api import FakeTelegramServer
from core.storage import NodeType
from core.storage.feedback_records import Rating, ReplyRating
from tests.adapters.telegram.test_telegram_engine_e2e import (
    GROUP_ID,
    REPLY,
    USER_ID,
    akira,
    eventually,
)

OWNER = f"telegram:{USER_ID}"
OTHER_ID = 43


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeTelegramServer]:
    server = FakeTelegramServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def summary(ratings: list[ReplyRating]) -> list[tuple[str, Rating, str]]:
    return [(r.node_id, r.rating, r.emoji) for r in ratings]


async def test_thumbs_on_a_reply_are_stored_changed_and_removed(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        said = fake_api.send_text("Do you like tea?", user_id=USER_ID)
        assert await fake_api.wait_for_texts(1) == [REPLY]
        (reply_id,) = fake_api.sent_message_ids(USER_ID)
        feedback = engine.storage.feedback
        await eventually(lambda: feedback.reply_node(OWNER, str(USER_ID), str(reply_id)), bool)
        # The reply's node and its messages' link are separate writes on PostgreSQL.
        nodes = await eventually(
            lambda: engine.storage.nodes.recent(OWNER, limit=5),
            lambda found: any(n.type is NodeType.AKIRA_RESPONSE for n in found),
        )
        (reply_node,) = [n for n in nodes if n.type is NodeType.AKIRA_RESPONSE]

        fake_api.react(reply_id, new=["👍"], user_id=USER_ID)
        up = await eventually(lambda: feedback.ratings(OWNER), bool)
        fake_api.react(reply_id, old=["👍"], new=["👎"], user_id=USER_ID)
        down = await eventually(
            lambda: feedback.ratings(OWNER), lambda r: [x.rating for x in r] == [Rating.DOWN]
        )
        fake_api.react(reply_id, old=["👎"], user_id=USER_ID)
        gone = await eventually(lambda: feedback.ratings(OWNER), lambda r: not r)

    # The bot asked Telegram for reactions by name (they are never sent otherwise).
    assert fake_api.allowed_updates is not None
    assert "message_reaction" in fake_api.allowed_updates
    # The reply node knows the message it went out as; the rating points at that turn.
    assert reply_node.platform_message_id == str(reply_id)
    assert reply_node.reply_to == str(said["message_id"])
    assert summary(up) == [(reply_node.id, Rating.UP, "👍")]
    assert up[0].message_id == str(reply_id) and up[0].chat_id == str(USER_ID)
    assert summary(down) == [(reply_node.id, Rating.DOWN, "👎")]
    assert gone == []
    assert fake_api.sent_texts() == [REPLY]  # nothing is answered to a reaction


async def test_reactions_that_are_not_feedback_on_ones_own_reply_are_ignored(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    group: dict[str, Any] = {"chat_id": GROUP_ID, "chat_type": "supergroup"}
    fake_api.admin_in.add(GROUP_ID)
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        said = fake_api.send_text("hello", user_id=USER_ID)
        await fake_api.wait_for_texts(1)
        (reply_id,) = fake_api.sent_message_ids(USER_ID)
        fake_api.send_text(f"@{fake_api.bot_username} hi all", user_id=USER_ID, **group)
        await fake_api.wait_for_texts(2)
        (group_reply_id,) = fake_api.sent_message_ids(GROUP_ID)
        feedback = engine.storage.feedback
        await eventually(
            lambda: feedback.reply_node(OWNER, str(GROUP_ID), str(group_reply_id)), bool
        )

        # Not feedback: a thumb on the person's own message, on a message nobody knows,
        # other emoji, a custom emoji; and in the group, another person's thumb on the
        # reply Ana got (Bob never got that reply).
        fake_api.react(int(said["message_id"]), new=["👍"], user_id=USER_ID)
        fake_api.react(999_999, new=["👎"], user_id=USER_ID)
        fake_api.react(reply_id, new=["🔥", "❤"], user_id=USER_ID)
        fake_api.react(reply_id, old=["🔥", "❤"], new_custom=["5368324170671202286"])
        fake_api.react(group_reply_id, new=["👍"], user_id=OTHER_ID, first_name="Bob", **group)
        # A group where the bot is no administrator: Telegram sends nothing.
        assert (
            fake_api.react(group_reply_id, new=["👍"], chat_id=-100777, chat_type="group") is None
        )
        # Ana's own thumb on her group reply: the one rating that counts. Her updates
        # are handled in order, so once it is stored the ones before were handled.
        fake_api.react(group_reply_id, new=["👎"], user_id=USER_ID, **group)
        ratings = await eventually(lambda: feedback.ratings(OWNER), bool)
        await asyncio.sleep(0.1)
        bob = await feedback.ratings(f"telegram:{OTHER_ID}")
        ratings = await feedback.ratings(OWNER)
        group_node = await feedback.reply_node(OWNER, str(GROUP_ID), str(group_reply_id))

    assert [(r.rating, r.message_id, r.chat_id) for r in ratings] == [
        (Rating.DOWN, str(group_reply_id), str(GROUP_ID))
    ]
    assert ratings[0].node_id == group_node
    assert bob == []
    assert len(fake_api.sent_texts()) == 2  # still only the two answers


async def test_feedback_is_exported_and_erased_by_forgetme(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        fake_api.send_text("I am so angry with this!", user_id=USER_ID)
        await fake_api.wait_for_texts(1)
        (reply_id,) = fake_api.sent_message_ids(USER_ID)
        feedback = engine.storage.feedback
        await eventually(lambda: feedback.reply_node(OWNER, str(USER_ID), str(reply_id)), bool)
        fake_api.react(reply_id, new=["👍"], user_id=USER_ID)
        await eventually(lambda: feedback.ratings(OWNER), bool)
        fake_api.send_text("/mood I wasn't angry", user_id=USER_ID)
        await fake_api.wait_for_texts(2)
        fake_api.send_text("/export", user_id=USER_ID)
        await fake_api.wait_for(lambda: bool(fake_api.calls_to("sendDocument")))
        fake_api.send_text("/forgetme", user_id=USER_ID)
        asked = (await fake_api.wait_for_texts(4))[-1]
        code = asked.split("/forgetme ")[1].split()[0]
        fake_api.send_text(f"/forgetme {code}", user_id=USER_ID)
        await fake_api.wait_for_texts(5)
        after = await engine.storage.export_owner(OWNER)
        left = await feedback.reply_node(OWNER, str(USER_ID), str(reply_id))

    (document,) = fake_api.calls_to("sendDocument")
    exported = json.loads(document.files["document"][1])
    (rating,) = exported["feedback"]["ratings"]
    assert rating["rating"] == "up" and rating["message_id"] == str(reply_id)
    (correction,) = exported["feedback"]["corrections"]
    assert correction["text"] == "I am so angry with this!"
    assert (correction["predicted"], correction["corrected"]) == ("agressivo", "neutro")
    assert "feedback" not in after and left is None
