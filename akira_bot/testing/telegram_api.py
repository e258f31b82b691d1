"""A fake Telegram Bot API server (aiohttp) for end-to-end tests over loopback.

It speaks the Bot API as python-telegram-bot uses it: every call is a POST to
``/bot<token>/<method>`` with form fields (urlencoded, or multipart when a file is sent);
non-string values arrive JSON-encoded, strings arrive raw. Answers are
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": ..., "description": ...}``.

Implemented: getMe, getUpdates (offset confirms, long poll with timeout, released on stop),
sendMessage, sendChatAction, sendDocument, setMyCommands, getMyCommands, deleteWebhook,
setWebhook, getWebhookInfo, plus injected failures (429 with ``retry_after``). In webhook mode
the fake plays Telegram's part: it POSTs updates to the registered URL with the secret header.
``react`` queues a ``message_reaction`` update; as Telegram, getUpdates delivers it only to
a bot that named it in ``allowed_updates``, and in a group only where the bot is an
administrator (``admin_in``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
from aiohttp import web

# Fields whose values PTB sends as raw strings; every other field is JSON-encoded by PTB
# (ints, bools, lists and objects), see telegram.request.RequestParameter.json_value.
_RAW_STRING_FIELDS = frozenset(
    {
        "text",
        "caption",
        "action",
        "url",
        "secret_token",
        "parse_mode",
        "language_code",
        "ip_address",
        "business_connection_id",
        "message_effect_id",
    }
)
_MENTION = re.compile(r"@[A-Za-z0-9_]{3,}")
# Update types Telegram sends only to a bot that names them in ``allowed_updates``.
_OPT_IN_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})


@dataclass
class ApiCall:
    """One request the bot made: method name, decoded fields, uploaded files."""

    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)
    status: int = 200
    result: Any = None  # what the server answered (a sent Message...), when it succeeded


class ApiError(Exception):
    """A Bot API error answer (``ok: false``) with its HTTP status."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


@dataclass
class _Failure:
    times: int
    status: int
    description: str
    retry_after: int | None


def _decode_field(name: str, value: str) -> Any:
    if name in _RAW_STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # a string chat_id such as "@channel"


def _entities_for(text: str, *, command: bool | None) -> list[dict[str, Any]]:
    """The entities Telegram itself would attach: bot_command for a leading ``/cmd`` and
    mention for ``@username`` tokens. ``command=False`` leaves a leading slash plain text."""
    entities: list[dict[str, Any]] = []
    if command is not False and text.startswith("/"):
        head = text.split(maxsplit=1)[0]
        if len(head) > 1:
            entities.append({"type": "bot_command", "offset": 0, "length": len(head)})
    for m in _MENTION.finditer(text):
        if entities and m.start() < entities[0]["length"] and entities[0]["offset"] == 0:
            continue  # the @bot inside /cmd@bot is part of the command entity
        entities.append({"type": "mention", "offset": m.start(), "length": len(m.group())})
    return entities


class FakeTelegramServer:
    """Start with ``await server.start()``; ``server.base_url`` is what the bot is given as
    ``base_url`` (PTB appends the token). ``await server.stop()`` releases pending long polls."""

    def __init__(
        self,
        token: str = "123456:TEST-token",
        *,
        bot_id: int = 777000111,
        bot_username: str = "akira_test_bot",
        bot_name: str = "AKIRA",
    ) -> None:
        self.token = token
        self.bot: dict[str, Any] = {
            "id": bot_id,
            "is_bot": True,
            "first_name": bot_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.calls: list[ApiCall] = []
        self.webhook: dict[str, Any] = {}
        self.commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # Chats the bot may not write to (a user who never started the bot): 403 Forbidden.
        self.blocked_chats: set[int] = set()
        self.confirmed_offset = 0
        # What the bot last asked getUpdates for (None: never said; Telegram's default).
        self.allowed_updates: list[str] | None = None
        # Groups where the bot is an administrator: only there are reactions sent to it.
        self.admin_in: set[int] = set()
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._failures: dict[str, list[_Failure]] = {}
        self._changed = asyncio.Condition()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._http: aiohttp.ClientSession | None = None

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server: Any = site._server  # an asyncio.Server once started
        self._port = int(server.sockets[0].getsockname()[1])
        self._host = host

    async def stop(self) -> None:
        # Release every pending getUpdates first, or runner.cleanup() waits for them.
        self._closing = True
        async with self._changed:
            self._changed.notify_all()
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegramServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}/bot"

    def settings_env(self) -> dict[str, str]:
        """The ``AKIRA_TELEGRAM__*`` variables that point a bot at this server."""
        return {
            "AKIRA_TELEGRAM__TOKEN": self.token,
            "AKIRA_TELEGRAM__BASE_URL": self.base_url,
            "AKIRA_TELEGRAM__POLL_TIMEOUT": "1",
        }

    @property
    def bot_id(self) -> int:
        bot_id: int = self.bot["id"]
        return bot_id

    @property
    def bot_username(self) -> str:
        return str(self.bot["username"])

    # ---- scripting -------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        times: int = 1,
        status: int = 429,
        retry_after: int | None = 1,
        description: str | None = None,
    ) -> None:
        """The next ``times`` calls of ``method`` fail (default: 429 Too Many Requests)."""
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}"
                if status == 429
                else "Bad Request: injected failure"
            )
        self._failures.setdefault(method, []).append(
            _Failure(times=times, status=status, description=description, retry_after=retry_after)
        )

    def push_update(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue a raw update (``update_id`` is added); returns it."""
        update = {"update_id": next(self._update_ids), **payload}
        self._updates.append(update)
        self._notify_soon()
        return update

    def make_message(
        self,
        text: str | None,
        *,
        user_id: int = 42,
        first_name: str = "Ana",
        username: str | None = None,
        language_code: str | None = "en",
        is_bot: bool = False,
        chat_id: int | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
        date: int | datetime | None = None,
        reply_to: dict[str, Any] | None = None,
        entities: Sequence[dict[str, Any]] | None = None,
        command: bool | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A raw Message as Telegram sends it. ``chat_id`` defaults to the user's private chat.
        Entities are derived like Telegram does unless given explicitly."""
        if isinstance(date, datetime):
            date = int(date.timestamp())
        user: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
        if username:
            user["username"] = username
        if language_code:
            user["language_code"] = language_code
        if chat_id is None:
            chat_id = user_id
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = chat_title or "Test group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()) if date is None else date,
            "chat": chat,
            "from": user,
        }
        if text is not None:
            message["text"] = text
            ents = list(entities) if entities is not None else _entities_for(text, command=command)
            if ents:
                message["entities"] = ents
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        if extra:
            message.update(extra)
        return message

    def react(
        self,
        message_id: int,
        *,
        new: Sequence[str] = (),
        old: Sequence[str] = (),
        user_id: int = 42,
        first_name: str = "Ana",
        language_code: str | None = "en",
        is_bot: bool = False,
        chat_id: int | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
        date: int | datetime | None = None,
        new_custom: Sequence[str] = (),
    ) -> dict[str, Any] | None:
        """A user changes their reactions to a message: queue a ``message_reaction``
        update (Telegram sends the whole lists: ``old`` before, ``new`` after; plain
        emoji, and ``new_custom`` custom emoji ids). As Telegram, nothing is sent for a
        group where the bot is not an administrator (None then); getUpdates leaves the
        update out unless the bot asked for ``message_reaction``."""
        if chat_id is None:
            chat_id = user_id
        if chat_type != "private" and chat_id not in self.admin_in:
            return None
        if isinstance(date, datetime):
            date = int(date.timestamp())
        user: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
        if language_code:
            user["language_code"] = language_code
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = chat_title or "Test group"
        new_reaction: list[dict[str, Any]] = [{"type": "emoji", "emoji": e} for e in new]
        new_reaction += [{"type": "custom_emoji", "custom_emoji_id": c} for c in new_custom]
        reaction = {
            "chat": chat,
            "message_id": message_id,
            "user": user,
            "date": int(time.time()) if date is None else date,
            "old_reaction": [{"type": "emoji", "emoji": e} for e in old],
            "new_reaction": new_reaction,
        }
        return self.push_update({"message_reaction": reaction})

    def send_text(self, text: str | None, **kwargs: Any) -> dict[str, Any]:
        """A user writes to the bot: queue a ``message`` update; returns the message."""
        message = self.make_message(text, **kwargs)
        self.push_update({"message": message})
        return message

    async def deliver_webhook(
        self, update: dict[str, Any], *, secret: str | bool | None = True
    ) -> int:
        """POST an update to the registered webhook like Telegram does; returns the HTTP
        status. ``secret=True`` sends the registered secret, a string sends that one,
        ``None``/``False`` sends no secret header."""
        url = self.webhook.get("url")
        assert url, "no webhook registered"
        if "update_id" not in update:
            update = {"update_id": next(self._update_ids), **update}
        headers = {"Content-Type": "application/json"}
        token = self.webhook.get("secret_token") if secret is True else secret
        if isinstance(token, str) and token:
            headers["X-Telegram-Bot-Api-Secret-Token"] = token
        if self._http is None:
            self._http = aiohttp.ClientSession()
        async with self._http.post(url, data=json.dumps(update), headers=headers) as resp:
            await resp.read()
            return resp.status

    # ---- inspection ------------------------------------------------------------------

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method and c.status == 200]

    def sent_messages(self, chat_id: int | None = None) -> list[ApiCall]:
        return [
            c
            for c in self.calls_to("sendMessage")
            if chat_id is None or c.params["chat_id"] == chat_id
        ]

    def sent_message_ids(self, chat_id: int | None = None) -> list[int]:
        """The ids of the messages the bot sent (what sendMessage answered), in order."""
        return [int(c.result["message_id"]) for c in self.sent_messages(chat_id)]

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        return [str(c.params["text"]) for c in self.sent_messages(chat_id)]

    async def wait_for(
        self, predicate: Callable[[], bool], *, within: float = 10.0, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` holds (re-checked after every API call)."""
        async with asyncio.timeout(within):
            async with self._changed:
                await self._changed.wait_for(predicate)
        assert predicate(), what

    async def wait_for_texts(
        self, count: int, chat_id: int | None = None, *, within: float = 10.0
    ) -> list[str]:
        await self.wait_for(
            lambda: len(self.sent_texts(chat_id)) >= count,
            within=within,
            what=f"{count} sendMessage calls",
        )
        return self.sent_texts(chat_id)

    def pending_updates(self) -> list[dict[str, Any]]:
        return [u for u in self._updates if u["update_id"] >= self.confirmed_offset]

    # ---- the Bot API -----------------------------------------------------------------

    def _notify_soon(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        with contextlib.suppress(RuntimeError):  # no running loop: nobody is waiting
            asyncio.get_running_loop().create_task(notify())

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params: dict[str, Any] = {}
        files: dict[str, tuple[str, bytes]] = {}
        if request.content_type == "application/json":
            params = await request.json()
        else:
            form = await request.post()
            for name, value in form.items():
                if isinstance(value, web.FileField):
                    files[name] = (value.filename, value.file.read())
                else:
                    params[name] = _decode_field(name, str(value))
        call = ApiCall(method=method, params=params, files=files)
        self.calls.append(call)
        try:
            pending = self._failures.get(method)
            if pending:
                failure = pending[0]
                failure.times -= 1
                if failure.times <= 0:
                    pending.pop(0)
                call.status = failure.status
                extra = (
                    {"parameters": {"retry_after": failure.retry_after}}
                    if failure.retry_after is not None
                    else {}
                )
                return _error(failure.status, failure.description, **extra)
            handler = getattr(self, f"_api_{method.lower()}", None)
            if handler is None:
                call.status = 404
                return _error(404, "Not Found: method not found")
            try:
                result = await handler(params, files)
            except ApiError as exc:
                call.status = exc.status
                return _error(exc.status, exc.description)
            call.result = result
            return web.json_response({"ok": True, "result": result})
        finally:
            self._notify_soon()

    async def _api_getme(self, params: dict[str, Any], files: Any) -> Any:
        return self.bot

    async def _api_getupdates(self, params: dict[str, Any], files: Any) -> Any:
        if self.webhook.get("url"):
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if isinstance(params.get("allowed_updates"), list):  # kept until asked otherwise
            self.allowed_updates = [str(kind) for kind in params["allowed_updates"]]
        if offset:
            # Telegram forgets every update below the offset: they are confirmed.
            self.confirmed_offset = max(self.confirmed_offset, offset)
            self._updates = [u for u in self._updates if u["update_id"] >= offset]

        def ready() -> list[dict[str, Any]]:
            return [u for u in self._updates if u["update_id"] >= offset and self._wanted(u)][
                :limit
            ]

        found = ready()
        if not found and timeout > 0 and not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    async with self._changed:
                        await self._changed.wait_for(lambda: bool(ready()) or self._closing)
            found = [] if self._closing else ready()
        return found

    def _wanted(self, update: dict[str, Any]) -> bool:
        """Whether the bot's ``allowed_updates`` let this update through (an empty or
        absent list: every type but the opt-in ones)."""
        kind = next((k for k in update if k != "update_id"), "")
        if self.allowed_updates:
            return kind in self.allowed_updates
        return kind not in _OPT_IN_UPDATES

    def _bot_message(self, params: dict[str, Any], **content: Any) -> dict[str, Any]:
        chat_id = params["chat_id"]
        chat: dict[str, Any] = {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {k: self.bot[k] for k in ("id", "is_bot", "first_name", "username")},
            **content,
        }
        reply = params.get("reply_parameters")
        if isinstance(reply, dict) and "message_id" in reply:
            message["reply_to_message"] = {
                "message_id": reply["message_id"],
                "date": int(time.time()),
                "chat": chat,
            }
        return message

    async def _api_sendmessage(self, params: dict[str, Any], files: Any) -> Any:
        text = params.get("text")
        if not text:
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        if params.get("chat_id") in self.blocked_chats:
            raise ApiError(403, "Forbidden: bot can't initiate conversation with a user")
        return self._bot_message(params, text=text)

    async def _api_sendchataction(self, params: dict[str, Any], files: Any) -> Any:
        return True

    async def _api_senddocument(self, params: dict[str, Any], files: Any) -> Any:
        if "document" not in files:
            raise ApiError(400, "Bad Request: there is no document in the request")
        filename, data = files["document"]
        content: dict[str, Any] = {
            "document": {
                "file_id": f"doc{len(self.calls)}",
                "file_unique_id": f"u{len(self.calls)}",
                "file_name": filename,
                "file_size": len(data),
            }
        }
        if params.get("caption"):
            content["caption"] = params["caption"]
        return self._bot_message(params, **content)

    async def _api_setmycommands(self, params: dict[str, Any], files: Any) -> Any:
        scope = params.get("scope") or {"type": "default"}
        key = (json.dumps(scope, sort_keys=True), params.get("language_code") or "")
        self.commands[key] = list(params.get("commands") or [])
        return True

    async def _api_getmycommands(self, params: dict[str, Any], files: Any) -> Any:
        scope = params.get("scope") or {"type": "default"}
        key = (json.dumps(scope, sort_keys=True), params.get("language_code") or "")
        return self.commands.get(key, [])

    async def _api_deletewebhook(self, params: dict[str, Any], files: Any) -> Any:
        self.webhook = {}
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    async def _api_setwebhook(self, params: dict[str, Any], files: Any) -> Any:
        self.webhook = {"url": params.get("url"), "secret_token": params.get("secret_token")}
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    async def _api_getwebhookinfo(self, params: dict[str, Any], files: Any) -> Any:
        return {
            "url": self.webhook.get("url") or "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    def commands_for(
        self, scope: dict[str, Any] | None = None, language_code: str = ""
    ) -> list[str]:
        key = (json.dumps(scope or {"type": "default"}, sort_keys=True), language_code)
        return [c["command"] for c in self.commands.get(key, [])]


def _error(status: int, description: str, **extra: Any) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": status, "description": description, **extra}, status=status
    )


def texts_of(calls: Iterable[ApiCall]) -> list[str]:
    return [str(c.params.get("text", "")) for c in calls]
