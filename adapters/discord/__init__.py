"""Discord adapter (discord.py 2.x). Import :mod:`adapters.discord.adapter` for the adapter
itself; :mod:`adapters.discord.config` has no discord dependency."""

from adapters.discord.config import DiscordConfig

__all__ = ["DiscordConfig"]
