"""The engine's chat commands as Discord application (slash) commands.

Built at start from ``handler.commands`` (``CommandSpec``): one optional string option
when the command takes an argument, ``default_member_permissions`` = Manage Server for
admin commands (Discord hides them from other members; the adapter still checks every
call, since server admins can override the default), and Brazilian Portuguese
descriptions through a translator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import discord
from discord import app_commands

from core.types import CommandSpec

OPTION_NAME = "text"
DESCRIPTION_LIMIT = 100  # Discord's limit for command and option descriptions

CommandCallback = Callable[[discord.Interaction, CommandSpec, str], Awaitable[None]]


def _clip(text: str, fallback: str) -> str:
    text = " ".join((text or fallback).split())
    return text if len(text) <= DESCRIPTION_LIMIT else text[: DESCRIPTION_LIMIT - 1] + "…"


class PortugueseTranslator(app_commands.Translator):
    """Serves the pt-BR text carried in ``locale_str(..., pt=...)``; Discord shows it to
    users whose client language is Brazilian Portuguese."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        if locale is discord.Locale.brazil_portuguese:
            pt = string.extras.get("pt")
            return str(pt) if pt else None
        return None


def build_app_commands(
    specs: Sequence[CommandSpec], on_command: CommandCallback
) -> list[app_commands.Command[Any, ..., None]]:
    commands: list[app_commands.Command[Any, ..., None]] = []
    for spec in specs:
        callback = (
            _with_option(spec, on_command) if spec.args_hint else _no_option(spec, on_command)
        )
        description = _clip(spec.description, spec.name)
        pt = _clip(spec.description_pt, "") if spec.description_pt else ""
        cmd: app_commands.Command[Any, ..., None] = app_commands.Command(
            name=spec.name,
            description=app_commands.locale_str(description, pt=pt),
            callback=callback,
        )
        if spec.admin_only:
            cmd.default_permissions = discord.Permissions(manage_guild=True)
        commands.append(cmd)
    return commands


def _with_option(
    spec: CommandSpec, on_command: CommandCallback
) -> Callable[..., Coroutine[Any, Any, None]]:
    async def callback(interaction: discord.Interaction, text: str | None = None) -> None:
        await on_command(interaction, spec, (text or "").strip())

    # The option's description is the spec's argument hint (e.g. "<key: content>").
    return app_commands.describe(text=_clip(spec.args_hint, OPTION_NAME))(callback)


def _no_option(
    spec: CommandSpec, on_command: CommandCallback
) -> Callable[..., Coroutine[Any, Any, None]]:
    async def callback(interaction: discord.Interaction) -> None:
        await on_command(interaction, spec, "")

    return callback
