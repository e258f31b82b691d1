"""The Discord adapter: discord.py 2.x client <-> the engine.

- Messages (message-content intent): DMs always answered; in servers when the bot is
  mentioned or replied to, or every message where ``reply_in_guilds``/overrides say "all".
- The engine's commands as slash commands, synced on start; admin commands carry
  ``default_member_permissions`` (Manage Server) and are checked again here on every call.
- Replies split at 2000 characters, typing while generating, no mass pings; slash
  commands are deferred when the engine takes longer than ``defer_after_s``.

``api_base`` / ``gateway_url`` set discord.py's class attributes ``Route.BASE`` and
``DiscordWebSocket.DEFAULT_GATEWAY``: one process talks to one Discord API. In sharded
mode discord.py asks ``GET /gateway/bot`` (under ``api_base``) for the gateway address.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from adapters.base import Adapter, AdapterStartError
from adapters.discord.commands import PortugueseTranslator, build_app_commands
from adapters.discord.config import DiscordConfig
from adapters.discord.convert import (
    interaction_to_incoming,
    message_to_incoming,
    reaction_to_incoming,
)
from adapters.discord.responder import (
    SAFE_MENTIONS,
    InteractionResponder,
    MessageResponder,
    lang_of,
)
from core.i18n import t
from core.types import CommandSpec, IncomingMessage, IncomingReaction, MessageHandler

log = logging.getLogger(__name__)


class DiscordStartError(AdapterStartError):
    """The adapter could not log in or did not receive READY in time."""


class _Hooks:
    """Routes discord.py's callbacks to the adapter (mixed into Client/AutoShardedClient)."""

    akira: DiscordAdapter

    async def setup_hook(self) -> None:
        await self.akira._setup_hook()

    async def on_message(self, message: discord.Message) -> None:
        self.akira._on_message(message)

    # Reactions (feedback on replies): the raw events, so a reply no longer in
    # discord.py's message cache (a restart, an old one) still counts. The reactions
    # intents are in Intents.default().
    async def on_raw_reaction_add(self, event: discord.RawReactionActionEvent) -> None:
        self.akira._on_reaction(event)

    async def on_raw_reaction_remove(self, event: discord.RawReactionActionEvent) -> None:
        self.akira._on_reaction(event)


class _Client(_Hooks, discord.Client):
    pass


class _ShardedClient(_Hooks, discord.AutoShardedClient):
    pass


class DiscordAdapter(Adapter):
    name = "discord"

    def __init__(self, handler: MessageHandler, config: DiscordConfig) -> None:
        super().__init__(handler)
        self.config = config
        self.client: discord.Client | None = None
        self.tree: app_commands.CommandTree[discord.Client] | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._specs: dict[str, CommandSpec] = {}

    # ------------------------------------------------------------------ lifecycle

    def _make_client(self) -> discord.Client:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the developer portal
        options: dict[str, Any] = {
            "intents": intents,
            "allowed_mentions": SAFE_MENTIONS,
            "guild_ready_timeout": self.config.guild_ready_timeout_s,
        }
        if self.config.shard_count is not None:
            # This process's shards of the bot's (the others run in other processes).
            options["shard_count"] = self.config.shard_count
            if self.config.shard_ids is not None:
                options["shard_ids"] = list(self.config.shard_ids)
        client: discord.Client = (
            _ShardedClient(**options) if self.config.uses_shards else _Client(**options)
        )
        client.akira = self  # type: ignore[attr-defined]
        return client

    @property
    def connected(self) -> bool:
        client = self.client
        return client is not None and client.is_ready() and not client.is_closed()

    async def start(self) -> None:
        if self.config.token is None:
            raise DiscordStartError("Discord token missing: set AKIRA_DISCORD__TOKEN")
        # discord.py keeps these as class attributes (one Discord API per process).
        if self.config.api_base:
            discord.http.Route.BASE = self.config.api_base.rstrip("/")
        if self.config.gateway_url:
            DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.config.gateway_url)
        self._stopping = False
        self.client = client = self._make_client()
        self.tree = app_commands.CommandTree(client)
        try:
            # login: GET /users/@me + /oauth2/applications/@me, then setup_hook (sync).
            await client.login(self.config.token.get_secret_value())
        except discord.LoginFailure as exc:
            await client.close()
            raise DiscordStartError("Discord rejected the token (401)") from exc
        except (discord.HTTPException, OSError) as exc:
            await client.close()
            raise DiscordStartError(f"Discord login failed: {type(exc).__name__}: {exc}") from exc
        self._connect_task = asyncio.create_task(client.connect(reconnect=True))
        self._connect_task.add_done_callback(self._connection_ended)
        ready = asyncio.create_task(client.wait_until_ready())
        done, _ = await asyncio.wait(
            {ready, self._connect_task},
            timeout=self.config.ready_timeout_s,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if ready in done:
            log.info("discord: connected as %s (%s)", client.user, client.user and client.user.id)
            return
        ready.cancel()
        error: BaseException | None = None
        if self._connect_task in done:
            error = self._connect_task.exception()
        await self._close_client()
        if error is not None:
            raise DiscordStartError(
                f"Discord gateway connection failed: {type(error).__name__}: {error}"
            ) from error
        raise DiscordStartError(
            f"Discord gateway sent no READY within {self.config.ready_timeout_s:.0f} s"
        )

    def _connection_ended(self, task: asyncio.Task[None]) -> None:
        # discord.py reconnects and resumes by itself; it gives up only on fatal errors
        # (bad token, disallowed intents), which must not pass silently.
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            exc = task.exception()
            log.error("discord: gateway connection ended: %s: %s", type(exc).__name__, exc)

    async def stop(self) -> None:
        self._stopping = True
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=self.config.stop_timeout_s)
            for task in late:
                task.cancel()
        await self._close_client()

    async def _close_client(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self._connect_task is not None:
            try:
                await asyncio.wait_for(self._connect_task, timeout=5)
            except (Exception, asyncio.CancelledError):
                log.debug("discord: connect task ended", exc_info=True)
            self._connect_task = None

    async def _setup_hook(self) -> None:
        """Register the engine's commands as slash commands and sync them (PUT)."""
        assert self.tree is not None
        tree = self.tree
        await tree.set_translator(PortugueseTranslator())
        self._specs = {spec.name: spec for spec in self.handler.commands}
        commands = build_app_commands(list(self._specs.values()), self._on_command)
        if self.config.guild_ids_for_sync:
            # Guild commands appear at once (global ones can take a while to propagate);
            # meant for development: the commands then exist only in these servers.
            for gid in self.config.guild_ids_for_sync:
                guild = discord.Object(id=gid)
                for cmd in commands:
                    tree.add_command(cmd, guild=guild, override=True)
                await tree.sync(guild=guild)
        else:
            for cmd in commands:
                tree.add_command(cmd, override=True)
            await tree.sync()
        log.info("discord: %d slash commands synced", len(commands))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ messages

    def _on_message(self, message: discord.Message) -> None:
        client = self.client
        if self._stopping or client is None or client.user is None:
            return
        if message.author.id == client.user.id:
            return  # our own messages come back through the gateway
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return  # joins, pins, thread starters...
        incoming = message_to_incoming(
            message, bot_id=client.user.id, bot_name=client.user.name, config=self.config
        )
        if not incoming.text or not incoming.addressed:
            return
        self._spawn(self._handle(incoming, MessageResponder(message)))

    def _on_reaction(self, event: discord.RawReactionActionEvent) -> None:
        client = self.client
        if self._stopping or client is None or client.user is None:
            return
        guild = client.get_guild(event.guild_id) if event.guild_id is not None else None
        reaction = reaction_to_incoming(
            event, bot_id=client.user.id, guild=guild, config=self.config
        )
        if reaction is not None:
            self._spawn(self._handle_reaction(reaction))

    async def _handle_reaction(self, reaction: IncomingReaction) -> None:
        try:
            await self.handler.handle_reaction(reaction)
        except Exception:
            log.exception("discord: handling a reaction to %s failed", reaction.message_id)

    async def _handle(self, incoming: IncomingMessage, responder: MessageResponder) -> None:
        try:
            await self.handler.handle(incoming, responder)
        except Exception:
            log.exception("discord: handling message %s failed", incoming.message_id)

    # ------------------------------------------------------------------ slash commands

    async def _on_command(
        self, interaction: discord.Interaction, spec: CommandSpec, args: str
    ) -> None:
        if self._stopping:
            return
        # The work runs in our own task so stop() can wait for it.
        self._spawn(self._run_command(interaction, spec, args))

    async def _run_command(
        self, interaction: discord.Interaction, spec: CommandSpec, args: str
    ) -> None:
        responder = InteractionResponder(interaction)
        incoming = interaction_to_incoming(interaction, spec.name, args, self.config)
        if spec.admin_only and not incoming.author.is_admin:
            # default_member_permissions is only Discord's default (server admins can
            # change who sees the command): check the caller on every call.
            await interaction.response.send_message(
                t("not_allowed", lang_of(interaction)), ephemeral=True
            )
            log.info("discord: refused /%s to %s", spec.name, incoming.author.key)
            return
        if self.config.defer_after_s <= 0:
            await self._defer(responder)
        work = asyncio.create_task(self.handler.handle(incoming, responder))
        ok = True
        done, _ = await asyncio.wait({work}, timeout=max(self.config.defer_after_s, 0))
        if not done:
            await self._defer(responder)
        try:
            await work
        except Exception:
            ok = False
            log.exception("discord: /%s failed", spec.name)
        try:
            await responder.finish(ok)
        except discord.HTTPException:
            log.warning("discord: could not close interaction %s", interaction.id)

    @staticmethod
    async def _defer(responder: InteractionResponder) -> None:
        try:
            await responder.defer()
        except discord.HTTPException:
            log.warning("discord: could not defer interaction %s", responder.interaction.id)
