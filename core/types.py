"""Platform-free value types that flow through the engine.

Adapters turn a platform event into an :class:`IncomingMessage` and deliver each
:class:`Reply` through a :class:`Responder`. Nothing here knows about Discord or Telegram.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol


class ChatKind(StrEnum):
    DM = "dm"
    GROUP = "group"


def user_key(platform: str, user_id: str | int) -> str:
    """The owner key used everywhere in storage: ``platform:id`` (e.g. ``telegram:42``)."""
    return f"{platform}:{user_id}"


def parse_user_key(value: str) -> tuple[str, str]:
    """Split ``platform:id``; raises ValueError with a readable message otherwise."""
    platform, sep, ident = value.partition(":")
    if not sep or not platform or not ident:
        raise ValueError(f"expected USER as platform:id (e.g. telegram:42), got {value!r}")
    return platform, ident


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message was said. ``scope`` groups chats for memory privacy (a Discord
    server id, a Telegram group id); DMs share the scope ``dm``."""

    platform: str
    id: str
    kind: ChatKind = ChatKind.DM
    scope: str | None = None
    title: str | None = None

    @property
    def privacy_scope(self) -> str:
        if self.kind is ChatKind.DM:
            return "dm"
        return self.scope or f"chat:{self.id}"


@dataclass(frozen=True, slots=True)
class UserRef:
    platform: str
    id: str
    display_name: str | None = None
    is_bot: bool = False
    is_admin: bool = False  # set by the adapter from configured ids / platform permissions

    @property
    def key(self) -> str:
        return user_key(self.platform, self.id)


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed chat command: ``/remember key: value`` -> name ``remember``, args ``key: value``."""

    name: str
    args: str = ""

    @classmethod
    def parse(cls, text: str, bot_username: str | None = None) -> Command | None:
        stripped = text.strip()
        if not stripped.startswith("/") or len(stripped) < 2:
            return None
        head, _, rest = stripped[1:].partition(" ")
        name, _, target = head.partition("@")
        if target and bot_username and target.lower() != bot_username.lower():
            return None  # addressed to another bot in the group
        if not name or not all(c.isalnum() or c == "_" for c in name):
            return None
        return cls(name=name.lower(), args=rest.strip())


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    platform: str
    chat: ChatRef
    author: UserRef
    text: str
    message_id: str
    sent_at: datetime
    reply_to_id: str | None = None
    addressed: bool = True  # mentioned, replied to, DM or command: the bot should answer
    command: Command | None = None
    locale: str | None = None  # platform language hint (Telegram language_code...)

    def __post_init__(self) -> None:
        if self.sent_at.tzinfo is None:
            object.__setattr__(self, "sent_at", self.sent_at.replace(tzinfo=UTC))

    @property
    def owner(self) -> str:
        return self.author.key


@dataclass(frozen=True, slots=True)
class IncomingReaction:
    """A person changed their reactions to a message (Telegram message reactions, Discord
    reactions): ``added`` and ``removed`` are the emoji (unicode; a platform's custom
    emoji are left out by the adapter). ``message_id`` is the message reacted to, in
    ``chat``; nothing says whose message it is: the engine's hooks look that up."""

    platform: str
    chat: ChatRef
    author: UserRef
    message_id: str
    sent_at: datetime
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.sent_at.tzinfo is None:
            object.__setattr__(self, "sent_at", self.sent_at.replace(tzinfo=UTC))

    @property
    def owner(self) -> str:
        return self.author.key


class ReplyKind(StrEnum):
    ANSWER = "answer"  # the LLM's cleaned reply
    COMMAND = "command"  # a command's output
    NOTICE = "notice"  # rate limit, input too long, busy...
    FALLBACK = "fallback"  # the LLM failed or left nothing visible


@dataclass(frozen=True, slots=True)
class Attachment:
    filename: str
    data: bytes
    mime_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    kind: ReplyKind = ReplyKind.ANSWER
    private: bool = False  # ephemeral on Discord; in a group, the adapter may DM instead
    attachment: Attachment | None = None
    reply_to_id: str | None = None


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """What an adapter needs to register a command (setMyCommands, slash commands)."""

    name: str
    description: str
    description_pt: str = ""
    admin_only: bool = False
    args_hint: str = ""  # e.g. "<key: content>"; empty when the command takes no argument


class Responder(Protocol):
    """How the engine talks back. Each adapter implements it for one incoming message."""

    async def send(self, reply: Reply) -> list[str] | None:
        """Deliver ``reply``; the platform ids of the messages sent for it (a long text
        is several), or None when the responder cannot tell (then no reaction can be
        traced back to this reply)."""
        ...

    def typing(self) -> AbstractAsyncContextManager[None]: ...


@dataclass
class RecordingResponder:
    """A responder that keeps what was sent; used by tests and in-process drivers."""

    sent: list[Reply] = field(default_factory=list)
    typing_count: int = 0

    async def send(self, reply: Reply) -> None:
        self.sent.append(reply)

    def typing(self) -> AbstractAsyncContextManager[None]:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            self.typing_count += 1
            yield

        return _typing()

    @property
    def texts(self) -> Sequence[str]:
        return [r.text for r in self.sent]


def utcnow() -> datetime:
    return datetime.now(UTC)


class MessageHandler(Protocol):
    """The engine as an adapter sees it: hand over a message and a way to answer.

    ``handle`` returns when the message has been fully processed (its replies sent through
    ``responder``). One user's messages are processed in order by the engine itself.
    """

    @property
    def commands(self) -> Sequence[CommandSpec]: ...

    async def handle(self, message: IncomingMessage, responder: Responder) -> None: ...

    async def handle_reaction(self, reaction: IncomingReaction) -> None:
        """A reaction to a message: handed to the hooks plugins registered
        (``api.on_reaction``), in the person's order; nothing is answered."""
        ...
