"""Telegram payloads -> IncomingMessage, on real PTB objects decoded from Bot API JSON."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from telegram import Message

from adapters.telegram.config import TelegramConfig
from adapters.telegram.convert import BotIdentity, to_incoming
from core.types import ChatKind

BOT = BotIdentity(id=777, username="akira_bot")
DATE = 1_900_000_000  # 2030-03-17


def message(text: str, *, chat_type: str = "private", **extra: Any) -> Message:
    chat: dict[str, Any] = {"id": 42 if chat_type == "private" else -1001, "type": chat_type}
    if chat_type != "private":
        chat["title"] = "Group"
    data = {
        "message_id": 10,
        "date": DATE,
        "chat": chat,
        "from": {"id": 42, "is_bot": False, "first_name": "Ana", "language_code": "pt-br"},
        "text": text,
        **extra,
    }
    return Message.de_json(data, bot=None)


def test_private_message_fields() -> None:
    incoming = to_incoming(message("oi"), bot=BOT, admin_ids=[42])
    assert incoming is not None
    assert incoming.chat.kind is ChatKind.DM and incoming.chat.privacy_scope == "dm"
    assert incoming.author.key == "telegram:42" and incoming.author.is_admin
    assert incoming.sent_at == datetime.fromtimestamp(DATE, UTC)
    assert incoming.locale == "pt-br" and incoming.addressed and incoming.command is None


def test_command_needs_a_bot_command_entity_at_offset_zero() -> None:
    entity = [{"type": "bot_command", "offset": 0, "length": 9}]
    with_entity = to_incoming(message("/remember tea: yes", entities=entity), bot=BOT, admin_ids=[])
    plain = to_incoming(message("/remember tea: yes"), bot=BOT, admin_ids=[])
    later = [{"type": "bot_command", "offset": 4, "length": 5}]
    inside = to_incoming(message("try /help now", entities=later), bot=BOT, admin_ids=[])
    assert with_entity is not None and with_entity.command is not None
    assert (with_entity.command.name, with_entity.command.args) == ("remember", "tea: yes")
    assert plain is not None and plain.command is None
    assert inside is not None and inside.command is None


def test_group_mentions_with_utf16_offsets_and_text_mentions() -> None:
    # "🙂" is two UTF-16 code units: the entity offset counts them, PTB decodes it.
    text = "🙂 hey @akira_bot look"
    mention = [{"type": "mention", "offset": 7, "length": 10}]
    addressed = to_incoming(
        message(text, chat_type="supergroup", entities=mention), bot=BOT, admin_ids=[]
    )
    wrong = [{"type": "mention", "offset": 7, "length": 10}]
    other = to_incoming(
        message("🙂 hey @someone_x look", chat_type="supergroup", entities=wrong),
        bot=BOT,
        admin_ids=[],
    )
    text_mention = [
        {
            "type": "text_mention",
            "offset": 0,
            "length": 5,
            "user": {"id": 777, "is_bot": True, "first_name": "AKIRA"},
        }
    ]
    by_name = to_incoming(
        message("AKIRA, hello", chat_type="group", entities=text_mention), bot=BOT, admin_ids=[]
    )
    assert addressed is not None and addressed.addressed
    assert addressed.chat.kind is ChatKind.GROUP and addressed.chat.privacy_scope == "-1001"
    assert other is not None and not other.addressed
    assert by_name is not None and by_name.addressed


def test_channels_and_textless_messages_are_not_handed_over() -> None:
    assert to_incoming(message("news", chat_type="channel"), bot=BOT, admin_ids=[]) is None
    sticker = message("x")
    assert (
        to_incoming(
            Message.de_json({**sticker.to_dict(), "text": None}, None), bot=BOT, admin_ids=[]
        )
        is None
    )


@pytest.mark.parametrize(
    ("base_url", "file_url"),
    [
        ("http://127.0.0.1:8081/bot", "http://127.0.0.1:8081/file/bot"),
        ("https://api.telegram.org/bot/", "https://api.telegram.org/file/bot"),
        ("http://h:1/tg/bot{token}", "http://h:1/tg/file/bot{token}"),
    ],
)
def test_base_file_url_follows_the_base_url(base_url: str, file_url: str) -> None:
    config = TelegramConfig.model_validate({"token": "1:x", "base_url": base_url})
    assert config.resolved_base_file_url() == file_url


def test_config_from_env_shape_and_no_telegram_import() -> None:
    code = (
        "import sys; from adapters.telegram.config import TelegramConfig;"
        "c = TelegramConfig.model_validate({'token': 's3cr3t', 'admin_ids': [1, 2]});"
        "assert 's3cr3t' not in repr(c); assert c.admin_ids == [1, 2];"
        "assert 'telegram' not in sys.modules, 'config imported telegram'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
