"""Built-in plugin ``admin_commands``: /stats /user /verify (handlers in
:mod:`akira_bot.commands.admin`; the router refuses them to non-admins)."""

from __future__ import annotations

from akira_bot.commands.admin import ADMIN_COMMANDS
from akira_bot.plugins import PluginAPI


def setup(api: PluginAPI) -> None:
    for spec, handler in ADMIN_COMMANDS:
        api.router.register(spec, handler)
