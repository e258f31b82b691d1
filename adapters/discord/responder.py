"""Core ``Reply`` -> Discord calls, for a message and for a slash command (interaction)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import discord

from adapters.base import split_text
from core.i18n import t
from core.types import Reply

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000  # Discord's limit for a message's content

# Replies never ping @everyone/@here, roles or arbitrary users (a model could write
# "<@id>"); replying to the asker may notify them, as any reply does.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)


def _file(reply: Reply) -> discord.File | None:
    if reply.attachment is None:
        return None
    return discord.File(io.BytesIO(reply.attachment.data), filename=reply.attachment.filename)


def _parts(reply: Reply) -> list[str | None]:
    """The text split to Discord's limit; an attachment-only reply is one part without text."""
    chunks: list[str | None] = list(split_text(reply.text, MESSAGE_LIMIT))
    return chunks or ([None] if reply.attachment is not None else [])


class MessageResponder:
    """Answers a ``discord.Message``: in the same channel (as a reply in servers), private
    replies by DM when the message came from a server channel."""

    def __init__(self, message: discord.Message) -> None:
        self.message = message

    async def send(self, reply: Reply) -> list[str] | None:
        """Deliver; the ids of the messages sent in the message's own channel (a private
        reply moved to a DM gives none: reactions are traced in the channel)."""
        parts = _parts(reply)
        if not parts:
            return None
        in_guild = self.message.guild is not None
        if reply.private and in_guild:
            # Never show a private answer (memories, export) in a server channel.
            try:
                dm = await self.message.author.create_dm()
                await self._send_parts(dm, parts, reply, in_guild=False)
            except discord.Forbidden:
                # DMs closed: drop it rather than leak it into the channel.
                log.warning("discord: user %s does not accept DMs", self.message.author.id)
            return None
        return await self._send_parts(self.message.channel, parts, reply, in_guild=in_guild)

    async def _send_parts(
        self,
        target: discord.abc.Messageable,
        parts: list[str | None],
        reply: Reply,
        *,
        in_guild: bool,
    ) -> list[str]:
        sent: list[str] = []
        for i, part in enumerate(parts):
            kwargs: dict[str, Any] = {"allowed_mentions": SAFE_MENTIONS}
            if i == 0:
                file = _file(reply)
                if file is not None:
                    kwargs["file"] = file
                if in_guild:
                    kwargs["reference"] = self.message.to_reference(fail_if_not_exists=False)
                    kwargs["mention_author"] = False
            message = await target.send(part, **kwargs)
            sent.append(str(message.id))
        return sent

    def typing(self) -> AbstractAsyncContextManager[None]:
        # discord.py re-sends the typing indicator every few seconds until the block ends.
        return self.message.channel.typing()


DONE = "✅"


def lang_of(interaction: discord.Interaction) -> str:
    """Discord always sends the caller's client language: Portuguese ones get Portuguese,
    every other one English."""
    return "pt" if str(interaction.locale).startswith("pt") else "en"


class InteractionResponder:
    """Answers a slash command within Discord's interaction rules.

    The first reply is the interaction's response (ephemeral when ``Reply.private``); later
    ones are follow-ups. When the engine takes longer than ``defer_after_s`` (or starts
    generating: ``typing()``), the interaction is deferred ("thinking…", visible only to
    the caller) and the first reply then edits that message, or, when its visibility
    differs from the reply's, replaces it with a follow-up.
    """

    def __init__(self, interaction: discord.Interaction) -> None:
        self.interaction = interaction
        self._lock = asyncio.Lock()
        self._pending_original = False  # deferred; the "thinking" message awaits its answer
        self._defer_ephemeral = True
        self.deferred = False
        self.sent = 0

    async def defer(self) -> None:
        async with self._lock:
            if self.interaction.response.is_done():
                return
            await self.interaction.response.defer(ephemeral=self._defer_ephemeral, thinking=True)
            self.deferred = True
            self._pending_original = True

    async def send(self, reply: Reply) -> None:
        async with self._lock:
            for i, part in enumerate(_parts(reply)):
                await self._send_one(part, _file(reply) if i == 0 else None, reply.private)
                self.sent += 1

    async def _send_one(
        self, content: str | None, file: discord.File | None, private: bool
    ) -> None:
        response = self.interaction.response
        if not response.is_done():
            kwargs: dict[str, Any] = {"ephemeral": private, "allowed_mentions": SAFE_MENTIONS}
            if file is not None:
                kwargs["file"] = file
            await response.send_message(content, **kwargs)
            return
        if self._pending_original:
            self._pending_original = False
            if private == self._defer_ephemeral:
                edit: dict[str, Any] = {"content": content, "allowed_mentions": SAFE_MENTIONS}
                if file is not None:
                    edit["attachments"] = [file]
                await self.interaction.edit_original_response(**edit)
                return
            # The deferred message's visibility is fixed, and a follow-up sent while it is
            # still loading would inherit it (Discord resolves the loading state with it):
            # resolve it by an edit, remove it, then answer in a follow-up of its own.
            await self.interaction.edit_original_response(content=DONE)
            await self.interaction.delete_original_response()
        follow: dict[str, Any] = {
            "ephemeral": private,
            "allowed_mentions": SAFE_MENTIONS,
            "wait": True,
        }
        if file is not None:
            follow["file"] = file
        await self.interaction.followup.send(content or discord.utils.MISSING, **follow)

    async def finish(self, ok: bool = True) -> None:
        """Close the interaction when the engine sent nothing (Discord would otherwise show
        "the application did not respond")."""
        async with self._lock:
            if self.sent and ok:
                return
            text = DONE if ok else t("command_failed", lang_of(self.interaction))
            if not self.interaction.response.is_done():
                await self.interaction.response.send_message(text, ephemeral=True)
            elif self._pending_original:
                self._pending_original = False
                await self.interaction.edit_original_response(content=text)
            elif not ok:
                await self.interaction.followup.send(text, ephemeral=True)

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            # Generating takes a while: acknowledge now rather than risk the 3 s deadline.
            try:
                await self.defer()
            except discord.HTTPException:
                log.warning("could not defer interaction %s", self.interaction.id)
            yield

        return _typing()
