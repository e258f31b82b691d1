"""End to end: the unmodified python-telegram-bot, driven by TelegramAdapter, talking over
loopback to a fake Bot API server. The handler here is a small real MessageHandler (records
messages, answers, refuses an admin command to non-admins), independent of the engine."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.telegram import TelegramAdapter, TelegramConfig
from adapters.telegram.adapter import TelegramStartError
from core.types import (
    Attachment,
    ChatKind,
    CommandSpec,
    IncomingMessage,
    Reply,
    ReplyKind,
    Responder,
)
from tests.fakes.telegram_api import FakeTelegramServer

ADMIN_ID = 1
USER_ID = 42
OTHER_ID = 43
GROUP_ID = -100123

PARAGRAPH = "This is a sentence about memory. " * 40  # ~1320 characters
LONG_TEXT = "\n\n".join(f"{i}. {PARAGRAPH.strip()}" for i in range(8))  # ~10600 characters


@dataclass
class EchoHandler:
    """A minimal real MessageHandler: echoes text, runs a few commands, checks admins."""

    messages: list[IncomingMessage] = field(default_factory=list)
    delay: float = 0.0
    gates: dict[str, asyncio.Event] = field(default_factory=dict)

    @property
    def commands(self) -> Sequence[CommandSpec]:
        return [
            CommandSpec("start", "Start talking", "Começar a conversa"),
            CommandSpec("help", "What I can do", "O que eu sei fazer"),
            CommandSpec("export", "Export your data", "Exportar seus dados"),
            CommandSpec("stats", "Bot statistics", "Estatísticas", admin_only=True),
        ]

    async def handle(self, message: IncomingMessage, responder: Responder) -> None:
        self.messages.append(message)
        gate = self.gates.get(message.text)
        if gate is not None:
            await asyncio.wait_for(gate.wait(), 5)
        command = message.command
        if command is not None:
            await self._command(message, responder)
            return
        async with responder.typing():
            if self.delay:
                await asyncio.sleep(self.delay)
            text = LONG_TEXT if message.text == "long please" else f"echo: {message.text}"
        await responder.send(Reply(text=text))

    async def _command(self, message: IncomingMessage, responder: Responder) -> None:
        assert message.command is not None
        name = message.command.name
        spec = next((s for s in self.commands if s.name == name), None)
        if spec is None:
            await responder.send(Reply(f"unknown command /{name}", kind=ReplyKind.COMMAND))
        elif spec.admin_only and not message.author.is_admin:
            await responder.send(Reply("Sorry, admins only.", kind=ReplyKind.COMMAND))
        elif name == "stats":
            await responder.send(Reply("stats: 3 users", kind=ReplyKind.COMMAND))
        elif name == "export":
            await responder.send(
                Reply(
                    "Here is everything I store about you.",
                    kind=ReplyKind.COMMAND,
                    private=True,
                    attachment=Attachment("akira-export.json", b'{"memories": []}'),
                )
            )
        else:
            await responder.send(Reply(f"/{name} ok {message.command.args}".strip()))


def config_for(server: FakeTelegramServer, **overrides: object) -> TelegramConfig:
    values: dict[str, object] = {
        "token": server.token,
        "base_url": server.base_url,
        "admin_ids": [ADMIN_ID],
        "poll_timeout": 2,
        "typing_interval": 0.2,
        "stop_timeout": 5.0,
    }
    values.update(overrides)
    return TelegramConfig.model_validate(values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeTelegramServer]:
    server = FakeTelegramServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def running(
    server: FakeTelegramServer, handler: EchoHandler | None = None, **overrides: object
) -> AsyncIterator[tuple[TelegramAdapter, EchoHandler]]:
    handler = handler or EchoHandler()
    adapter = TelegramAdapter(handler, config_for(server, **overrides))
    await adapter.start()
    try:
        yield adapter, handler
    finally:
        await adapter.stop()


async def test_private_round_trip_with_typing_and_commands_registered(
    fake_api: FakeTelegramServer,
) -> None:
    handler = EchoHandler(delay=0.5)
    async with running(fake_api, handler):
        sent = fake_api.send_text("Hello *there* _friend", user_id=USER_ID)
        texts = await fake_api.wait_for_texts(1)

    assert texts == ["echo: Hello *there* _friend"]
    reply = fake_api.sent_messages()[0]
    assert reply.params["chat_id"] == USER_ID
    assert "parse_mode" not in reply.params  # plain text: Markdown can never break a reply
    assert "reply_parameters" not in reply.params  # no quoting needed in a private chat

    (message,) = handler.messages
    assert message.platform == "telegram"
    assert message.chat.kind is ChatKind.DM and message.chat.id == str(USER_ID)
    assert message.author.id == str(USER_ID) and not message.author.is_admin
    assert message.author.display_name == "Ana"
    assert message.message_id == str(sent["message_id"])
    assert message.addressed and message.command is None and message.locale == "en"

    # "typing" was shown before the reply and repeated while the handler worked (0.5 s).
    actions = fake_api.calls_to("sendChatAction")
    assert len(actions) >= 2
    assert all(a.params == {"chat_id": USER_ID, "action": "typing"} for a in actions)
    assert actions[0].at < reply.at

    # Polling mode removed any webhook first; commands were registered per scope.
    assert fake_api.calls_to("deleteWebhook")
    assert fake_api.commands_for() == ["start", "help", "export"]
    admin_scope = {"type": "chat", "chat_id": ADMIN_ID}
    assert fake_api.commands_for(admin_scope) == ["start", "help", "export", "stats"]
    pt = fake_api.commands[('{"type": "default"}', "pt")]
    assert pt[0] == {"command": "start", "description": "Começar a conversa"}


async def test_group_answers_only_when_addressed(fake_api: FakeTelegramServer) -> None:
    bot = fake_api.bot_username
    group = {"chat_id": GROUP_ID, "chat_type": "supergroup", "user_id": USER_ID}
    async with running(fake_api) as (_adapter, handler):
        fake_api.send_text("just chatting with friends", **group)
        mention = fake_api.send_text(f"@{bot} what is my name?", **group)
        bot_msg = {
            "message_id": 5,
            "date": int(time.time()),
            "chat": {"id": GROUP_ID, "type": "supergroup", "title": "Test group"},
            "from": {"id": fake_api.bot_id, "is_bot": True, "first_name": "AKIRA"},
            "text": "earlier answer",
        }
        fake_api.send_text("replying to the bot", reply_to=bot_msg, **group)
        fake_api.send_text("/help", **group)
        fake_api.send_text(f"/help@{bot}", **group)
        fake_api.send_text("/help@someone_else_bot", **group)
        fake_api.send_text("/help without an entity", command=False, **group)
        fake_api.send_text("hey @someone_else look", **group)
        fake_api.send_text("last one for the bot", reply_to=bot_msg, **group)
        texts = await fake_api.wait_for_texts(5)
        await asyncio.sleep(0.2)  # nothing else may arrive

    assert [m.text for m in handler.messages] == [
        "what is my name?",  # the leading @mention is addressing, not content
        "replying to the bot",
        "/help",
        f"/help@{bot}",
        "last one for the bot",
    ]
    assert fake_api.sent_texts() == texts
    assert texts[0] == "echo: what is my name?" and texts[2] == "/help ok"
    first = handler.messages[0]
    assert first.chat.kind is ChatKind.GROUP
    assert first.chat.scope == str(GROUP_ID) and first.chat.title == "Test group"
    assert handler.messages[1].reply_to_id == "5"
    # In a group, the answer quotes the message it answers.
    reply = fake_api.sent_messages(GROUP_ID)[0]
    assert reply.params["reply_parameters"]["message_id"] == mention["message_id"]


@pytest.mark.parametrize(
    ("group_reply", "expected"),
    [
        ("commands", ["/start"]),
        ("all", ["chatting", "hi bot", "/start"]),
    ],
)
async def test_group_reply_setting(
    fake_api: FakeTelegramServer, group_reply: str, expected: list[str]
) -> None:
    group = {"chat_id": GROUP_ID, "chat_type": "group", "user_id": USER_ID}
    async with running(fake_api, group_reply=group_reply) as (_adapter, handler):
        fake_api.send_text("chatting", **group)
        fake_api.send_text(f"@{fake_api.bot_username} hi bot", **group)
        fake_api.send_text("/start", **group)
        await fake_api.wait_for_texts(len(expected))
        await asyncio.sleep(0.2)
    assert [m.text for m in handler.messages] == expected


async def test_commands_and_admin_refusal(fake_api: FakeTelegramServer) -> None:
    async with running(fake_api) as (_adapter, handler):
        fake_api.send_text("/stats", user_id=USER_ID)
        await fake_api.wait_for_texts(1, USER_ID)
        fake_api.send_text("/stats", user_id=ADMIN_ID, first_name="Root")
        await fake_api.wait_for_texts(1, ADMIN_ID)
        fake_api.send_text("/start  hello there", user_id=USER_ID)
        await fake_api.wait_for_texts(2, USER_ID)

    assert fake_api.sent_texts(USER_ID) == ["Sorry, admins only.", "/start ok hello there"]
    assert fake_api.sent_texts(ADMIN_ID) == ["stats: 3 users"]
    refused, granted, start = handler.messages
    assert refused.command is not None and refused.command.name == "stats"
    assert not refused.author.is_admin and granted.author.is_admin
    assert start.command is not None and start.command.args == "hello there"


async def test_long_reply_is_split_on_paragraphs(fake_api: FakeTelegramServer) -> None:
    async with running(fake_api):
        fake_api.send_text("long please")
        await fake_api.wait_for_texts(3)
        await asyncio.sleep(0.1)

    texts = fake_api.sent_texts()
    assert len(texts) == 3
    assert all(len(t) <= 4096 for t in texts)
    # Every chunk ends a paragraph: joining them back gives the reply exactly.
    assert "\n\n".join(texts) == LONG_TEXT
    assert all(t.endswith("memory.") for t in texts)


async def test_rate_limited_reply_is_retried_not_lost(fake_api: FakeTelegramServer) -> None:
    fake_api.fail_next("sendMessage", retry_after=1)
    async with running(fake_api):
        started = time.monotonic()
        fake_api.send_text("first")
        fake_api.send_text("second")
        texts = await fake_api.wait_for_texts(2)
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.1)

    attempts = [c for c in fake_api.calls if c.method == "sendMessage"]
    assert [c.status for c in attempts] == [429, 200, 200]
    assert texts == ["echo: first", "echo: second"]  # nothing lost, order kept
    assert elapsed >= 1.0  # the bot honoured retry_after
    assert attempts[1].at - attempts[0].at >= 1.0


async def test_webhook_mode_checks_the_secret(fake_api: FakeTelegramServer) -> None:
    port = free_port()
    overrides: dict[str, Any] = {
        "mode": "webhook",
        "webhook_url": f"http://127.0.0.1:{port}/tg-hook",
        "webhook_port": port,
        "webhook_path": "tg-hook",
        "webhook_secret": "s3cret-Token_1",
    }
    async with running(fake_api, **overrides) as (_adapter, handler):
        assert fake_api.webhook == {
            "url": f"http://127.0.0.1:{port}/tg-hook",
            "secret_token": "s3cret-Token_1",
        }
        good = {"message": fake_api.make_message("via webhook", user_id=USER_ID)}
        assert await fake_api.deliver_webhook(good) == 200
        assert await fake_api.wait_for_texts(1) == ["echo: via webhook"]

        forged = {"message": fake_api.make_message("forged", user_id=USER_ID)}
        assert await fake_api.deliver_webhook(forged, secret="wrong") == 403
        assert await fake_api.deliver_webhook(forged, secret=None) == 403
        await asyncio.sleep(0.2)

    assert [m.text for m in handler.messages] == ["via webhook"]
    assert fake_api.sent_texts() == ["echo: via webhook"]
    assert not fake_api.calls_to("getUpdates")  # webhook mode never polls


async def test_message_date_becomes_sent_at(fake_api: FakeTelegramServer) -> None:
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(days=7)
    async with running(fake_api) as (_adapter, handler):
        fake_api.send_text("from the future", date=later)
        await fake_api.wait_for_texts(1)
    (message,) = handler.messages
    assert message.sent_at == later
    assert message.sent_at.tzinfo is not None


async def test_other_updates_are_handled_politely(fake_api: FakeTelegramServer) -> None:
    user: dict[str, Any] = {"user_id": USER_ID}
    sticker = {
        "sticker": {
            "file_id": "stk",
            "file_unique_id": "stk-u",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
        }
    }
    photo = {"photo": [{"file_id": "p", "file_unique_id": "pu", "width": 90, "height": 90}]}
    async with running(fake_api) as (_adapter, handler):
        edited = fake_api.make_message("edited text", **user)
        fake_api.push_update({"edited_message": {**edited, "edit_date": int(time.time())}})
        fake_api.send_text(None, extra=sticker, **user)
        fake_api.send_text(None, extra=photo, language_code="pt-br", user_id=OTHER_ID)
        fake_api.push_update(
            {
                "callback_query": {
                    "id": "cb1",
                    "from": {"id": USER_ID, "is_bot": False, "first_name": "Ana"},
                    "chat_instance": "ci",
                    "data": "x",
                }
            }
        )
        channel = fake_api.make_message("channel news", chat_id=-1009, chat_type="channel")
        fake_api.push_update({"channel_post": channel})
        fake_api.send_text(None, extra=sticker, chat_id=GROUP_ID, chat_type="group", **user)
        fake_api.send_text(
            None,
            chat_id=GROUP_ID,
            chat_type="group",
            extra={"new_chat_members": [{"id": 99, "is_bot": False, "first_name": "Bia"}]},
            **user,
        )
        fake_api.send_text("still here?", **user)
        await fake_api.wait_for_texts(2, USER_ID)
        await fake_api.wait_for_texts(1, OTHER_ID)
        await asyncio.sleep(0.2)

    assert fake_api.sent_texts(USER_ID) == [
        "For now I can only read text messages.",
        "echo: still here?",
    ]
    assert fake_api.sent_texts(OTHER_ID) == ["Por enquanto eu só consigo ler mensagens de texto."]
    assert fake_api.sent_texts(GROUP_ID) == []  # an unaddressed sticker, a join: silence
    assert [m.text for m in handler.messages] == ["still here?"]


async def test_one_user_in_order_different_users_concurrently(
    fake_api: FakeTelegramServer,
) -> None:
    handler = EchoHandler()
    # Ana's first message waits until Bia's message has been handled: if users were
    # processed one after the other this would deadlock (and time out).
    bia_done = asyncio.Event()
    handler.gates["a1"] = bia_done

    async def release_when_bia_answered() -> None:
        await fake_api.wait_for_texts(1, OTHER_ID)
        bia_done.set()

    async with running(fake_api, handler):
        releaser = asyncio.create_task(release_when_bia_answered())
        for i in range(1, 6):
            fake_api.send_text(f"a{i}", user_id=USER_ID)
        fake_api.send_text("b1", user_id=OTHER_ID, first_name="Bia")
        texts = await fake_api.wait_for_texts(5, USER_ID)
        await releaser

    assert texts == [f"echo: a{i}" for i in range(1, 6)]
    ana = [m.text for m in handler.messages if m.author.id == str(USER_ID)]
    assert ana == [f"a{i}" for i in range(1, 6)]
    first_ana = fake_api.sent_messages(USER_ID)[0]
    bia = fake_api.sent_messages(OTHER_ID)[0]
    assert bia.at < first_ana.at


async def test_private_reply_in_group_goes_to_dm(fake_api: FakeTelegramServer) -> None:
    group = {"chat_id": GROUP_ID, "chat_type": "supergroup"}
    async with running(fake_api):
        fake_api.send_text("/export", user_id=USER_ID, **group)
        await fake_api.wait_for(lambda: bool(fake_api.calls_to("sendDocument")))
        # A user who never opened a private chat: the group gets a notice, not the data.
        fake_api.blocked_chats.add(OTHER_ID)
        fake_api.send_text("/export", user_id=OTHER_ID, language_code="pt", **group)
        await fake_api.wait_for_texts(1, GROUP_ID)
        await asyncio.sleep(0.1)

    assert fake_api.sent_texts(USER_ID) == ["Here is everything I store about you."]
    (document,) = fake_api.calls_to("sendDocument")
    assert document.params["chat_id"] == USER_ID
    assert document.files["document"] == ("akira-export.json", b'{"memories": []}')
    (notice,) = fake_api.sent_texts(GROUP_ID)
    assert notice.startswith("Não consegui te enviar isso no privado")
    assert "everything I store" not in notice
    assert fake_api.sent_texts(OTHER_ID) == []


async def test_token_never_logged_and_stop_releases_long_poll(
    fake_api: FakeTelegramServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # httpx's own level too: the CLI (run in-process by other tests) turns it down.
    caplog.set_level(logging.DEBUG, logger="httpx")
    adapter = TelegramAdapter(EchoHandler(), config_for(fake_api, poll_timeout=30))
    assert not adapter.connected
    await adapter.start()
    assert adapter.connected
    fake_api.send_text("hi")
    await fake_api.wait_for_texts(1)
    # Let a 30 s long poll be pending, then stop: it must not wait for it.
    await fake_api.wait_for(lambda: len(fake_api.calls_to("getUpdates")) >= 2)
    started = time.monotonic()
    await adapter.stop()
    assert time.monotonic() - started < 5
    assert not adapter.connected
    assert "HTTP Request" in caplog.text  # httpx did log the requests...
    assert fake_api.token not in caplog.text  # ...without the token
    assert fake_api.token not in repr(adapter)
    assert fake_api.token not in repr(adapter.config)


async def test_requires_a_token() -> None:
    with pytest.raises(ValueError, match="token"):
        TelegramAdapter(EchoHandler(), TelegramConfig())
    with pytest.raises(ValueError, match="webhook_url"):
        TelegramAdapter(
            EchoHandler(), TelegramConfig.model_validate({"token": "1:x", "mode": "webhook"})
        )


async def test_rejected_token_fails_start_without_showing_it(
    fake_api: FakeTelegramServer,
) -> None:
    config = config_for(fake_api, token="999:WRONG-secret-token")
    adapter = TelegramAdapter(EchoHandler(), config)
    with pytest.raises(TelegramStartError) as raised:
        await adapter.start()
    assert "rejected the token" in str(raised.value)
    assert "WRONG-secret-token" not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert not adapter.application.running
