"""Feature: the built-in chat commands (user and admin), see ``akira_bot.commands``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from akira_bot.commands import register_commands

if TYPE_CHECKING:
    from akira_bot.settings import Settings
    from core.commands import CommandRouter
    from core.pipeline import Pipeline
    from core.services import Services


def install(
    settings: Settings, services: Services, pipeline: Pipeline, router: CommandRouter
) -> None:
    # Kept on the services so tools and tests can see pending /forgetme confirmations.
    services.extras["forgetme_confirmations"] = register_commands(router)
