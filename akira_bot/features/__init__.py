"""Features that plug into a built engine.

Each module here has ``install(settings, services, pipeline, router) -> None``: it may
register storage parts (before the database opens), add or replace pipeline stages, add
commands and after-reply hooks. ``FEATURES`` is the order they are installed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akira_bot.settings import Settings
    from core.commands import CommandRouter
    from core.pipeline import Pipeline
    from core.services import Services

Install = Callable[["Settings", "Services", "Pipeline", "CommandRouter"], None]

# Module names under akira_bot.features, installed in this order.
FEATURES: list[str] = ["emotion", "structured_memory", "commands", "http_keys", "metrics"]


def installers() -> list[Install]:
    import importlib

    return [importlib.import_module(f"akira_bot.features.{name}").install for name in FEATURES]
