"""akira-shout: a third-party AKIRA plugin, installed with pip and enabled by its entry
point's name: ``AKIRA_BOT__PLUGINS='["shout"]'``.

- ``/shout TEXT`` answers TEXT in capitals;
- the stage ``shout_sign`` (after ``clean``) signs every model reply with ``SIGN``;
- settings: ``AKIRA_SHOUT__SIGN`` (or ``[shout] sign = ...``).
"""

from __future__ import annotations

from pydantic import BaseModel

from akira_bot import PluginAPI, TurnContext, UsageError
from core.pipeline import CallNext


class ShoutSettings(BaseModel):
    sign: str = "📣"


async def shout(ctx: TurnContext, args: str) -> str:
    if not args.strip():
        raise UsageError("Usage: /shout TEXT")
    return args.strip().upper() + "!"


async def shout_sign(ctx: TurnContext, call_next: CallNext) -> None:
    if ctx.reply_text:
        ctx.reply_text = f"{ctx.reply_text} {ctx.services.require(ShoutSettings).sign}"
    await call_next()


def setup(api: PluginAPI) -> None:
    api.config(ShoutSettings)
    api.command("shout", "Say it louder", description_pt="Falar mais alto", args_hint="TEXT")(shout)
    api.stage("shout_sign", after="clean")(shout_sign)
