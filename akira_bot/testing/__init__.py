"""The test kit for bot authors (shipped with the package).

- :class:`BotTester`: start a bot with given plugins in-process, send messages and
  commands as a user on a platform, check the replies and the LLM's prompts;
- :class:`ChatScenario`: NoneBug-style expectations (``receive(...).should_call_send(...)``);
- :func:`make_message`, :func:`ask`: one message as an adapter builds it, handed to an engine;
- :func:`cli_env`, :func:`run_cli`, :func:`running_cli`, :func:`start_cli`,
  :func:`stop_cli`: the real
  ``akira-bot`` in a subprocess;
- the local fakes the real platform libraries talk to (they need ``aiohttp``, the
  ``testing`` extra): ``akira_bot.testing.telegram_api.FakeTelegramServer`` (the Bot
  API), ``akira_bot.testing.discord_api.FakeDiscord`` (gateway and REST),
  ``akira_bot.testing.openai_server.FakeOpenAI`` (an OpenAI-compatible server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from akira_bot.testing.cli import CliRun, cli_env, run_cli, running_cli, start_cli, stop_cli
from akira_bot.testing.harness import BotTester
from akira_bot.testing.messages import ask, make_message
from akira_bot.testing.scenario import ChatScenario, Expectation, Turn

if TYPE_CHECKING:
    from akira_bot.testing.discord_api import FakeDiscord
    from akira_bot.testing.openai_server import FakeOpenAI
    from akira_bot.testing.telegram_api import FakeTelegramServer

__all__ = [
    "BotTester",
    "ChatScenario",
    "CliRun",
    "Expectation",
    "FakeDiscord",
    "FakeOpenAI",
    "FakeTelegramServer",
    "Turn",
    "ask",
    "cli_env",
    "make_message",
    "run_cli",
    "running_cli",
    "start_cli",
    "stop_cli",
]

_FAKES = {
    "FakeDiscord": "akira_bot.testing.discord_api",
    "FakeOpenAI": "akira_bot.testing.openai_server",
    "FakeTelegramServer": "akira_bot.testing.telegram_api",
}


def __getattr__(name: str) -> Any:
    # The fakes import aiohttp: loaded when asked for, so the rest works without it.
    if name in _FAKES:
        import importlib

        return getattr(importlib.import_module(_FAKES[name]), name)
    raise AttributeError(name)
