"""Discord bridge (discord.py 2.x). ``DiscordConfig`` imports without ``discord``;
``DiscordAdapter`` is loaded lazily so the settings layer never pulls the platform library."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from adapters.base import AdapterSpec, lazy_factory
from adapters.discord.config import DiscordConfig

if TYPE_CHECKING:
    from adapters.discord.adapter import DiscordAdapter, DiscordStartError

__all__ = ["ADAPTER", "DiscordAdapter", "DiscordConfig", "DiscordStartError", "DropVoiceWarnings"]


class DropVoiceWarnings(logging.Filter):
    """discord.py warns at every start that voice needs PyNaCl and davey: AKIRA only
    reads and writes text, so the warning says nothing to the person running it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


ADAPTER = AdapterSpec(
    name="discord",
    settings_model=DiscordConfig,
    factory=lazy_factory("adapters.discord.adapter:DiscordAdapter"),
    secrets=lambda config: (config.token,),
    noisy_loggers=("discord",),
    log_filters=(("discord.client", DropVoiceWarnings),),
)


def __getattr__(name: str) -> Any:
    if name in ("DiscordAdapter", "DiscordStartError"):
        from adapters.discord import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
