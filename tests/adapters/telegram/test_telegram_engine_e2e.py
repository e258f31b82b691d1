"""End to end with the real engine: settings -> build_engine (scripted LLM, hashing
embeddings, SQLite in tmp_path) -> build_adapters -> TelegramAdapter -> unmodified
python-telegram-bot -> loopback -> fake Bot API server."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.telegram import TelegramAdapter
from akira_bot.app import build_adapters, build_engine
from akira_bot.settings import Settings
from core.engine import Engine
from core.i18n import t
from core.llm import ChatMessage, ScriptedProvider
from core.storage import NodeType
from tests.fakes.telegram_api import FakeTelegramServer

T = TypeVar("T")
ADMIN_ID = 1
USER_ID = 42
GROUP_ID = -100555

PARAGRAPH = "Memories are kept per person and recalled by meaning. " * 25  # ~1375 chars
LONG_TEXT = "\n\n".join(f"Part {i}. {PARAGRAPH.strip()}" for i in range(7))  # ~9700 chars


def scripted_reply(messages: Sequence[ChatMessage]) -> str:
    """The LLM's part: a long answer when asked for one, else a short fixed answer."""
    last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    if "long please" in last_user:
        return LONG_TEXT
    return "Nice to meet you, I will remember that."


REPLY = "Nice to meet you, I will remember that."


async def eventually(
    probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], within: float = 5.0
) -> T:
    """Poll ``probe`` until ``accept`` holds (work the engine finishes after replying)."""
    async with asyncio.timeout(within):
        while True:
            value = await probe()
            if accept(value):
                return value
            await asyncio.sleep(0.02)


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
async def akira(
    tmp_path: Path, server: FakeTelegramServer, **telegram: Any
) -> AsyncIterator[tuple[Engine, TelegramAdapter]]:
    settings = Settings.model_validate(
        {
            "data_dir": tmp_path,
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "telegram": {
                "token": server.token,
                "base_url": server.base_url,
                "admin_ids": [ADMIN_ID],
                "poll_timeout": 2,
                "typing_interval": 0.2,
                **telegram,
            },
        }
    )
    engine = build_engine(settings, llm=ScriptedProvider(scripted_reply))

    # An admin-only command registered through the engine's own router: the refusal
    # below is the engine's admin check, fed by the adapter's is_admin.
    @engine.router.command("tgstats", "Bot statistics", admin_only=True)
    async def stats(ctx: Any, args: str) -> str:
        return f"users: {await ctx.services.storage.users.count()}"

    adapters = build_adapters(settings, engine)
    assert [type(a) for a in adapters] == [TelegramAdapter]
    (adapter,) = adapters
    assert isinstance(adapter, TelegramAdapter)
    await engine.start()
    await adapter.start()
    try:
        yield engine, adapter
    finally:
        await adapter.stop()
        await engine.close()


async def test_private_round_trip_stores_the_telegram_date(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(days=7)
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        sent = fake_api.send_text("My name is Ana and I love tea", user_id=USER_ID, date=later)
        texts = await fake_api.wait_for_texts(1)
        assert texts == [REPLY]
        owner = f"telegram:{USER_ID}"
        await eventually(lambda: engine.storage.nodes.count(owner), lambda n: n >= 2)
        node = await engine.storage.nodes.by_platform_message(
            f"telegram:{USER_ID}", str(sent["message_id"])
        )
        history = await engine.storage.nodes.recent(f"telegram:{USER_ID}", limit=10)

    assert node is not None
    assert node.content == "My name is Ana and I love tea"
    assert node.type is NodeType.USER_MESSAGE
    assert node.timestamp == later  # the message's own date, not the wall clock
    assert node.chat_kind == "dm" and node.chat_id == str(USER_ID)
    assert any(n.type is NodeType.AKIRA_RESPONSE and n.content == REPLY for n in history)
    assert fake_api.calls_to("sendChatAction")[0].at < fake_api.sent_messages()[0].at
    assert "parse_mode" not in fake_api.sent_messages()[0].params


async def test_group_rule_with_the_engine(tmp_path: Path, fake_api: FakeTelegramServer) -> None:
    group = {"chat_id": GROUP_ID, "chat_type": "supergroup", "user_id": USER_ID}
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        fake_api.send_text("talking among ourselves", **group)
        fake_api.send_text(f"@{fake_api.bot_username} do you know me?", **group)
        await fake_api.wait_for_texts(1)
        await asyncio.sleep(0.2)
        history = await engine.storage.nodes.recent(f"telegram:{USER_ID}", limit=10)

    assert fake_api.sent_texts(GROUP_ID) == [REPLY]
    said = [n.content for n in history if n.type is NodeType.USER_MESSAGE]
    assert said == ["do you know me?"]  # the unaddressed message never reached the core
    assert all(n.scope == str(GROUP_ID) for n in history)


async def test_commands_registered_and_admin_checked(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    async with akira(tmp_path, fake_api):
        fake_api.send_text("/tgstats", user_id=USER_ID)
        await fake_api.wait_for_texts(1, USER_ID)
        fake_api.send_text("/tgstats", user_id=ADMIN_ID, first_name="Root")
        await fake_api.wait_for_texts(1, ADMIN_ID)

    assert fake_api.sent_texts(USER_ID) == [t("not_allowed", "en")]
    (granted,) = fake_api.sent_texts(ADMIN_ID)
    assert granted.startswith("users: ")
    assert "tgstats" not in fake_api.commands_for()  # hidden from everyone...
    admin_scope = {"type": "chat", "chat_id": ADMIN_ID}
    assert "tgstats" in fake_api.commands_for(admin_scope)  # ...listed for the admin


async def test_long_answer_split_and_429_retried(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    fake_api.fail_next("sendMessage", retry_after=1)
    async with akira(tmp_path, fake_api):
        started = time.monotonic()
        fake_api.send_text("long please")
        texts = await fake_api.wait_for_texts(3)
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.2)

    assert [c.status for c in fake_api.calls if c.method == "sendMessage"] == [429, 200, 200, 200]
    texts = fake_api.sent_texts()
    assert len(texts) == 3 and all(len(x) <= 4096 for x in texts)
    assert "\n\n".join(texts) == LONG_TEXT  # split on paragraphs, nothing lost
    assert elapsed >= 1.0


async def test_webhook_mode_with_the_engine(tmp_path: Path, fake_api: FakeTelegramServer) -> None:
    port = free_port()
    async with akira(
        tmp_path,
        fake_api,
        mode="webhook",
        webhook_url=f"http://127.0.0.1:{port}/hook",
        webhook_port=port,
        webhook_path="hook",
        webhook_secret="hook-secret",
    ) as (engine, _adapter):
        update = {"message": fake_api.make_message("hello by webhook", user_id=USER_ID)}
        assert await fake_api.deliver_webhook(update, secret="not-it") == 403
        assert await fake_api.deliver_webhook(update) == 200
        assert await fake_api.wait_for_texts(1) == [REPLY]
        # The engine stores its reply right after delivering it.
        owner = f"telegram:{USER_ID}"
        await eventually(lambda: engine.storage.nodes.count(owner), lambda n: n >= 2)
        await asyncio.sleep(0.1)
        stored = await engine.storage.nodes.recent(owner, limit=10)

    # The message and the reply, once: the forged delivery was refused.
    assert [(n.type, n.content) for n in stored] == [
        (NodeType.USER_MESSAGE, "hello by webhook"),
        (NodeType.AKIRA_RESPONSE, REPLY),
    ]


async def test_memories_subcommands_round_trip(
    tmp_path: Path, fake_api: FakeTelegramServer
) -> None:
    """/remember with a priority and an expiry, /memories expiring, a search and
    /memories confirm <short id>, typed in Telegram, through python-telegram-bot."""
    owner = f"telegram:{USER_ID}"
    day = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    async with akira(tmp_path, fake_api) as (engine, _adapter):
        memories = engine.services.structured_memories
        assert memories is not None
        await engine.storage.users.ensure(owner, seen_at=day)
        await memories.propose(owner, "fact", "pet", "Has a dog", at=day)

        async def say(text: str, minutes: int) -> str:
            before = len(fake_api.sent_texts(USER_ID))
            fake_api.send_text(text, user_id=USER_ID, date=day + timedelta(minutes=minutes))
            return (await fake_api.wait_for_texts(before + 1, USER_ID))[-1]

        saved = await say("/remember !high trip: Porto for 5 days", 1)
        soon = await say("/memories expiring", 2)
        found = await say("/memories dog", 3)
        short = found.split("id: ")[1].split()[0]
        confirmed = await say(f"/memories confirm {short}", 4)
        stored = {m.key: m for m in await memories.all(owner)}

    assert saved == "Saved: note/trip. Priority: high. Kept until 2025-06-06 12:01 UTC."
    assert "Porto (until 2025-06-06 12:01 UTC)" in soon and "Has a dog" not in soon
    assert "[unverified] pet" in found and len(short) == 6
    assert confirmed == "Confirmed: fact/pet is now verified."
    assert stored["trip"].priority.value == "high"
    assert stored["trip"].expires_at == day + timedelta(minutes=1, days=5)
    assert (stored["pet"].verified, stored["pet"].source.value) == (True, "agent")
