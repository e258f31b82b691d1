"""A plugin that adds commands, with its own settings.

    AKIRA_BOT__PLUGINS='["examples.dice.dice"]' AKIRA_DICE__SIDES=20 akira-bot chat

/roll [N]d[S] rolls dice (``/roll``, ``/roll 3``, ``/roll 2d6``); /coin flips a coin.
Settings (``AKIRA_DICE__*`` or a ``[dice]`` table in akira.toml): ``sides`` (the die
when none is given), ``max_dice``.
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel, ConfigDict, Field

from akira_bot import PluginAPI, TurnContext, UsageError

_SPEC = re.compile(r"^(?P<count>\d{1,3})?(?:d(?P<sides>\d{1,4}))?$", re.IGNORECASE)


class DiceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")  # AKIRA_DICE__SIDS is an error, not ignored

    sides: int = Field(default=6, ge=2, le=1000)
    max_dice: int = Field(default=10, ge=1, le=100)


def roll(spec: str, settings: DiceSettings, rng: random.Random) -> list[int]:
    """The dice ``spec`` asks for (``""``, ``"3"``, ``"2d6"``, ``"d20"``)."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise UsageError("Usage: /roll [N]d[S], e.g. /roll 2d6")
    count = int(match.group("count") or 1)
    sides = int(match.group("sides") or settings.sides)
    if not 1 <= count <= settings.max_dice or not 2 <= sides <= 1000:
        raise UsageError(f"From 1 to {settings.max_dice} dice of 2 to 1000 sides, please.")
    return [rng.randint(1, sides) for _ in range(count)]


async def roll_command(ctx: TurnContext, args: str) -> str:
    settings = ctx.services.require(DiceSettings)
    dice = roll(args, settings, random.Random())
    shown = " + ".join(map(str, dice))
    return f"🎲 {shown} = {sum(dice)}" if len(dice) > 1 else f"🎲 {shown}"


async def coin_command(ctx: TurnContext, args: str) -> str:
    heads = random.random() < 0.5
    if ctx.language == "pt":
        return "🪙 cara" if heads else "🪙 coroa"
    return "🪙 heads" if heads else "🪙 tails"


def setup(api: PluginAPI) -> None:
    api.config(DiceSettings)  # read and validated at start; handlers find it by type
    api.command("roll", "Roll dice", description_pt="Rolar dados", args_hint="[N]d[S]")(
        roll_command
    )
    api.command("coin", "Flip a coin", description_pt="Jogar uma moeda")(coin_command)
