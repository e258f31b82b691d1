"""Messages as an adapter builds them, and handing one to an engine."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count

from core.types import (
    ChatKind,
    ChatRef,
    Command,
    IncomingMessage,
    MessageHandler,
    RecordingResponder,
    UserRef,
)

_ids = count(1)


def make_message(
    text: str,
    *,
    user: str = "42",
    platform: str = "telegram",
    chat: str | None = None,
    kind: ChatKind = ChatKind.DM,
    scope: str | None = None,
    at: datetime | None = None,
    admin: bool = False,
    bot: bool = False,
    addressed: bool = True,
    message_id: str | None = None,
    reply_to: str | None = None,
    name: str | None = None,
    locale: str | None = None,
) -> IncomingMessage:
    """An incoming message as an adapter would build it (commands parsed from the text)."""
    chat_id = chat or (f"dm-{user}" if kind is ChatKind.DM else "group-1")
    return IncomingMessage(
        platform=platform,
        chat=ChatRef(platform, chat_id, kind, scope=scope),
        author=UserRef(
            platform, user, display_name=name or f"user{user}", is_bot=bot, is_admin=admin
        ),
        text=text,
        message_id=message_id or str(next(_ids)),
        sent_at=at or datetime.now(UTC),
        reply_to_id=reply_to,
        addressed=addressed,
        command=Command.parse(text),
        locale=locale,
    )


async def ask(engine: MessageHandler, message: IncomingMessage) -> RecordingResponder:
    """Hand ``message`` to ``engine`` and return what was sent back, once its reply is
    stored too (a reply is stored off its person's path, see GraphMemory.store_later)."""
    responder = RecordingResponder()
    await engine.handle(message, responder)
    services = getattr(engine, "services", None)  # an Engine; a ShardedEngine has none here
    if services is not None:
        await services.memory.settle()
    return responder
