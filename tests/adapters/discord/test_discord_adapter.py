"""End to end: the unmodified discord.py, driven by DiscordAdapter, talking over loopback to
a fake Discord (REST + gateway websocket). The handler here is a small real MessageHandler
(records messages, answers, has private, admin and slow commands), independent of the
engine; tests/adapters/discord/test_discord_engine.py runs the real engine."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import discord
import pytest

from adapters.discord.adapter import DiscordAdapter, DiscordStartError
from adapters.discord.config import DiscordConfig
from core.types import (
    Attachment,
    ChatKind,
    CommandSpec,
    IncomingMessage,
    Reply,
    ReplyKind,
    Responder,
)
from tests.fakes.discord_api import MANAGE_GUILD, FakeDiscord

PARAGRAPH = "This is a sentence about memory. " * 40  # ~1320 characters
LONG_TEXT = "\n\n".join(f"{i}. {PARAGRAPH.strip()}" for i in range(6))  # ~7950 characters


@dataclass
class EchoHandler:
    """A minimal real MessageHandler: echoes text, runs a few commands, checks admins."""

    messages: list[IncomingMessage] = field(default_factory=list)
    slow_s: float = 0.6

    @property
    def commands(self) -> Sequence[CommandSpec]:
        return [
            CommandSpec("help", "What I can do", "O que eu sei fazer"),
            CommandSpec(
                "remember", "Remember something", "Lembrar algo", args_hint="<key: content>"
            ),
            CommandSpec("export", "Export your data", "Exportar seus dados"),
            CommandSpec("slow", "A slow command", "Um comando lento"),
            CommandSpec("stats", "Bot statistics", "Estatísticas", admin_only=True),
        ]

    async def handle(self, message: IncomingMessage, responder: Responder) -> None:
        self.messages.append(message)
        if message.command is not None:
            await self._command(message, responder)
            return
        async with responder.typing():
            if message.text == "slow please":
                await asyncio.sleep(self.slow_s)
            text = LONG_TEXT if message.text == "long please" else f"echo: {message.text}"
        await responder.send(Reply(text=text))

    async def _command(self, message: IncomingMessage, responder: Responder) -> None:
        assert message.command is not None
        name, args = message.command.name, message.command.args
        if name == "stats":
            if not message.author.is_admin:
                await responder.send(Reply("Sorry, admins only.", kind=ReplyKind.COMMAND))
                return
            await responder.send(Reply("stats: 3 users", kind=ReplyKind.COMMAND, private=True))
        elif name == "export":
            await responder.send(
                Reply(
                    "Here is everything I store about you.",
                    kind=ReplyKind.COMMAND,
                    private=True,
                    attachment=Attachment("akira-export.json", b'{"memories": []}'),
                )
            )
        elif name == "slow":
            await asyncio.sleep(self.slow_s)
            await responder.send(Reply("done slowly", kind=ReplyKind.COMMAND))
        else:
            await responder.send(Reply(f"/{name} ok {args}".strip(), kind=ReplyKind.COMMAND))


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord(heartbeat_interval_ms=500)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def config_for(fake: FakeDiscord, **overrides: object) -> DiscordConfig:
    values: dict[str, object] = {
        "token": fake.token,
        "api_base": fake.api_base,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout_s": 0.05,
        "ready_timeout_s": 10.0,
        "defer_after_s": 2.0,
        "stop_timeout_s": 5.0,
    }
    values.update(overrides)
    return DiscordConfig.model_validate(values)


@asynccontextmanager
async def running(
    fake: FakeDiscord, handler: EchoHandler | None = None, **overrides: object
) -> AsyncIterator[tuple[DiscordAdapter, EchoHandler]]:
    handler = handler or EchoHandler()
    adapter = DiscordAdapter(handler, config_for(fake, **overrides))
    await adapter.start()
    try:
        yield adapter, handler
    finally:
        await adapter.stop()


async def test_dm_round_trip_with_typing_and_commands_synced(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    sent_at = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    async with running(fake) as (adapter, handler):
        # Start-up: login, gateway IDENTIFY with the message-content intent, commands synced.
        assert fake.identifies and fake.identifies[0]["intents"] & (1 << 15)
        assert fake.gateway_queries[0]["encoding"] == "json"
        assert fake.gateway_queries[0]["v"] == "10"
        # discord.py asks for a compressed stream; the fake answers in zlib-stream.
        assert fake.gateway_queries[0].get("compress") in ("zlib-stream", "zstd-stream")
        by_name = {c["name"]: c for c in fake.commands}
        assert set(by_name) == {"help", "remember", "export", "slow", "stats"}
        assert by_name["stats"]["default_member_permissions"] == str(MANAGE_GUILD)
        assert by_name["help"]["default_member_permissions"] is None
        assert by_name["help"]["description_localizations"] == {"pt-BR": "O que eu sei fazer"}
        assert [o["name"] for o in by_name["remember"]["options"]] == ["text"]
        assert by_name["remember"]["options"][0]["required"] is False
        assert by_name["remember"]["options"][0]["description"] == "<key: content>"
        assert by_name["help"]["options"] == []

        msg = await fake.user_message(alice, "hello there", at=sent_at)
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(lambda: fake.bot_messages_in(channel))
        assert [m["content"] for m in fake.bot_messages_in(channel)] == ["echo: hello there"]
        assert channel in fake.typing
        bot_msg = fake.bot_messages_in(channel)[0]
        assert bot_msg["_allowed_mentions"]["parse"] == []

        incoming = handler.messages[0]
        assert incoming.platform == "discord"
        assert incoming.chat.kind is ChatKind.DM
        assert incoming.chat.privacy_scope == "dm"
        assert incoming.author.id == str(alice.id)
        assert incoming.author.is_admin is False
        assert incoming.sent_at == sent_at
        assert incoming.message_id == msg["id"]
        assert incoming.addressed is True
        assert incoming.command is None
        # The bot's own message echoed on the gateway is not handled again.
        await asyncio.sleep(0.2)
        assert len(handler.messages) == 1
        # Heartbeats were acknowledged: discord.py measured a latency.
        assert fake.heartbeats >= 1
        assert adapter.client is not None and adapter.client.latency < 5


async def test_mention_rule_in_a_server(fake: FakeDiscord) -> None:
    bob = fake.add_user("bob")
    guild = fake.add_guild("Club", channels=("general", "random"))
    guild.add_member(bob)
    general, random_ch = list(guild.channels)
    async with running(fake, channel_overrides={str(random_ch): "all"}) as (_, handler):
        await fake.user_message(bob, "just chatting", guild=guild)
        await fake.user_message(bob, "are you there?", guild=guild, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(general))
        first = fake.bot_messages_in(general)[0]
        assert first["content"] == "echo: are you there?"
        # A reply to the asker's message, without pinging them.
        assert str(first["_message_reference"]["message_id"]) == handler.messages[0].message_id
        assert first["_allowed_mentions"]["replied_user"] is False

        # Replying to the bot's message addresses it too.
        await fake.user_message(bob, "and this?", guild=guild, reply_to=int(first["id"]))
        await fake.wait_for(lambda: len(fake.bot_messages_in(general)) == 2)
        assert fake.bot_messages_in(general)[1]["content"] == "echo: and this?"

        # A channel configured to "all" gets answers without a mention.
        await fake.user_message(bob, "anyone?", guild=guild, channel_id=random_ch)
        await fake.wait_for(lambda: fake.bot_messages_in(random_ch))
        await asyncio.sleep(0.2)

    texts = [m.text for m in handler.messages]
    assert texts == ["are you there?", "and this?", "anyone?"]  # "just chatting" ignored
    first_in = handler.messages[0]
    assert first_in.chat.kind is ChatKind.GROUP
    assert first_in.chat.scope == str(guild.id)
    assert first_in.chat.privacy_scope == str(guild.id)
    assert first_in.addressed is True
    assert handler.messages[1].reply_to_id is not None
    assert handler.messages[2].addressed is True  # the channel's mode is "all"
    assert len(fake.bot_messages_in(general)) == 2


async def test_cross_server_memory_setting_shares_one_scope(fake: FakeDiscord) -> None:
    bob = fake.add_user("bob")
    guild = fake.add_guild("Club")
    guild.add_member(bob)
    async with running(fake, cross_server_memory=True) as (_, handler):
        await fake.user_message(bob, "hi", guild=guild, mention_bot=True)
        await fake.wait_for(lambda: handler.messages)
    assert handler.messages[0].chat.scope == "discord"


async def test_manage_server_members_and_configured_ids_are_admins(fake: FakeDiscord) -> None:
    mod = fake.add_user("mod")
    boss = fake.add_user("boss")
    bob = fake.add_user("bob")
    guild = fake.add_guild("Club")
    guild.add_member(mod, manage_guild=True)
    guild.add_member(boss)
    guild.add_member(bob)
    async with running(fake, admin_ids=[boss.id]) as (_, handler):
        for user in (mod, boss, bob):
            await fake.user_message(user, "hey", guild=guild, mention_bot=True)
        await fake.wait_for(lambda: len(handler.messages) == 3)
    admins = {m.author.display_name: m.author.is_admin for m in handler.messages}
    assert admins == {"Mod": True, "Boss": True, "Bob": False}


async def test_slash_command_with_ephemeral_answer_and_attachment(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    guild = fake.add_guild("Club")
    guild.add_member(alice)
    async with running(fake) as (_, handler):
        iid = await fake.slash(alice, "export", guild=guild, locale="pt-BR")
        await fake.wait_for(lambda: fake.events_for(iid))
        await asyncio.sleep(0.1)
        events = fake.events_for(iid)
        assert len(events) == 1
        event = events[0]
        assert event.kind == "callback" and event.response_type == 4
        assert event.ephemeral is True
        assert event.content == "Here is everything I store about you."
        assert event.files == [("akira-export.json", b'{"memories": []}')]
        assert json.loads(event.files[0][1]) == {"memories": []}

        iid2 = await fake.slash(alice, "remember", "pizza: loves it", guild=guild)
        await fake.wait_for(lambda: fake.events_for(iid2))
        public = fake.events_for(iid2)[0]
        assert public.ephemeral is False
        assert public.content == "/remember ok pizza: loves it"

    incoming = handler.messages[0]
    assert incoming.command is not None and incoming.command.name == "export"
    assert incoming.locale == "pt-BR"
    assert incoming.chat.scope == str(guild.id)
    assert handler.messages[1].command is not None
    assert handler.messages[1].command.args == "pizza: loves it"
    # Nothing was posted to the channel outside the interaction.
    assert all("_interaction_id" in m for m in fake.bot_messages)


async def test_admin_slash_command_refused_to_member_without_permission(fake: FakeDiscord) -> None:
    bob = fake.add_user("bob")
    mod = fake.add_user("mod")
    guild = fake.add_guild("Club")
    guild.add_member(bob)
    guild.add_member(mod, manage_guild=True)
    async with running(fake) as (_, handler):
        refused = await fake.slash(bob, "stats", guild=guild, locale="pt-BR")
        await fake.wait_for(lambda: fake.events_for(refused))
        allowed = await fake.slash(mod, "stats", guild=guild)
        await fake.wait_for(lambda: fake.events_for(allowed))
        # In DMs only the configured admin ids count.
        dm_refused = await fake.slash(mod, "stats")
        await fake.wait_for(lambda: fake.events_for(dm_refused))

    (r,) = fake.events_for(refused)
    assert r.ephemeral is True
    assert r.content == "Este comando é só para administradores."
    assert "3 users" not in (r.content or "")
    (a,) = fake.events_for(allowed)
    assert a.content == "stats: 3 users" and a.ephemeral is True
    (d,) = fake.events_for(dm_refused)
    assert d.content == "This command is for admins only."
    # The refused calls never reached the handler; only the moderator's did.
    assert [
        (m.author.display_name, m.command.name if m.command else None) for m in handler.messages
    ] == [("Mod", "stats")]


async def test_slow_slash_command_is_deferred_then_followed_up(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    # The follow-up's first attempt is rate limited (webhook route): retried, not lost.
    fake.rate_limit_next("POST", r"/webhooks/\d+/itok-", retry_after=0.1)
    async with running(fake, defer_after_s=0.1) as (_, handler):
        handler.slow_s = 0.6
        started = time.monotonic()
        iid = await fake.slash(alice, "slow")
        await fake.wait_for(lambda: any(e.kind != "callback" for e in fake.events_for(iid)))
        await asyncio.sleep(0.1)
    events = fake.events_for(iid)
    assert [(e.kind, e.response_type) for e in events[:1]] == [("callback", 5)]
    assert events[0].at - started < 0.5  # deferred well before the 3 s deadline
    # The public answer cannot edit the private "thinking" message: it is resolved,
    # removed, and the answer comes as a public follow-up.
    kinds = [e.kind for e in events]
    assert kinds == ["callback", "edit_original", "delete_original", "followup"]
    assert events[-1].content == "done slowly" and events[-1].ephemeral is False
    assert [s for (m, p, s) in fake.requests if m == "POST" and "/webhooks/" in p] == [429, 200]
    assert events[-1].at - started >= 0.5


async def test_slow_private_reply_edits_the_deferred_message(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, defer_after_s=0.0) as (_, _handler):
        iid = await fake.slash(alice, "export")
        await fake.wait_for(lambda: len(fake.events_for(iid)) >= 2)
    events = fake.events_for(iid)
    assert [e.kind for e in events] == ["callback", "edit_original"]
    assert events[0].response_type == 5 and events[0].ephemeral is True
    assert events[1].content == "Here is everything I store about you."
    assert events[1].files == [("akira-export.json", b'{"memories": []}')]


async def test_long_reply_is_split_at_2000_characters(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake):
        await fake.user_message(alice, "long please")
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(
            lambda: sum(len(m["content"]) for m in fake.bot_messages_in(channel)) >= 7500
        )
    parts = [m["content"] for m in fake.bot_messages_in(channel)]
    assert len(parts) >= 4
    assert all(0 < len(p) <= 2000 for p in parts)
    assert " ".join(" ".join(p.split()) for p in parts) == " ".join(LONG_TEXT.split())


async def test_429_with_via_header_is_retried_and_nothing_is_lost(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    channel = fake.dm_channel_id(alice)
    fake.rate_limit_next("POST", rf"/channels/{channel}/messages$", times=1, retry_after=0.3)
    async with running(fake):
        await fake.user_message(alice, "long please")
        await fake.wait_for(
            lambda: sum(len(m["content"]) for m in fake.bot_messages_in(channel)) >= 7500
        )
        await asyncio.sleep(0.2)
    posts = [s for (m, p, s) in fake.requests if m == "POST" and p.endswith(f"{channel}/messages")]
    assert posts[0] == 429 and posts.count(429) == 1
    parts = [m["content"] for m in fake.bot_messages_in(channel)]
    assert len(parts) == posts.count(200)  # every chunk exactly once, in order
    assert " ".join(" ".join(p.split()) for p in parts) == " ".join(LONG_TEXT.split())


async def test_dropped_socket_is_resumed_without_losing_messages(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    channel = fake.dm_channel_id(alice)
    async with running(fake) as (adapter, handler):
        await fake.wait_for(lambda: fake.heartbeats >= 1)
        await fake.drop_gateway()
        # Said while the socket is down: Discord keeps it for the RESUME.
        await fake.user_message(alice, "while you were away")
        await fake.wait_for(lambda: fake.resumes, within=10)
        await fake.wait_for(lambda: fake.bot_messages_in(channel), within=5)
        await fake.user_message(alice, "after the resume")
        await fake.wait_for(lambda: len(fake.bot_messages_in(channel)) == 2)
        assert adapter.connected  # /health's view: ready again after the resume
    assert not adapter.connected  # stopped
    assert len(fake.identifies) == 1  # resumed, not re-identified
    assert fake.resumes[0]["seq"] >= 1
    assert [m.text for m in handler.messages] == ["while you were away", "after the resume"]
    assert [m["content"] for m in fake.bot_messages_in(channel)] == [
        "echo: while you were away",
        "echo: after the resume",
    ]


async def test_unresumable_session_identifies_again(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    channel = fake.dm_channel_id(alice)
    async with running(fake) as (_, handler):
        fake.forget_sessions()
        await fake.drop_gateway()
        await fake.wait_for(lambda: len(fake.identifies) == 2, within=10)
        await fake.wait_for(fake.gateway_connected)
        await fake.user_message(alice, "new session")
        await fake.wait_for(lambda: fake.bot_messages_in(channel))
    assert len(fake.resumes) == 1  # tried to resume, was refused, identified anew
    assert [m.text for m in handler.messages] == ["new session"]


async def test_private_reply_to_a_server_message_goes_by_dm(fake: FakeDiscord) -> None:
    bob = fake.add_user("bob")
    guild = fake.add_guild("Club")
    guild.add_member(bob)
    async with running(fake):
        await fake.user_message(bob, "/export", guild=guild, mention_bot=True)
        dm = fake.dm_channel_id(bob)
        await fake.wait_for(lambda: fake.bot_messages_in(dm))
    assert fake.bot_messages_in(guild.first_channel_id) == []
    (sent,) = fake.bot_messages_in(dm)
    assert sent["_files"] == [("akira-export.json", b'{"memories": []}')]


async def test_private_reply_is_dropped_not_leaked_when_dms_are_closed(fake: FakeDiscord) -> None:
    bob = fake.add_user("bob")
    guild = fake.add_guild("Club")
    guild.add_member(bob)
    fake.closed_dms.add(bob.id)
    async with running(fake) as (_, handler):
        await fake.user_message(bob, "/export", guild=guild, mention_bot=True)
        await fake.wait_for(lambda: any(s == 403 for (_, _, s) in fake.requests))
        await fake.user_message(bob, "still there?", guild=guild, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(guild.first_channel_id))
    assert [m["content"] for m in fake.bot_messages_in(guild.first_channel_id)] == [
        "echo: still there?"
    ]
    assert len(handler.messages) == 2


async def test_commands_synced_to_configured_guilds(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    guild = fake.add_guild("Dev")
    guild.add_member(alice)
    async with running(fake, guild_ids_for_sync=[guild.id]) as (_, handler):
        assert fake.commands == []
        names = {c["name"] for c in fake.guild_commands[guild.id]}
        assert names == {"help", "remember", "export", "slow", "stats"}
        iid = await fake.slash(alice, "help", guild=guild)
        await fake.wait_for(lambda: fake.events_for(iid))
    assert fake.events_for(iid)[0].content == "/help ok"
    assert handler.messages[0].command is not None


def test_reply_mode_channel_override_wins_over_guild() -> None:
    config = DiscordConfig(
        reply_in_guilds="addressed", channel_overrides={"10": "all", "20": "addressed"}
    )
    assert config.reply_mode(guild_id=10, channel_id=30) == "all"
    assert config.reply_mode(guild_id=10, channel_id=20) == "addressed"
    assert config.reply_mode(guild_id=99, channel_id=98) == "addressed"
    assert config.reply_mode(guild_id=None, channel_id=None) == "addressed"


async def test_sharded_mode_connects_every_shard(fake: FakeDiscord) -> None:
    fake.shard_count = 2
    alice = fake.add_user("alice")
    guilds = [fake.add_guild(f"G{i}", shard=i % 2) for i in range(6)]
    on_shard_1 = guilds[1]
    on_shard_1.add_member(alice)
    async with running(fake, sharded=True) as (adapter, handler):
        assert isinstance(adapter.client, discord.AutoShardedClient)
        assert sorted(i["shard"][0] for i in fake.identifies) == [0, 1]
        assert {(g.id >> 22) % 2 for g in guilds} == {0, 1}
        assert len(adapter.client.guilds) == 6  # every shard's GUILD_CREATEs arrived
        await fake.user_message(alice, "hello shards")  # DMs: shard 0
        await fake.wait_for(lambda: fake.bot_messages_in(fake.dm_channel_id(alice)))
        await fake.user_message(alice, "and you?", guild=on_shard_1, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(on_shard_1.first_channel_id))
    assert [m.chat.scope for m in handler.messages] == [None, str(on_shard_1.id)]


async def test_shards_split_between_two_adapters(fake: FakeDiscord) -> None:
    """AKIRA_DISCORD__SHARD_IDS / SHARD_COUNT: two processes (here two adapters) each run
    their own shards of the bot; a server's messages reach the one running its shard."""
    fake.shard_count = 2
    alice = fake.add_user("alice")
    on_shard_0 = fake.add_guild("G0", shard=0)
    on_shard_1 = fake.add_guild("G1", shard=1)
    for guild in (on_shard_0, on_shard_1):
        guild.add_member(alice)
    async with (
        running(fake, shard_ids=[0], shard_count=2) as (first, first_handler),
        running(fake, shard_ids=[1], shard_count=2) as (second, second_handler),
    ):
        assert isinstance(first.client, discord.AutoShardedClient)
        assert isinstance(second.client, discord.AutoShardedClient)
        assert sorted(tuple(i["shard"]) for i in fake.identifies) == [(0, 2), (1, 2)]
        await fake.user_message(alice, "on zero", guild=on_shard_0, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(on_shard_0.first_channel_id))
        await fake.user_message(alice, "on one", guild=on_shard_1, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(on_shard_1.first_channel_id))
    assert [m.chat.scope for m in first_handler.messages] == [str(on_shard_0.id)]
    assert [m.chat.scope for m in second_handler.messages] == [str(on_shard_1.id)]


def test_shard_ids_need_a_count_that_holds_them() -> None:
    with pytest.raises(ValueError, match="SHARD_COUNT"):
        DiscordConfig(shard_ids=[0])
    with pytest.raises(ValueError, match="from 0 to 1"):
        DiscordConfig(shard_ids=[2], shard_count=2)
    assert DiscordConfig(shard_ids=[1], shard_count=2).uses_shards


async def test_bad_token_fails_start_with_a_clear_error(fake: FakeDiscord) -> None:
    adapter = DiscordAdapter(EchoHandler(), config_for(fake, token="wrong"))
    with pytest.raises(DiscordStartError, match="token"):
        await adapter.start()
    assert "wrong" not in repr(adapter.config)


async def test_sent_at_is_the_message_time_not_the_clock(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    old = datetime.now(UTC) - timedelta(days=3)
    async with running(fake) as (_, handler):
        await fake.user_message(alice, "from the past", at=old)
        await fake.wait_for(lambda: handler.messages)
    assert abs((handler.messages[0].sent_at - old).total_seconds()) < 0.001
