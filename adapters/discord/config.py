"""Settings for the Discord adapter.

This module must not import ``discord``: the settings layer imports it even when the
``discord`` extra is not installed.

Environment (stable contract): ``AKIRA_DISCORD__TOKEN``, ``AKIRA_DISCORD__API_BASE``,
``AKIRA_DISCORD__GATEWAY_URL``, ``AKIRA_DISCORD__ADMIN_IDS`` (JSON list),
``AKIRA_DISCORD__SHARD_IDS`` (JSON list) with ``AKIRA_DISCORD__SHARD_COUNT``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

ReplyMode = Literal["addressed", "all"]


class DiscordConfig(BaseModel):
    """How the Discord adapter connects and when it answers.

    ``api_base`` / ``gateway_url`` point discord.py at another Discord API (a local fake in
    tests, a proxy in production). discord.py keeps both as class attributes, so one
    process talks to one Discord API.
    """

    # Typos such as AKIRA_DISCORD__GATEWAY must fail loudly instead of being ignored.
    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = None
    # e.g. "http://127.0.0.1:8080/api/v10"; None = the real discord.com API.
    api_base: str | None = None
    # e.g. "ws://127.0.0.1:8080/"; None = the gateway discord.py picks itself.
    gateway_url: str | None = None
    # Platform admins on top of members with Manage Server in a guild.
    admin_ids: list[int] = Field(default_factory=list)
    # Use discord.AutoShardedClient (large bots: several gateway shards in one process).
    sharded: bool = False
    # Shards across processes (each its own `akira-bot run`, all on one PostgreSQL
    # database): this process runs the gateway shards ``shard_ids`` of ``shard_count``
    # (AKIRA_DISCORD__SHARD_IDS='[0, 1]', AKIRA_DISCORD__SHARD_COUNT=4). Either one implies
    # the sharded client; ids without a count are refused.
    shard_ids: list[int] | None = None
    shard_count: int | None = Field(default=None, ge=1)
    # In servers: answer only when mentioned/replied to ("addressed"), or every message.
    reply_in_guilds: ReplyMode = "addressed"
    # Per-guild or per-channel override of reply_in_guilds, keyed by the id as a string;
    # a channel id wins over its guild id.
    channel_overrides: dict[str, ReplyMode] = Field(default_factory=dict)
    # False (default): each server is its own memory-privacy scope (ChatRef.scope = guild
    # id) and DMs are "dm", so what a user said elsewhere is not used in a server channel.
    # True: every server shares one scope ("discord"), so memories cross servers (DMs
    # stay private).
    cross_server_memory: bool = False
    # When a slash command or reply takes longer than this, defer and follow up.
    defer_after_s: float = 2.0
    # Also sync the slash commands to these guilds (instant there; global sync can take a
    # while to propagate on the real Discord).
    guild_ids_for_sync: list[int] = Field(default_factory=list)
    # discord.py waits this long after the last GUILD_CREATE before it reports READY.
    guild_ready_timeout_s: float = 2.0
    # How long start() waits for READY before giving up with a clear error.
    ready_timeout_s: float = 30.0
    # Bound for stop(): in-flight replies get this long to finish.
    stop_timeout_s: float = 10.0

    @model_validator(mode="after")
    def _shards_fit(self) -> DiscordConfig:
        if self.shard_ids is not None:
            if self.shard_count is None:
                raise ValueError("AKIRA_DISCORD__SHARD_IDS needs AKIRA_DISCORD__SHARD_COUNT")
            if not self.shard_ids or any(not 0 <= i < self.shard_count for i in self.shard_ids):
                raise ValueError(
                    f"AKIRA_DISCORD__SHARD_IDS must be ids from 0 to {self.shard_count - 1}"
                )
        return self

    @property
    def uses_shards(self) -> bool:
        return self.sharded or self.shard_ids is not None or self.shard_count is not None

    def reply_mode(self, guild_id: int | None, channel_id: int | None) -> ReplyMode:
        if channel_id is not None and str(channel_id) in self.channel_overrides:
            return self.channel_overrides[str(channel_id)]
        if guild_id is not None and str(guild_id) in self.channel_overrides:
            return self.channel_overrides[str(guild_id)]
        return self.reply_in_guilds
