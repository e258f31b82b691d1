"""A small bot assembled in code: the library without the CLI.

    python examples/in_code/bot.py            # chat in the terminal
    echo "hi" | python examples/in_code/bot.py

Settings still come from AKIRA_* variables and akira.toml for what is not set here (an
LLM endpoint: AKIRA_LLM__PROVIDER=openai AKIRA_LLM__BASE_URL=...); the plugins are
functions of this file, and with AKIRA_TELEGRAM__TOKEN or AKIRA_DISCORD__TOKEN set the
same bot runs there instead of the console.
"""

from __future__ import annotations

import akira_bot
from akira_bot import PluginAPI, TurnContext
from core.pipeline import CallNext


async def whoami(ctx: TurnContext, args: str) -> str:
    return f"You are {ctx.owner} ({ctx.message.author.display_name or 'no name'})."


async def count_turns(ctx: TurnContext, call_next: CallNext) -> None:
    # Runs for every message that is not a command: the stage after "commands".
    ctx.extras["turn_seen"] = True
    await call_next()


def greeter(api: PluginAPI) -> None:
    """A plugin given as a function: ``setup(api)`` by another name."""
    api.command("whoami", "Who am I to the bot", description_pt="Quem sou eu")(whoami)
    api.stage("count_turns", after="commands")(count_turns)


def main() -> None:
    settings = akira_bot.load_settings(
        # Only what differs from the defaults; the rest stays configurable.
        bot={"builtins": ["structured_memories", "user_commands"]},  # no emotion, no admin
    )
    akira_bot.run(settings, plugins=[greeter], console_user="guest")


if __name__ == "__main__":
    main()
