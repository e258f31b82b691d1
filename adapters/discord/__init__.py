"""Discord bridge (discord.py 2.x). ``DiscordConfig`` imports without ``discord``;
``DiscordAdapter`` is loaded lazily so the settings layer never pulls the platform library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.discord.config import DiscordConfig

if TYPE_CHECKING:
    from adapters.discord.adapter import DiscordAdapter, DiscordStartError

__all__ = ["DiscordAdapter", "DiscordConfig", "DiscordStartError"]


def __getattr__(name: str) -> Any:
    if name in ("DiscordAdapter", "DiscordStartError"):
        from adapters.discord import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
