"""End to end with the real engine: fake Discord <-> unmodified discord.py <-> DiscordAdapter
<-> akira_bot's engine (scripted LLM, hashing embeddings, SQLite in tmp_path); and
``akira-bot run`` as a process serving a Discord API given by environment settings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from adapters.discord import DiscordAdapter, DiscordConfig
from akira_bot.app import build_adapters, build_engine
from akira_bot.settings import Settings
from akira_bot.testing import cli_env, start_cli, stop_cli
from akira_bot.testing.discord_api import FakeDiscord, FakeUser, InteractionEvent
from core.engine import Engine
from core.llm import ChatMessage, ScriptedProvider

REPO = Path(__file__).resolve().parents[3]


def discord_config(fake: FakeDiscord, **overrides: object) -> DiscordConfig:
    values: dict[str, object] = {
        "token": fake.token,
        "api_base": fake.api_base,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout_s": 0.05,
        "ready_timeout_s": 10.0,
    }
    values.update(overrides)
    return DiscordConfig.model_validate(values)


def settings_for(tmp_path: Path, fake: FakeDiscord, **discord: object) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": tmp_path,
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "memory": {"extraction": False},
            "discord": discord_config(fake, **discord),
        }
    )


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


@asynccontextmanager
async def running_engine(
    settings: Settings, llm: ScriptedProvider
) -> AsyncIterator[tuple[Engine, DiscordAdapter]]:
    engine = build_engine(settings, llm=llm)
    adapters = build_adapters(settings, engine)
    assert [type(a) for a in adapters] == [DiscordAdapter]
    adapter = adapters[0]
    assert isinstance(adapter, DiscordAdapter)
    await engine.start()
    await adapter.start()
    try:
        yield engine, adapter
    finally:
        await adapter.stop()
        await engine.close()


async def test_dm_round_trip_through_the_engine_strips_reasoning(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    alice = fake.add_user("alice")
    llm = ScriptedProvider(["<think>the user greets me</think>Olá, Alice! Tudo bem?"])
    async with running_engine(settings_for(tmp_path, fake), llm):
        await fake.user_message(alice, "oi, tudo bem?")
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(lambda: fake.bot_messages_in(channel))
        await asyncio.sleep(0.2)
    assert [m["content"] for m in fake.bot_messages_in(channel)] == ["Olá, Alice! Tudo bem?"]
    assert last_user_text(llm.prompts[0]).endswith("oi, tudo bem?")
    # Typing was shown before the answer was posted.
    calls = [p for (m, p, _) in fake.requests if m == "POST" and f"/channels/{channel}/" in p]
    assert calls[0].endswith("/typing") and calls[-1].endswith("/messages")
    assert len(llm.prompts) == 1  # the bot's own echoed message was not answered


async def test_what_was_said_in_one_server_is_not_used_in_another(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    bob = fake.add_user("bob")
    club = fake.add_guild("Club")
    other = fake.add_guild("Other")
    club.add_member(bob)
    other.add_member(bob)
    llm = ScriptedProvider(lambda messages: "ok")
    async with running_engine(settings_for(tmp_path, fake), llm):
        await fake.user_message(bob, "my locker code is 4817", guild=club, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(club.first_channel_id))
        await fake.user_message(bob, "what is my locker code?", guild=other, mention_bot=True)
        await fake.wait_for(lambda: fake.bot_messages_in(other.first_channel_id))
        await fake.user_message(bob, "and here?", guild=club, mention_bot=True)
        await fake.wait_for(lambda: len(fake.bot_messages_in(club.first_channel_id)) == 2)
        # Chatter that does not address the bot is neither answered nor stored.
        await fake.user_message(bob, "unrelated chatter 5555", guild=club)
        await asyncio.sleep(0.2)
    prompts = ["\n".join(m.content for m in p) for p in llm.prompts]
    assert len(prompts) == 3
    assert "4817" not in prompts[1]  # another server: not recalled
    assert "4817" in prompts[2]  # the same server: recalled
    assert not any("5555" in p for p in prompts)


@pytest.mark.parametrize("workers", [1, 2])
async def test_akira_bot_run_serves_the_configured_discord_api(
    tmp_path: Path, fake: FakeDiscord, workers: int
) -> None:
    """With ``workers`` 2 the slash commands synced are the ones the worker processes
    reported, and the reply comes from a worker through the parent's client."""
    alice = fake.add_user("alice")
    env = cli_env(
        path=[REPO],
        **fake.settings_env(),
        AKIRA_DISCORD__ADMIN_IDS=f"[{alice.id}]",
        AKIRA_DATA_DIR=str(tmp_path / "data"),
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_BOT__WORKERS=str(workers),
    )
    proc = await start_cli("run", env=env, cwd=tmp_path)
    try:
        await fake.wait_for(lambda: fake.identifies and fake.command_syncs, within=30)
        await fake.user_message(alice, "hello from discord")
        channel = fake.dm_channel_id(alice)
        await fake.wait_for(lambda: fake.bot_messages_in(channel), within=15)
    finally:
        status, err = await stop_cli(proc, timeout=30)
    assert status == 0, err[-2000:]
    assert "hello from discord" in fake.bot_messages_in(channel)[0]["content"]
    assert fake.token not in err
    assert {c["name"] for c in fake.commands} >= {"mood", "forgetme", "verify"}


async def test_engine_commands_are_the_synced_slash_commands(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    async with running_engine(settings_for(tmp_path, fake), ScriptedProvider()) as (engine, _):
        specs = {s.name: s for s in engine.commands}
        synced = {c["name"]: c for c in fake.commands}
    assert fake.command_syncs == 1
    assert set(synced) == set(specs)
    for name, spec in specs.items():
        expected = "32" if spec.admin_only else None  # Manage Server
        assert synced[name]["default_member_permissions"] == expected
        assert bool(synced[name]["options"]) == bool(spec.args_hint)


async def test_slash_commands_through_the_engine(tmp_path: Path, fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    mod = fake.add_user("mod")
    guild = fake.add_guild("Club")
    guild.add_member(alice)
    guild.add_member(bob)
    guild.add_member(mod, manage_guild=True)

    async def run(
        user: FakeUser, name: str, value: str | None = None, locale: str = "en-US"
    ) -> list[InteractionEvent]:
        iid = await fake.slash(user, name, value, guild=guild, locale=locale)
        await fake.wait_for(lambda: fake.events_for(iid))
        await asyncio.sleep(0.05)
        return fake.events_for(iid)

    async with running_engine(settings_for(tmp_path, fake), ScriptedProvider()):
        (remembered,) = await run(alice, "remember", "pet: a cat named Miso")
        (memories,) = await run(alice, "memories")
        (exported,) = await run(alice, "export", locale="pt-BR")
        (mood,) = await run(alice, "mood")
        (refused,) = await run(bob, "stats")
        (stats,) = await run(mod, "stats")

    assert remembered.kind == "callback" and remembered.ephemeral is False
    # Private answers are ephemeral.
    assert memories.ephemeral is True and "Miso" in (memories.content or "")
    assert mood.ephemeral is True
    assert exported.ephemeral is True
    assert (exported.content or "").startswith("Aqui está")  # the caller's pt-BR locale
    ((filename, data),) = exported.files
    assert filename.endswith(".json")
    assert "Miso" in json.dumps(json.loads(data), ensure_ascii=False)
    # Admin command: refused to a member without Manage Server, answered to a moderator.
    assert refused.ephemeral is True
    assert refused.content == "This command is for admins only."
    assert stats.ephemeral is True and stats.content != refused.content
    # Nothing private was posted in the channel.
    assert all(m.get("_interaction_id") for m in fake.bot_messages)


async def test_memories_subcommands_as_slash_commands(tmp_path: Path, fake: FakeDiscord) -> None:
    """/remember with a priority and an expiry, then /memories expiring, a search and
    /memories confirm <short id> as Discord slash commands, through discord.py."""
    alice = fake.add_user("alice")
    guild = fake.add_guild("Club")
    guild.add_member(alice)
    owner = f"discord:{alice.id}"

    async def run(name: str, value: str, locale: str = "en-US") -> InteractionEvent:
        iid = await fake.slash(alice, name, value, guild=guild, locale=locale)
        await fake.wait_for(lambda: fake.events_for(iid))
        await asyncio.sleep(0.05)
        (event,) = fake.events_for(iid)
        return event

    async with running_engine(settings_for(tmp_path, fake), ScriptedProvider()) as (engine, _):
        memories = engine.services.structured_memories
        assert memories is not None
        await engine.storage.users.ensure(owner)
        await memories.propose(owner, "fact", "pet", "Has a dog")
        saved = await run("remember", "!alta viagem: Porto por 3 dias", locale="pt-BR")
        soon = await run("memories", "expiring")
        found = await run("memories", "dog")
        short = (found.content or "").split("id: ")[1].split()[0]
        confirmed = await run("memories", f"confirm {short}")
        stored = {m.key: m for m in await memories.all(owner)}

    assert saved.ephemeral is False and "Prioridade: alta." in (saved.content or "")
    assert soon.ephemeral is True and "Porto (until " in (soon.content or "")
    assert found.ephemeral is True and "[unverified] pet" in (found.content or "")
    assert confirmed.ephemeral is True
    assert confirmed.content == "Confirmed: fact/pet is now verified."
    assert stored["viagem"].priority.value == "high" and stored["viagem"].expires_at is not None
    assert (stored["pet"].verified, stored["pet"].source.value) == (True, "agent")
