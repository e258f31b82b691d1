"""The commands layer's router: one registry of chat commands for every platform.

Handlers live in the application (``akira_bot.commands``); the router checks admin rights
on every call (refusals carry no data) and answers unknown commands with a usage hint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.i18n import t
from core.pipeline import CallNext, TurnContext
from core.stages.outgoing import guard_outgoing
from core.types import CommandSpec, Reply, ReplyKind

log = logging.getLogger(__name__)

CommandResult = Reply | str | None
CommandHandler = Callable[[TurnContext, str], Awaitable[CommandResult]]


class UsageError(ValueError):
    """Wrong arguments: the message is shown to the user as-is (a usage line)."""


@dataclass(frozen=True, slots=True)
class RegisteredCommand:
    spec: CommandSpec
    handler: CommandHandler


class CommandRouter:
    def __init__(self) -> None:
        self._commands: dict[str, RegisteredCommand] = {}

    @property
    def specs(self) -> list[CommandSpec]:
        return [c.spec for c in self._commands.values()]

    def register(self, spec: CommandSpec, handler: CommandHandler) -> None:
        if spec.name in self._commands:
            raise ValueError(f"command /{spec.name} is already registered")
        self._commands[spec.name] = RegisteredCommand(spec, handler)

    def command(
        self,
        name: str,
        description: str,
        *,
        description_pt: str = "",
        admin_only: bool = False,
        args_hint: str = "",
    ) -> Callable[[CommandHandler], CommandHandler]:
        """Decorator: ``@router.command("mood", "Your emotional state")``."""

        def wrap(handler: CommandHandler) -> CommandHandler:
            self.register(
                CommandSpec(name, description, description_pt, admin_only, args_hint), handler
            )
            return handler

        return wrap

    def get(self, name: str) -> RegisteredCommand | None:
        return self._commands.get(name)

    async def dispatch(self, ctx: TurnContext) -> None:
        command = ctx.message.command
        assert command is not None
        registered = self._commands.get(command.name)
        if registered is None:
            await ctx.send(
                Reply(t("unknown_command", ctx.language, name=command.name[:32]), ReplyKind.COMMAND)
            )
            return
        if registered.spec.admin_only and not ctx.message.author.is_admin:
            log.info("refused admin command /%s for %s", command.name, ctx.owner)
            await ctx.send(Reply(t("not_allowed", ctx.language), ReplyKind.COMMAND))
            return
        try:
            result = await registered.handler(ctx, command.args)
        except UsageError as exc:
            result = Reply(str(exc), ReplyKind.COMMAND)
        except Exception:
            log.exception("command /%s failed", command.name)
            result = Reply(t("command_failed", ctx.language), ReplyKind.COMMAND)
        if isinstance(result, str):
            result = Reply(result, ReplyKind.COMMAND)
        if result is not None:
            # Replies quote memories (some proposed by the model) and exports: the same
            # check as an answer's before they reach the person.
            await ctx.send(guard_outgoing(ctx, result))


class CommandStage:
    """Answers commands and stops the chain; other messages pass through."""

    name = "commands"

    def __init__(self, router: CommandRouter) -> None:
        self.router = router

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        if ctx.message.command is None:
            await call_next()
            return
        # What the person's earlier messages are still storing lands first: a command
        # reads (/memories, /export, /profile) or erases (/forgetme) all of it.
        await ctx.services.memory.settle_owner(ctx.owner)
        await self.router.dispatch(ctx)
