"""AKIRA: a framework for chat bots that remember people.

What a bot author needs, in one import (everything else is internal and may change):

- running a bot: :func:`run` / :func:`run_bot` (from settings or code), :func:`load_settings`,
  :class:`Settings`; the parts: :func:`build_engine`, :func:`build_handler`,
  :func:`build_adapters`, :func:`serve`;
- plugins: :class:`PluginAPI` (what ``setup(api)`` gets), :class:`Plugin`,
  :class:`PluginError`, :class:`CommandRouter`, :class:`UsageError`, :class:`Pipeline`,
  :class:`Stage`, :class:`PromptSection`, :class:`Services`;
- a message's trip: :class:`TurnContext`, :class:`IncomingMessage`, :class:`Reply`,
  :class:`ReplyKind`, :class:`ChatRef`, :class:`ChatKind`, :class:`UserRef`, :class:`Command`;
- adapters: :class:`Adapter`, :class:`AdapterSpec`, :class:`AdapterStartError`,
  :class:`MessageHandler`, :class:`Responder`;
- the test kit: :mod:`akira_bot.testing` (:class:`~akira_bot.testing.BotTester`...).

Names are loaded on first use, so ``import akira_bot`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.base import Adapter, AdapterSpec, AdapterStartError
    from akira_bot import testing
    from akira_bot.app import (
        build_adapters,
        build_engine,
        build_handler,
        run,
        run_bot,
        serve,
    )
    from akira_bot.plugins import Plugin, PluginAPI, PluginError
    from akira_bot.settings import Settings, SettingsError, load_settings
    from core.commands import CommandRouter, UsageError
    from core.engine import Engine
    from core.pipeline import Pipeline, PromptSection, Stage, TurnContext
    from core.services import Services
    from core.types import (
        ChatKind,
        ChatRef,
        Command,
        IncomingMessage,
        MessageHandler,
        Reply,
        ReplyKind,
        Responder,
        UserRef,
    )

_WHERE: dict[str, str] = {
    "Adapter": "adapters.base",
    "AdapterStartError": "adapters.base",
    "AdapterSpec": "adapters.base",
    "build_adapters": "akira_bot.app",
    "build_engine": "akira_bot.app",
    "build_handler": "akira_bot.app",
    "run": "akira_bot.app",
    "run_bot": "akira_bot.app",
    "serve": "akira_bot.app",
    "Plugin": "akira_bot.plugins",
    "PluginAPI": "akira_bot.plugins",
    "PluginError": "akira_bot.plugins",
    "Settings": "akira_bot.settings",
    "SettingsError": "akira_bot.settings",
    "load_settings": "akira_bot.settings",
    "CommandRouter": "core.commands",
    "UsageError": "core.commands",
    "Engine": "core.engine",
    "Pipeline": "core.pipeline",
    "PromptSection": "core.pipeline",
    "Stage": "core.pipeline",
    "TurnContext": "core.pipeline",
    "Services": "core.services",
    "ChatKind": "core.types",
    "ChatRef": "core.types",
    "Command": "core.types",
    "IncomingMessage": "core.types",
    "MessageHandler": "core.types",
    "Reply": "core.types",
    "ReplyKind": "core.types",
    "Responder": "core.types",
    "UserRef": "core.types",
}

__all__ = [
    "Adapter",
    "AdapterSpec",
    "AdapterStartError",
    "ChatKind",
    "ChatRef",
    "Command",
    "CommandRouter",
    "Engine",
    "IncomingMessage",
    "MessageHandler",
    "Pipeline",
    "Plugin",
    "PluginAPI",
    "PluginError",
    "PromptSection",
    "Reply",
    "ReplyKind",
    "Responder",
    "Services",
    "Settings",
    "SettingsError",
    "Stage",
    "TurnContext",
    "UsageError",
    "UserRef",
    "build_adapters",
    "build_engine",
    "build_handler",
    "load_settings",
    "run",
    "run_bot",
    "serve",
    "testing",
]


def __getattr__(name: str) -> Any:
    if name == "testing":
        return importlib.import_module("akira_bot.testing")
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'akira_bot' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
