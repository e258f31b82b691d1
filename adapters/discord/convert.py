"""Discord objects -> core types. Raw platform payloads stop here.

Memory privacy: ``ChatRef.scope`` is the guild id for server channels, so the core keeps
what was said in one server out of another server's replies; DMs are ``kind=dm`` (scope
``dm``). With ``cross_server_memory`` every server shares the scope ``discord``.
"""

from __future__ import annotations

import re

import discord

from adapters.discord.config import DiscordConfig
from core.types import ChatKind, ChatRef, Command, IncomingMessage, IncomingReaction, UserRef

PLATFORM = "discord"
SHARED_SERVER_SCOPE = "discord"


def chat_ref(
    channel: discord.abc.Messageable | discord.abc.Snowflake | None,
    guild: discord.Guild | None,
    channel_id: int | None,
    config: DiscordConfig,
) -> ChatRef:
    cid = str(channel_id if channel_id is not None else getattr(channel, "id", "0"))
    if guild is None:
        return ChatRef(platform=PLATFORM, id=cid, kind=ChatKind.DM)
    scope = SHARED_SERVER_SCOPE if config.cross_server_memory else str(guild.id)
    name = getattr(channel, "name", None)
    title = f"{guild.name} #{name}" if name else guild.name
    return ChatRef(platform=PLATFORM, id=cid, kind=ChatKind.GROUP, scope=scope, title=title)


def user_ref(
    user: discord.User | discord.Member,
    config: DiscordConfig,
    *,
    permissions: discord.Permissions | None = None,
) -> UserRef:
    """``is_admin``: a configured admin id, or, in a server, a member with Manage Server.

    ``permissions`` are the resolved permissions Discord sent with an interaction; for a
    message they are computed from the member's roles in the cached guild.
    """
    is_admin = user.id in config.admin_ids
    if not is_admin and isinstance(user, discord.Member):
        perms = permissions if permissions is not None else user.guild_permissions
        is_admin = perms.manage_guild or perms.administrator
    return UserRef(
        platform=PLATFORM,
        id=str(user.id),
        display_name=user.display_name,
        is_bot=user.bot,
        is_admin=is_admin,
    )


def is_addressed(message: discord.Message, bot_id: int) -> bool:
    """DMs always; in servers when the bot is mentioned (not via @everyone) or the message
    replies to one of the bot's messages."""
    if message.guild is None:
        return True
    if any(u.id == bot_id for u in message.mentions):
        return True
    ref = message.reference
    if ref is not None and isinstance(ref.resolved, discord.Message):
        return ref.resolved.author.id == bot_id
    return False


def visible_text(message: discord.Message, bot_id: int) -> str:
    """The text without the bot's own mention; other user mentions become ``@name`` so the
    engine never sees raw ``<@id>`` markup."""
    text = re.sub(rf"<@!?{bot_id}>", "", message.content)
    for user in message.mentions:
        if user.id != bot_id:
            text = re.sub(rf"<@!?{user.id}>", "@" + user.display_name, text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def message_to_incoming(
    message: discord.Message, *, bot_id: int, bot_name: str | None, config: DiscordConfig
) -> IncomingMessage:
    """``addressed`` (the engine answers only addressed messages) is true in DMs, when the
    bot is mentioned or replied to, and for every message where the server's or channel's
    reply mode is "all"."""
    text = visible_text(message, bot_id)
    addressed = is_addressed(message, bot_id)
    if not addressed and message.guild is not None:
        addressed = config.reply_mode(message.guild.id, message.channel.id) == "all"
    ref_id = message.reference.message_id if message.reference is not None else None
    return IncomingMessage(
        platform=PLATFORM,
        chat=chat_ref(message.channel, message.guild, message.channel.id, config),
        author=user_ref(message.author, config),
        text=text,
        message_id=str(message.id),
        sent_at=message.created_at,  # the platform's own time, not the wall clock
        reply_to_id=str(ref_id) if ref_id is not None else None,
        addressed=addressed,
        command=Command.parse(text, bot_name),
    )


def interaction_to_incoming(
    interaction: discord.Interaction, name: str, args: str, config: DiscordConfig
) -> IncomingMessage:
    """A slash command as a message: command=Command(name, args) with the option value."""
    text = f"/{name} {args}".strip()
    return IncomingMessage(
        platform=PLATFORM,
        chat=chat_ref(interaction.channel, interaction.guild, interaction.channel_id, config),
        author=user_ref(
            interaction.user,
            config,
            permissions=interaction.permissions if interaction.guild_id else None,
        ),
        text=text,
        message_id=str(interaction.id),
        sent_at=interaction.created_at,
        addressed=True,
        command=Command(name=name, args=args),
        locale=str(interaction.locale),
    )


def reaction_to_incoming(
    event: discord.RawReactionActionEvent,
    *,
    bot_id: int,
    guild: discord.Guild | None,
    config: DiscordConfig,
) -> IncomingReaction | None:
    """A reaction added or removed (``event.event_type``), or ``None``: the bot's own,
    another bot's (known when Discord sends the member), a custom server emoji (not a
    unicode one: never a thumb). Discord gives no time: the reaction is dated now."""
    if event.user_id == bot_id or (event.member is not None and event.member.bot):
        return None
    if not event.emoji.is_unicode_emoji():
        return None
    emoji = (event.emoji.name or "",)
    added = event.event_type == "REACTION_ADD"
    if guild is None and event.guild_id is not None:
        # A server the cache does not hold (yet): still a group chat, scoped by its id.
        scope = SHARED_SERVER_SCOPE if config.cross_server_memory else str(event.guild_id)
        chat = ChatRef(PLATFORM, str(event.channel_id), ChatKind.GROUP, scope=scope)
    else:
        chat = chat_ref(None, guild, event.channel_id, config)
    return IncomingReaction(
        platform=PLATFORM,
        chat=chat,
        author=UserRef(
            platform=PLATFORM,
            id=str(event.user_id),
            display_name=event.member.display_name if event.member is not None else None,
            is_admin=event.user_id in config.admin_ids,
        ),
        message_id=str(event.message_id),
        sent_at=discord.utils.utcnow(),
        added=emoji if added else (),
        removed=() if added else emoji,
    )
