"""Telegram's reaction updates -> the core's IncomingReaction (PTB's own parsing of the
Bot API payload): what was added and removed; nothing for anonymous, bot, channel or
custom-emoji-only changes."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import MessageReactionUpdated

from adapters.telegram.convert import reaction_to_incoming
from akira_bot.features.feedback import rating_of
from core.storage.feedback_records import Rating
from core.types import ChatKind

DATE = 1_750_000_000


def update(**overrides: Any) -> MessageReactionUpdated:
    data: dict[str, Any] = {
        "chat": {"id": 42, "type": "private", "first_name": "Ana"},
        "message_id": 1001,
        "user": {"id": 42, "is_bot": False, "first_name": "Ana"},
        "date": DATE,
        "old_reaction": [{"type": "emoji", "emoji": "👍"}],
        "new_reaction": [{"type": "emoji", "emoji": "👎"}, {"type": "emoji", "emoji": "🔥"}],
    }
    data.update(overrides)
    parsed = MessageReactionUpdated.de_json(data, None)
    assert parsed is not None
    return parsed


def test_the_change_is_what_was_added_and_removed() -> None:
    reaction = reaction_to_incoming(update(), admin_ids=[42])
    assert reaction is not None
    assert reaction.added == ("👎", "🔥") and reaction.removed == ("👍",)
    assert reaction.owner == "telegram:42" and reaction.author.is_admin
    assert reaction.message_id == "1001" and reaction.chat.kind is ChatKind.DM
    assert reaction.sent_at.timestamp() == DATE


def test_a_group_reaction_is_scoped_by_the_group() -> None:
    group = {"id": -100555, "type": "supergroup", "title": "Club"}
    reaction = reaction_to_incoming(update(chat=group), admin_ids=[])
    assert reaction is not None
    assert reaction.chat.kind is ChatKind.GROUP and reaction.chat.privacy_scope == "-100555"


@pytest.mark.parametrize(
    "overrides",
    [
        {"user": None, "actor_chat": {"id": -100555, "type": "supergroup", "title": "Club"}},
        {"user": {"id": 9, "is_bot": True, "first_name": "Other bot"}},
        {"chat": {"id": -100999, "type": "channel", "title": "News"}},
        {"old_reaction": [], "new_reaction": [{"type": "custom_emoji", "custom_emoji_id": "5"}]},
        {"new_reaction": [{"type": "emoji", "emoji": "👍"}]},  # unchanged
    ],
)
def test_changes_that_are_nobodys_or_no_change_give_nothing(overrides: dict[str, Any]) -> None:
    assert reaction_to_incoming(update(**overrides), admin_ids=[]) is None


@pytest.mark.parametrize(
    ("emoji", "rating"),
    [
        ("👍", Rating.UP),
        ("👍🏻", Rating.UP),
        ("👍🏿", Rating.UP),
        ("👎", Rating.DOWN),
        ("👎🏽", Rating.DOWN),
        ("👍\ufe0f", Rating.UP),
        ("❤", None),
        ("🔥", None),
        ("thumbsup", None),
        ("", None),
    ],
)
def test_only_the_thumbs_are_ratings(emoji: str, rating: Rating | None) -> None:
    assert rating_of(emoji) is rating
