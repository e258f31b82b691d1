"""Telegram payloads -> core values. The only place that reads PTB's ``Message`` fields.

Kept apart from the adapter so the mapping (chat kinds, addressing, commands, dates) can be
read and tested on its own, and raw platform objects never leak into the core.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from telegram import Chat, Message, MessageEntity, MessageReactionUpdated, ReactionTypeEmoji, User
from telegram.constants import ChatType

from core.types import ChatKind, ChatRef, Command, IncomingMessage, IncomingReaction, UserRef

PLATFORM = "telegram"

_GROUP_TYPES = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is (from getMe): needed to tell whether a message addresses it."""

    id: int
    username: str


def is_private(chat: Chat) -> bool:
    return chat.type == ChatType.PRIVATE


def is_group(chat: Chat) -> bool:
    return chat.type in _GROUP_TYPES


def chat_ref(chat: Chat) -> ChatRef:
    """A private chat is a DM; groups and supergroups are groups scoped by their own id, so
    memories said in one group are not used in another."""
    if is_private(chat):
        return ChatRef(platform=PLATFORM, id=str(chat.id), kind=ChatKind.DM)
    return ChatRef(
        platform=PLATFORM,
        id=str(chat.id),
        kind=ChatKind.GROUP,
        scope=str(chat.id),
        title=chat.title,
    )


def user_ref(user: User, admin_ids: Collection[int]) -> UserRef:
    return UserRef(
        platform=PLATFORM,
        id=str(user.id),
        display_name=user.full_name or user.username,
        is_bot=user.is_bot,
        is_admin=user.id in admin_ids,
    )


def parse_command(message: Message, bot_username: str | None) -> Command | None:
    """A command only when Telegram marked it: a ``bot_command`` entity at offset 0.

    A leading slash without that entity (``/ not a command``, a pasted path) stays plain text;
    ``/cmd@other_bot`` is for another bot and yields ``None``.
    """
    text = message.text
    if not text:
        return None
    if not any(e.type == MessageEntity.BOT_COMMAND and e.offset == 0 for e in message.entities):
        return None
    return Command.parse(text, bot_username)


def _mentions_bot(message: Message, bot: BotIdentity) -> bool:
    # parse_entities/parse_caption_entities handle Telegram's UTF-16 offsets for us.
    types: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    entities = (
        message.parse_entities(types) if message.text else message.parse_caption_entities(types)
    )
    target = f"@{bot.username}".lower()
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == target:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot.id:
            return True
    return False


def is_reply_to_bot(message: Message, bot: BotIdentity) -> bool:
    replied = message.reply_to_message
    return bool(replied and replied.from_user and replied.from_user.id == bot.id)


def is_addressed(
    message: Message, bot: BotIdentity, command: Command | None, group_reply: str
) -> bool:
    """Private chats: always. Groups: per ``group_reply`` — ``all`` every message,
    ``commands`` only commands, ``addressed`` commands, mentions and replies to the bot."""
    if is_private(message.chat):
        return True
    if not is_group(message.chat):
        return False  # channels: the bot does not chat there
    if command is not None:
        return True
    if group_reply == "all":
        return True
    if group_reply == "commands":
        return False
    return _mentions_bot(message, bot) or is_reply_to_bot(message, bot)


def _strip_leading_mention(text: str, username: str) -> str:
    """``@akira_bot, how are you?`` -> ``how are you?``: the handle is addressing, not
    content. Mentions inside a sentence are kept."""
    pattern = re.compile(rf"^\s*@{re.escape(username)}\b[\s,:;.!-]*", re.IGNORECASE)
    stripped = pattern.sub("", text, count=1)
    return stripped if stripped.strip() else text


def to_incoming(
    message: Message,
    *,
    bot: BotIdentity,
    admin_ids: Collection[int],
    group_reply: str = "addressed",
) -> IncomingMessage | None:
    """The core's view of a text message, or ``None`` when there is nothing to hand over
    (no text, no sender, a channel). ``addressed`` says whether the bot should answer."""
    text = message.text
    user = message.from_user
    if text is None or user is None:
        return None
    if not (is_private(message.chat) or is_group(message.chat)):
        return None
    command = parse_command(message, bot.username)
    addressed = is_addressed(message, bot, command, group_reply)
    if command is None and not is_private(message.chat):
        text = _strip_leading_mention(text, bot.username)
    replied = message.reply_to_message
    return IncomingMessage(
        platform=PLATFORM,
        chat=chat_ref(message.chat),
        author=user_ref(user, admin_ids),
        text=text,
        message_id=str(message.message_id),
        # The platform's own timestamp (PTB gives an aware UTC datetime): the core's clock.
        sent_at=message.date,
        reply_to_id=str(replied.message_id) if replied else None,
        addressed=addressed,
        command=command,
        locale=user.language_code,
    )


def _emoji(reactions: Collection[object]) -> list[str]:
    """The plain emoji of a reaction list (custom emoji and paid stars have none)."""
    return [r.emoji for r in reactions if isinstance(r, ReactionTypeEmoji)]


def reaction_to_incoming(
    update: MessageReactionUpdated, *, admin_ids: Collection[int]
) -> IncomingReaction | None:
    """The core's view of a change of one person's reactions, or ``None``: an anonymous
    one (a group's admin reacting as the group), a bot's, a channel's, or a change that
    leaves the plain emoji as they were. Telegram sends the whole old and new lists;
    the core gets what was added and what was removed."""
    user = update.user
    if user is None or user.is_bot:
        return None
    if not (is_private(update.chat) or is_group(update.chat)):
        return None
    old, new = _emoji(update.old_reaction), _emoji(update.new_reaction)
    added = tuple(e for e in new if e not in old)
    removed = tuple(e for e in old if e not in new)
    if not added and not removed:
        return None
    return IncomingReaction(
        platform=PLATFORM,
        chat=chat_ref(update.chat),
        author=user_ref(user, admin_ids),
        message_id=str(update.message_id),
        sent_at=update.date,
        added=added,
        removed=removed,
    )
