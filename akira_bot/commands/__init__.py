"""The chat commands layer: written once, used by every adapter.

The handlers are module-level functions (``akira_bot.commands.user.remember``...), each
``async def handler(ctx, args) -> str | Reply | None``, importable and testable on their
own. The built-in plugins ``user_commands`` and ``admin_commands`` register them; a bot
assembled in code can call :func:`register_commands` on its own router.
"""

from __future__ import annotations

from akira_bot.commands.admin import ADMIN_COMMANDS, register_admin_commands
from akira_bot.commands.memories import PAGE_SIZE, parse_remember
from akira_bot.commands.user import (
    FORGETME_WINDOW,
    USER_COMMANDS,
    ForgetMeConfirmations,
    register_user_commands,
)
from core.commands import CommandRouter

__all__ = [
    "ADMIN_COMMANDS",
    "FORGETME_WINDOW",
    "PAGE_SIZE",
    "USER_COMMANDS",
    "ForgetMeConfirmations",
    "parse_remember",
    "register_admin_commands",
    "register_commands",
    "register_user_commands",
]


def register_commands(router: CommandRouter) -> None:
    """Register every built-in command (everyone's, then the admins')."""
    register_user_commands(router)
    register_admin_commands(router)
