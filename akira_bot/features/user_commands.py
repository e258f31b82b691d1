"""Built-in plugin ``user_commands``: /start /help /remember /memories /forget /forgetme
/export /mood (handlers in :mod:`akira_bot.commands.user`)."""

from __future__ import annotations

from akira_bot.commands.user import USER_COMMANDS, ForgetMeConfirmations
from akira_bot.plugins import PluginAPI


def setup(api: PluginAPI) -> None:
    for spec, handler in USER_COMMANDS:
        api.router.register(spec, handler)
    confirmations = ForgetMeConfirmations()
    api.provide(confirmations)
    api.services.extras["forgetme_confirmations"] = confirmations
