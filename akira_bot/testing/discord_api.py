"""A fake Discord for end-to-end tests: REST API + gateway websocket over loopback (aiohttp).

The unmodified discord.py client talks to it through ``discord.http.Route.BASE`` and
``DiscordWebSocket.DEFAULT_GATEWAY``. It implements the parts of Discord a chat bot uses,
with the real wire formats:

REST (``/api/v10``): ``GET /users/@me``, ``GET /oauth2/applications/@me``,
``GET /gateway`` and ``/gateway/bot``, ``POST /channels/{id}/messages`` (JSON or multipart
with files), ``POST /channels/{id}/typing``, ``POST /users/@me/channels`` (open a DM),
``POST /interactions/{id}/{token}/callback``, ``POST /webhooks/{app}/{token}`` (follow-ups),
``PATCH``/``DELETE /webhooks/{app}/{token}/messages/@original``,
``PUT /applications/{app}/commands`` and ``PUT /applications/{app}/guilds/{guild}/commands``.

Gateway: HELLO, heartbeats and ACKs, IDENTIFY -> READY (+ one GUILD_CREATE per guild of
the shard), dispatches with sequence numbers, RESUME (replays what was missed, then
RESUMED), INVALID_SESSION for an unknown session, ``zlib-stream`` compression when the
client asks for it in the URL query.

Test controls: users/guilds/members, ``user_message`` (MESSAGE_CREATE), ``user_reaction``
(MESSAGE_REACTION_ADD / _REMOVE, only to a session whose intents ask for reactions),
``slash`` (INTERACTION_CREATE), ``rate_limit_next`` (a 429 with a ``Via`` header), ``drop_gateway``
(abort the socket), and everything the bot did is recorded (``bot_messages``,
``interaction_events``, ``typing``, ``requests``...). ``wait_for`` polls a condition.

Pitfalls it reproduces on purpose: JSON answers carry ``Content-Type`` exactly
``application/json`` (discord.py compares the header verbatim); a non-JSON 429 or one without
``Via`` is treated by discord.py as a Cloudflare ban, so the fake always sends both.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

DISCORD_EPOCH_MS = 1420070400000
API_PREFIX = "/api/v10"

# Permission bits (https://discord.com/developers/docs/topics/permissions)
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
READ_MESSAGE_HISTORY = 1 << 16
USE_APPLICATION_COMMANDS = 1 << 31
MANAGE_GUILD = 1 << 5
ADMINISTRATOR = 1 << 3
EVERYONE_PERMISSIONS = (
    VIEW_CHANNEL | SEND_MESSAGES | READ_MESSAGE_HISTORY | USE_APPLICATION_COMMANDS
)
ALL_PERMISSIONS = (1 << 50) - 1

# Gateway intents (https://discord.com/developers/docs/events/gateway#gateway-intents)
GUILD_MESSAGE_REACTIONS = 1 << 10
DIRECT_MESSAGE_REACTIONS = 1 << 13

EPHEMERAL_FLAG = 1 << 6
LOADING_FLAG = 1 << 7

_counter = itertools.count(1)


def snowflake(at: datetime | None = None) -> int:
    ms = int((at.timestamp() if at else time.time()) * 1000)
    return ((ms - DISCORD_EPOCH_MS) << 22) | (next(_counter) & 0x3FFFFF)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def _json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # Not web.json_response: that sends "application/json; charset=utf-8", and discord.py
    # only decodes a body whose content-type is exactly "application/json".
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    return web.Response(body=json.dumps(data).encode(), status=status, headers=hdrs)


@dataclass
class FakeUser:
    id: int
    username: str
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.username,
            "discriminator": "0",
            "global_name": self.username.title(),
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
        }


@dataclass
class FakeGuild:
    id: int
    name: str
    owner_id: int
    channels: dict[int, str] = field(default_factory=dict)  # id -> name
    members: dict[int, list[int]] = field(default_factory=dict)  # user id -> role ids
    roles: dict[int, tuple[str, int]] = field(default_factory=dict)  # id -> (name, perms)
    joined_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def everyone_role_id(self) -> int:
        return self.id  # Discord: the @everyone role has the guild's id

    @property
    def first_channel_id(self) -> int:
        return next(iter(self.channels))

    @property
    def admin_role_id(self) -> int:
        return next(rid for rid, (name, _) in self.roles.items() if name == "Moderators")

    def add_member(self, user: FakeUser, *, manage_guild: bool = False) -> None:
        self.members[user.id] = [self.admin_role_id] if manage_guild else []

    def permissions_of(self, user_id: int) -> int:
        if user_id == self.owner_id:
            return ALL_PERMISSIONS
        perms = self.roles[self.everyone_role_id][1]
        for rid in self.members.get(user_id, []):
            perms |= self.roles[rid][1]
        if perms & ADMINISTRATOR:
            return ALL_PERMISSIONS
        return perms

    def member_payload(self, user: FakeUser, *, with_user: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "roles": [str(r) for r in self.members.get(user.id, [])],
            "nick": None,
            "avatar": None,
            "joined_at": _iso(self.joined_at),
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "pending": False,
            "flags": 0,
        }
        if with_user:
            data["user"] = user.payload()
        return data

    def channel_payload(self, channel_id: int) -> dict[str, Any]:
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(self.id),
            "name": self.channels[channel_id],
            "position": list(self.channels).index(channel_id),
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }


@dataclass
class InteractionEvent:
    """One thing the bot did to answer an interaction."""

    interaction_id: int
    kind: str  # "callback" | "followup" | "edit_original" | "delete_original"
    response_type: int | None  # callback type (4 message, 5 deferred) for callbacks
    content: str | None
    ephemeral: bool
    files: list[tuple[str, bytes]]
    at: float


@dataclass
class _Interaction:
    id: int
    token: str
    channel_id: int
    guild_id: int | None
    original: dict[str, Any] | None = None
    flags: int = 0
    loading: bool = False  # deferred and not yet resolved


@dataclass
class _Session:
    id: str
    shard: tuple[int, int]
    intents: int
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    request: web.Request | None = None
    compressor: Any = None


@dataclass
class _RateLimitRule:
    method: str
    pattern: re.Pattern[str]
    remaining: int
    retry_after: float


class FakeDiscord:
    def __init__(
        self,
        *,
        token: str = "fake-bot-token",
        heartbeat_interval_ms: int = 41250,
        shards: int = 1,
    ) -> None:
        self.token = token
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.shard_count = shards
        self.bot = FakeUser(id=snowflake(), username="akira", bot=True)
        self.application_id = self.bot.id  # Discord: the bot user shares the app's id
        self.owner = FakeUser(id=snowflake(), username="owner")
        self.users: dict[int, FakeUser] = {self.bot.id: self.bot, self.owner.id: self.owner}
        self.guilds: dict[int, FakeGuild] = {}
        self.dm_channels: dict[int, int] = {}  # user id -> channel id
        self.closed_dms: set[int] = set()  # users who do not accept DMs from the bot
        self.messages: dict[int, dict[str, Any]] = {}
        self.bot_messages: list[dict[str, Any]] = []  # in order of creation
        self.interaction_events: list[InteractionEvent] = []
        self.commands: list[dict[str, Any]] = []  # global application commands
        self.guild_commands: dict[int, list[dict[str, Any]]] = {}
        self.command_syncs = 0
        self.typing: list[int] = []  # channel ids
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)
        self.unexpected: list[str] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.connections = 0
        self.gateway_queries: list[dict[str, str]] = []
        self._sessions: dict[str, _Session] = {}
        self._interactions: dict[int, _Interaction] = {}
        self._rate_limits: list[_RateLimitRule] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application(middlewares=[self._middleware])
        p = API_PREFIX
        app.router.add_get("/", self._gateway)
        app.router.add_get(p + "/users/@me", self._get_me)
        app.router.add_get(p + "/oauth2/applications/@me", self._get_application)
        app.router.add_get(p + "/gateway", self._get_gateway)
        app.router.add_get(p + "/gateway/bot", self._get_gateway_bot)
        app.router.add_post(p + "/channels/{channel_id}/messages", self._create_message)
        app.router.add_post(p + "/channels/{channel_id}/typing", self._typing)
        app.router.add_post(p + "/users/@me/channels", self._open_dm)
        app.router.add_post(p + "/interactions/{iid}/{token}/callback", self._interaction_callback)
        app.router.add_post(p + "/webhooks/{app_id}/{token}", self._followup)
        app.router.add_patch(
            p + "/webhooks/{app_id}/{token}/messages/@original", self._edit_original
        )
        app.router.add_delete(
            p + "/webhooks/{app_id}/{token}/messages/@original", self._delete_original
        )
        app.router.add_put(p + "/applications/{app_id}/commands", self._put_commands)
        app.router.add_put(
            p + "/applications/{app_id}/guilds/{guild_id}/commands", self._put_guild_commands
        )
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def close(self) -> None:
        for session in self._sessions.values():
            if session.ws is not None and not session.ws.closed:
                await session.ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def settings_env(self) -> dict[str, str]:
        """The ``AKIRA_DISCORD__*`` variables that point a bot at this server."""
        return {
            "AKIRA_DISCORD__TOKEN": self.token,
            "AKIRA_DISCORD__API_BASE": self.api_base,
            "AKIRA_DISCORD__GATEWAY_URL": self.gateway_url,
            "AKIRA_DISCORD__GUILD_READY_TIMEOUT_S": "0.05",
        }

    # ------------------------------------------------------------------ world setup

    def add_user(self, username: str, *, bot: bool = False) -> FakeUser:
        user = FakeUser(id=snowflake(), username=username, bot=bot)
        self.users[user.id] = user
        return user

    def add_guild(
        self, name: str, *, channels: tuple[str, ...] = ("general",), shard: int | None = None
    ) -> FakeGuild:
        """A server owned by ``self.owner``; ``shard`` picks an id on that shard
        (Discord routes a guild to shard ``(id >> 22) % shard_count``)."""
        gid = snowflake()
        if shard is not None:
            now = datetime.now(UTC)
            for back_ms in range(self.shard_count):
                gid = snowflake(now - timedelta(milliseconds=back_ms))
                if (gid >> 22) % self.shard_count == shard:
                    break
        guild = FakeGuild(id=gid, name=name, owner_id=self.owner.id)
        guild.roles[gid] = ("@everyone", EVERYONE_PERMISSIONS)
        guild.roles[snowflake()] = ("Moderators", MANAGE_GUILD)
        for ch in channels:
            guild.channels[snowflake()] = ch
        guild.members[self.bot.id] = []
        guild.members[self.owner.id] = []
        self.guilds[gid] = guild
        return guild

    def dm_channel_id(self, user: FakeUser) -> int:
        if user.id not in self.dm_channels:
            self.dm_channels[user.id] = snowflake()
        return self.dm_channels[user.id]

    # ------------------------------------------------------------------ test controls

    def rate_limit_next(
        self, method: str, path_regex: str, *, times: int = 1, retry_after: float = 0.2
    ) -> None:
        """Answer the next ``times`` matching requests with a 429 (JSON body, ``Via`` header,
        like Discord's own rate limiter, which discord.py then waits out and retries)."""
        self._rate_limits.append(
            _RateLimitRule(method.upper(), re.compile(path_regex), times, retry_after)
        )

    async def drop_gateway(self) -> None:
        """Abort every gateway socket without a close frame (a network drop)."""
        for session in self._sessions.values():
            if session.request is not None and session.request.transport is not None:
                session.request.transport.abort()
            session.ws = None
            session.request = None

    def forget_sessions(self) -> None:
        """Make every session unresumable (its RESUME gets INVALID_SESSION)."""
        for session in self._sessions.values():
            session.id = "expired-" + session.id
        self._sessions = {s.id: s for s in self._sessions.values()}

    def gateway_connected(self) -> bool:
        return any(s.ws is not None and not s.ws.closed for s in self._sessions.values())

    async def wait_for(self, predicate: Callable[[], Any], within: float = 5.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked whenever the fake changes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError("condition not met in time")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))
            except TimeoutError:
                pass

    def _notify(self) -> None:
        self._changed.set()

    def bot_messages_in(self, channel_id: int) -> list[dict[str, Any]]:
        return [m for m in self.bot_messages if int(m["channel_id"]) == channel_id]

    def events_for(self, interaction_id: int) -> list[InteractionEvent]:
        return [e for e in self.interaction_events if e.interaction_id == interaction_id]

    # ------------------------------------------------------------------ user actions

    async def user_message(
        self,
        author: FakeUser,
        content: str,
        *,
        guild: FakeGuild | None = None,
        channel_id: int | None = None,
        mention_bot: bool = False,
        reply_to: int | None = None,
        at: datetime | None = None,
    ) -> dict[str, Any]:
        """A user posts a message: the fake stores it and dispatches MESSAGE_CREATE."""
        at = at or datetime.now(UTC)
        if guild is not None:
            channel_id = channel_id or guild.first_channel_id
        elif channel_id is None:
            channel_id = self.dm_channel_id(author)
        if mention_bot:
            content = f"<@{self.bot.id}> {content}"
        mentions = [self.bot] if mention_bot else []
        msg = self._message_payload(
            author, content, channel_id=channel_id, guild=guild, at=at, mentions=mentions
        )
        if reply_to is not None:
            ref = self.messages[reply_to]
            msg["type"] = 19
            msg["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": ref["channel_id"],
                **({"guild_id": str(guild.id)} if guild else {}),
            }
            msg["referenced_message"] = ref
            ref_author = self.users[int(ref["author"]["id"])]
            if ref_author not in mentions:
                msg["mentions"].append(self._mention(ref_author, guild))
        self.messages[int(msg["id"])] = msg
        await self.dispatch("MESSAGE_CREATE", msg, guild_id=guild.id if guild else None)
        return msg

    async def user_reaction(
        self,
        user: FakeUser,
        message_id: int,
        emoji: str,
        *,
        remove: bool = False,
        custom_emoji_id: int | None = None,
    ) -> bool:
        """A user adds (or removes) a reaction to a stored message: MESSAGE_REACTION_ADD
        (_REMOVE) as Discord sends it, a ``member`` with an add in a server. Like Discord,
        delivered only when the session asked for the reactions intent of that kind of
        channel; returns whether it was dispatched."""
        message = self.messages[message_id]
        channel_id = int(message["channel_id"])
        guild = self._guild_of_channel(channel_id)
        intent = GUILD_MESSAGE_REACTIONS if guild is not None else DIRECT_MESSAGE_REACTIONS
        shard = self._shard_for(guild.id if guild else None)
        session = next((x for x in self._sessions.values() if x.shard[0] == shard), None)
        if session is None or not session.intents & intent:
            return False
        data: dict[str, Any] = {
            "user_id": str(user.id),
            "channel_id": str(channel_id),
            "message_id": str(message_id),
            "emoji": {"id": str(custom_emoji_id) if custom_emoji_id else None, "name": emoji},
            "burst": False,
            "type": 0,
        }
        if guild is not None:
            data["guild_id"] = str(guild.id)
            if not remove:
                data["member"] = guild.member_payload(user)
        if not remove:
            data["message_author_id"] = message["author"]["id"]
            data["burst_colors"] = []
        event = "MESSAGE_REACTION_REMOVE" if remove else "MESSAGE_REACTION_ADD"
        await self.dispatch(event, data, guild_id=guild.id if guild else None)
        return True

    async def slash(
        self,
        user: FakeUser,
        name: str,
        value: str | None = None,
        *,
        guild: FakeGuild | None = None,
        channel_id: int | None = None,
        locale: str = "en-US",
        option_name: str | None = None,
    ) -> int:
        """A user runs a slash command: dispatch INTERACTION_CREATE; returns its id."""
        command = self._find_command(name, guild)
        options: list[dict[str, Any]] = []
        if value is not None:
            opt_name = option_name or command["options"][0]["name"]
            options.append({"name": opt_name, "type": 3, "value": value})
        iid = snowflake()
        token = "itok-" + secrets.token_hex(16)
        data: dict[str, Any] = {
            "id": str(iid),
            "application_id": str(self.application_id),
            "type": 2,
            "token": token,
            "version": 1,
            "locale": locale,
            "data": {
                "id": command["id"],
                "name": name,
                "type": 1,
                "options": options,
                # Discord names the guild of a guild-registered command here.
                **({"guild_id": command["guild_id"]} if "guild_id" in command else {}),
            },
            "app_permissions": str(EVERYONE_PERMISSIONS),
            "attachment_size_limit": 8 * 1024 * 1024,
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild.id) if guild else "0"},
        }
        if guild is not None:
            channel_id = channel_id or guild.first_channel_id
            member = guild.member_payload(user)
            member["permissions"] = str(guild.permissions_of(user.id))
            data.update(
                guild_id=str(guild.id),
                guild_locale="en-US",
                guild={"id": str(guild.id), "locale": "en-US", "features": []},
                channel_id=str(channel_id),
                channel=guild.channel_payload(channel_id),
                member=member,
                context=0,
            )
        else:
            channel_id = channel_id or self.dm_channel_id(user)
            data.update(
                channel_id=str(channel_id),
                channel={"id": str(channel_id), "type": 1, "recipients": [user.payload()]},
                user=user.payload(),
                context=1,
            )
        self._interactions[iid] = _Interaction(
            id=iid, token=token, channel_id=channel_id, guild_id=guild.id if guild else None
        )
        await self.dispatch("INTERACTION_CREATE", data, guild_id=guild.id if guild else None)
        return iid

    def _find_command(self, name: str, guild: FakeGuild | None) -> dict[str, Any]:
        pool = list(self.commands)
        if guild is not None:
            pool = self.guild_commands.get(guild.id, []) + pool
        for cmd in pool:
            if cmd["name"] == name:
                return cmd
        raise KeyError(f"command /{name} was never registered")

    # ------------------------------------------------------------------ payload helpers

    def _mention(self, user: FakeUser, guild: FakeGuild | None) -> dict[str, Any]:
        data = user.payload()
        if guild is not None and user.id in guild.members:
            data["member"] = guild.member_payload(user, with_user=False)
        return data

    def _message_payload(
        self,
        author: FakeUser,
        content: str,
        *,
        channel_id: int,
        guild: FakeGuild | None,
        at: datetime,
        mentions: list[FakeUser],
        flags: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "id": str(snowflake(at)),
            "channel_id": str(channel_id),
            "author": author.payload(),
            "content": content,
            "timestamp": _iso(at),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [self._mention(u, guild) for u in mentions],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": flags,
        }
        if guild is not None:
            msg["guild_id"] = str(guild.id)
            msg["member"] = guild.member_payload(author, with_user=False)
        if extra:
            msg.update(extra)
        return msg

    def _guild_of_channel(self, channel_id: int) -> FakeGuild | None:
        for guild in self.guilds.values():
            if channel_id in guild.channels:
                return guild
        return None

    def _guild_payload(self, guild: FakeGuild) -> dict[str, Any]:
        members = [guild.member_payload(self.users[uid]) for uid in guild.members]
        return {
            "id": str(guild.id),
            "name": guild.name,
            "icon": None,
            "owner_id": str(guild.owner_id),
            "unavailable": False,
            "large": False,
            "member_count": len(members),  # must match the members sent (chunking)
            "joined_at": _iso(guild.joined_at),
            "preferred_locale": "en-US",
            "features": [],
            "roles": [
                {
                    "id": str(rid),
                    "name": name,
                    "permissions": str(perms),
                    "position": 0 if rid == guild.id else 1,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
                for rid, (name, perms) in guild.roles.items()
            ],
            "channels": [guild.channel_payload(cid) for cid in guild.channels],
            "members": members,
            "emojis": [],
            "stickers": [],
            "threads": [],
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    # ------------------------------------------------------------------ REST

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if path == "/":
            return await handler(request)
        if request.headers.get("Authorization") != f"Bot {self.token}" and not (
            path.startswith(API_PREFIX + "/webhooks/")
            or path.startswith(API_PREFIX + "/interactions/")
        ):
            resp: web.StreamResponse = _json_response(
                {"message": "401: Unauthorized", "code": 0}, status=401
            )
            self.requests.append((request.method, path, 401))
            return resp
        for rule in self._rate_limits:
            if rule.remaining > 0 and rule.method == request.method and rule.pattern.search(path):
                rule.remaining -= 1
                await request.read()
                self.requests.append((request.method, path, 429))
                self._notify()
                return _json_response(
                    {
                        "message": "You are being rate limited.",
                        "retry_after": rule.retry_after,
                        "global": False,
                    },
                    status=429,
                    headers={
                        "Via": "1.1 google",
                        "Retry-After": str(max(1, round(rule.retry_after))),
                        "X-RateLimit-Limit": "5",
                        "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset-After": str(rule.retry_after),
                        "X-RateLimit-Bucket": "fake-bucket",
                        "X-RateLimit-Scope": "user",
                    },
                )
        try:
            resp = await handler(request)
        except web.HTTPNotFound:
            self.unexpected.append(f"{request.method} {path}")
            resp = _json_response({"message": "404: Not Found", "code": 0}, status=404)
        self.requests.append((request.method, path, resp.status))
        self._notify()
        return resp

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json_response(self.bot.payload())

    async def _get_application(self, request: web.Request) -> web.Response:
        return _json_response(
            {
                "id": str(self.application_id),
                "name": "Akira",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self.owner.payload(),
                "verify_key": "0" * 64,
                "flags": 1 << 19,  # GATEWAY_MESSAGE_CONTENT_LIMITED
                "team": None,
            }
        )

    async def _get_gateway(self, request: web.Request) -> web.Response:
        return _json_response({"url": self.gateway_url})

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        return _json_response(
            {
                "url": self.gateway_url,
                "shards": self.shard_count,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 0,
                    "max_concurrency": 1,
                },
            }
        )

    async def _read_message_body(
        self, request: web.Request
    ) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
        """JSON body, or multipart with ``payload_json`` and ``files[n]`` parts."""
        if request.content_type == "multipart/form-data":
            payload: dict[str, Any] = {}
            files: list[tuple[str, bytes]] = []
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue  # discord.py sends a flat form, no nested multiparts
                if part.name == "payload_json":
                    payload = json.loads(await part.text())
                else:
                    files.append((part.filename or "", bytes(await part.read())))
            return payload, files
        body = await request.read()
        return (json.loads(body) if body else {}), []

    def _bot_message(
        self,
        payload: dict[str, Any],
        files: list[tuple[str, bytes]],
        *,
        channel_id: int,
        flags: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        guild = self._guild_of_channel(channel_id)
        msg = self._message_payload(
            self.bot,
            payload.get("content") or "",
            channel_id=channel_id,
            guild=guild,
            at=datetime.now(UTC),
            mentions=[],
            flags=flags | int(payload.get("flags") or 0),
            extra=extra,
        )
        msg["attachments"] = [
            {
                "id": str(snowflake()),
                "filename": name,
                "size": len(data),
                "url": f"{self.api_base}/attachments/{name}",
                "proxy_url": f"{self.api_base}/attachments/{name}",
            }
            for name, data in files
        ]
        # What the bot asked for, kept for assertions (not part of Discord's payload).
        msg["_files"] = files
        msg["_allowed_mentions"] = payload.get("allowed_mentions")
        msg["_message_reference"] = payload.get("message_reference")
        self.messages[int(msg["id"])] = {k: v for k, v in msg.items() if not k.startswith("_")}
        self.bot_messages.append(msg)
        return msg

    async def _create_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        payload, files = await self._read_message_body(request)
        if not payload.get("content") and not files:
            return _json_response({"message": "Cannot send an empty message", "code": 50006}, 400)
        if len(payload.get("content") or "") > 2000:
            return _json_response(
                {"message": "Invalid Form Body", "code": 50035, "errors": {"content": "too long"}},
                400,
            )
        if any(self.dm_channels.get(uid) == channel_id for uid in self.closed_dms):
            return _json_response(
                {"message": "Cannot send messages to this user", "code": 50007}, 403
            )
        msg = self._bot_message(payload, files, channel_id=channel_id)
        public = {k: v for k, v in msg.items() if not k.startswith("_")}
        guild = self._guild_of_channel(channel_id)
        # Discord echoes the bot's own messages on the gateway too.
        await self.dispatch("MESSAGE_CREATE", public, guild_id=guild.id if guild else None)
        return _json_response(public)

    async def _typing(self, request: web.Request) -> web.Response:
        self.typing.append(int(request.match_info["channel_id"]))
        return web.Response(status=204)

    async def _open_dm(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = self.users[int(body["recipient_id"])]
        cid = self.dm_channel_id(user)
        return _json_response(
            {"id": str(cid), "type": 1, "last_message_id": None, "recipients": [user.payload()]}
        )

    def _interaction_by_token(self, token: str) -> _Interaction | None:
        for inter in self._interactions.values():
            if inter.token == token:
                return inter
        return None

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        iid = int(request.match_info["iid"])
        inter = self._interactions.get(iid)
        if inter is None or inter.token != request.match_info["token"]:
            return _json_response({"message": "Unknown interaction", "code": 10062}, 404)
        payload, files = await self._read_message_body(request)
        if inter.original is not None:
            return _json_response(
                {"message": "Interaction has already been acknowledged.", "code": 40060}, 400
            )
        rtype = int(payload["type"])
        data = payload.get("data") or {}
        flags = int(data.get("flags") or 0)
        if rtype == 5:
            flags |= LOADING_FLAG
        msg = self._bot_message(
            data,
            files,
            channel_id=inter.channel_id,
            flags=flags,
        )
        msg["_interaction_id"] = iid
        inter.original = msg
        inter.flags = flags
        inter.loading = rtype == 5
        self.interaction_events.append(
            InteractionEvent(
                iid,
                "callback",
                rtype,
                data.get("content"),
                bool(flags & EPHEMERAL_FLAG),
                files,
                time.monotonic(),
            )
        )
        public = {k: v for k, v in msg.items() if not k.startswith("_")}
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        return _json_response(
            {
                "interaction": {
                    "id": str(iid),
                    "type": 2,
                    "response_message_id": public["id"],
                    "response_message_loading": rtype == 5,
                    "response_message_ephemeral": bool(flags & EPHEMERAL_FLAG),
                },
                "resource": {"type": rtype, "message": public},
            }
        )

    async def _followup(self, request: web.Request) -> web.Response:
        inter = self._interaction_by_token(request.match_info["token"])
        if inter is None or inter.original is None:
            return _json_response({"message": "Unknown Webhook", "code": 10015}, 404)
        payload, files = await self._read_message_body(request)
        flags = int(payload.get("flags") or 0)
        if inter.loading:
            # Discord: a follow-up while the deferred response is still loading resolves
            # it and keeps the defer's visibility, whatever flags it asks for.
            inter.loading = False
            flags = inter.flags & EPHEMERAL_FLAG
        msg = self._bot_message(payload, files, channel_id=inter.channel_id, flags=flags)
        msg["_interaction_id"] = inter.id
        self.interaction_events.append(
            InteractionEvent(
                inter.id,
                "followup",
                None,
                payload.get("content"),
                bool(flags & EPHEMERAL_FLAG),
                files,
                time.monotonic(),
            )
        )
        return _json_response({k: v for k, v in msg.items() if not k.startswith("_")})

    async def _edit_original(self, request: web.Request) -> web.Response:
        inter = self._interaction_by_token(request.match_info["token"])
        if inter is None or inter.original is None:
            return _json_response({"message": "Unknown Message", "code": 10008}, 404)
        payload, files = await self._read_message_body(request)
        original = inter.original
        if "content" in payload:
            original["content"] = payload["content"] or ""
        original["flags"] = int(original["flags"]) & ~LOADING_FLAG
        inter.loading = False
        if files:
            original["_files"] = files
        self.interaction_events.append(
            InteractionEvent(
                inter.id,
                "edit_original",
                None,
                payload.get("content"),
                bool(inter.flags & EPHEMERAL_FLAG),
                files,
                time.monotonic(),
            )
        )
        return _json_response({k: v for k, v in original.items() if not k.startswith("_")})

    async def _delete_original(self, request: web.Request) -> web.Response:
        inter = self._interaction_by_token(request.match_info["token"])
        if inter is None or inter.original is None:
            return _json_response({"message": "Unknown Message", "code": 10008}, 404)
        original = inter.original
        original["_deleted"] = True
        self.interaction_events.append(
            InteractionEvent(
                inter.id,
                "delete_original",
                None,
                None,
                bool(inter.flags & EPHEMERAL_FLAG),
                [],
                time.monotonic(),
            )
        )
        return web.Response(status=204)

    def _stored_commands(
        self, body: list[dict[str, Any]], guild_id: int | None
    ) -> list[dict[str, Any]]:
        stored = []
        for cmd in body:
            data = dict(cmd)
            data.update(
                id=str(snowflake()),
                application_id=str(self.application_id),
                version=str(snowflake()),
                type=int(cmd.get("type", 1)),
            )
            data.setdefault("options", [])
            # Discord answers with the permission bitfield as a string.
            perms = data.get("default_member_permissions")
            data["default_member_permissions"] = None if perms is None else str(perms)
            if guild_id is not None:
                data["guild_id"] = str(guild_id)
            stored.append(data)
        return stored

    async def _put_commands(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.commands = self._stored_commands(body, None)
        self.command_syncs += 1
        return _json_response(self.commands)

    async def _put_guild_commands(self, request: web.Request) -> web.Response:
        gid = int(request.match_info["guild_id"])
        body = await request.json()
        self.guild_commands[gid] = self._stored_commands(body, gid)
        self.command_syncs += 1
        return _json_response(self.guild_commands[gid])

    # ------------------------------------------------------------------ gateway

    def _shard_for(self, guild_id: int | None) -> int:
        if guild_id is None:
            return 0  # DMs arrive on shard 0
        return (guild_id >> 22) % self.shard_count

    async def dispatch(
        self, event: str, data: dict[str, Any], *, guild_id: int | None = None
    ) -> None:
        """Send a DISPATCH to the session of the right shard, or log it for a later RESUME
        when that shard's socket is down."""
        shard_id = self._shard_for(guild_id)
        session = next((s for s in self._sessions.values() if s.shard[0] == shard_id), None)
        if session is None:
            return  # nobody connected yet: Discord would not deliver it either
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(frame)
        if session.ws is not None and not session.ws.closed:
            await self._send(session, frame)

    async def _send(self, session: _Session, frame: dict[str, Any]) -> None:
        assert session.ws is not None
        raw = json.dumps(frame)
        try:
            if session.compressor is not None:
                data = session.compressor.compress(raw.encode()) + session.compressor.flush(
                    zlib.Z_SYNC_FLUSH
                )
                await session.ws.send_bytes(data)
            else:
                await session.ws.send_str(raw)
        except (ConnectionResetError, RuntimeError):
            session.ws = None  # dropped: the frame stays in the log for RESUME

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        self.connections += 1
        self.gateway_queries.append(dict(request.query))
        compress = request.query.get("compress")
        # Only zlib-stream is implemented; for anything else (zstd-stream) the fake sends
        # plain text frames, which discord.py accepts as well.
        compressor = zlib.compressobj() if compress == "zlib-stream" else None
        conn = _Session(
            id="", shard=(0, 1), intents=0, ws=ws, request=request, compressor=compressor
        )
        await self._send(
            conn,
            {
                "op": 10,
                "s": None,
                "t": None,
                "d": {"heartbeat_interval": self.heartbeat_interval_ms},
            },
        )
        session: _Session | None = None
        self._notify()
        async for msg in ws:
            if msg.type is not WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            op = payload.get("op")
            if op == 1:
                self.heartbeats += 1
                await self._send(session or conn, {"op": 11, "s": None, "t": None, "d": None})
            elif op == 2:
                session = await self._identify(payload["d"], conn)
                if session is None:
                    await ws.close(code=4004, message=b"Authentication failed.")
            elif op == 6:
                session = await self._resume(payload["d"], conn)
            self._notify()
        if session is not None and session.ws is ws:
            session.ws = None
            session.request = None
        self._notify()
        return ws

    async def _identify(self, d: dict[str, Any], conn: _Session) -> _Session | None:
        self.identifies.append({k: v for k, v in d.items() if k != "token"})
        if d.get("token") != self.token:
            return None
        shard = tuple(d.get("shard") or (0, 1))
        session = _Session(
            id=secrets.token_hex(16),
            shard=(int(shard[0]), int(shard[1])),
            intents=int(d.get("intents", 0)),
            ws=conn.ws,
            request=conn.request,
            compressor=conn.compressor,
        )
        # A new IDENTIFY for a shard replaces its old session.
        for sid, old in list(self._sessions.items()):
            if old.shard[0] == session.shard[0]:
                del self._sessions[sid]
        self._sessions[session.id] = session
        my_guilds = [g for g in self.guilds.values() if self._shard_for(g.id) == session.shard[0]]
        ready: dict[str, Any] = {
            "v": 10,
            "user": self.bot.payload(),
            "guilds": [{"id": str(g.id), "unavailable": True} for g in my_guilds],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(self.application_id), "flags": 1 << 19},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "_trace": ["fake-discord"],
        }
        if d.get("shard"):
            ready["shard"] = list(session.shard)
        await self._dispatch_to(session, "READY", ready)
        for guild in my_guilds:
            await self._dispatch_to(session, "GUILD_CREATE", self._guild_payload(guild))
        return session

    async def _dispatch_to(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(frame)
        await self._send(session, frame)

    async def _resume(self, d: dict[str, Any], conn: _Session) -> _Session | None:
        self.resumes.append({k: v for k, v in d.items() if k != "token"})
        session = self._sessions.get(d.get("session_id") or "")
        if session is None or d.get("token") != self.token:
            await self._send(conn, {"op": 9, "s": None, "t": None, "d": False})
            return None
        session.ws = conn.ws
        session.request = conn.request
        session.compressor = conn.compressor
        last = int(d.get("seq") or 0)
        for frame in session.log:
            if frame["s"] > last:
                await self._send(session, frame)
        await self._dispatch_to(session, "RESUMED", {"_trace": ["fake-discord"]})
        return session
