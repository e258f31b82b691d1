"""The chat commands layer: written once, used by every adapter.

``register_commands(router)`` adds the everyone-commands (/start /help /remember /memories
/forget /forgetme /export /mood) and the admin ones (/stats /user /verify) to a
:class:`core.commands.CommandRouter`. The ``commands`` feature calls it when the app is
built; a developer building their own bot can call it on their own router.
"""

from __future__ import annotations

from datetime import timedelta

from akira_bot.commands.admin import register_admin_commands
from akira_bot.commands.user import (
    FORGETME_WINDOW,
    PAGE_SIZE,
    ForgetMeConfirmations,
    parse_remember,
    register_user_commands,
)
from core.commands import CommandRouter

__all__ = [
    "FORGETME_WINDOW",
    "PAGE_SIZE",
    "ForgetMeConfirmations",
    "parse_remember",
    "register_admin_commands",
    "register_commands",
    "register_user_commands",
]


def register_commands(
    router: CommandRouter,
    *,
    page_size: int = PAGE_SIZE,
    forgetme_window: timedelta = FORGETME_WINDOW,
) -> ForgetMeConfirmations:
    """Register every built-in command; returns the /forgetme confirmation tracker."""
    confirmations = register_user_commands(
        router, page_size=page_size, forgetme_window=forgetme_window
    )
    register_admin_commands(router)
    return confirmations
