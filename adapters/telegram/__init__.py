"""Telegram bridge (python-telegram-bot). ``TelegramConfig`` imports without ``telegram``;
``TelegramAdapter`` is loaded lazily so the settings layer never pulls the platform library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.base import AdapterSpec, lazy_factory
from adapters.telegram.config import TelegramConfig

if TYPE_CHECKING:
    from adapters.telegram.adapter import TelegramAdapter

__all__ = ["ADAPTER", "TelegramAdapter", "TelegramConfig"]


ADAPTER = AdapterSpec(
    name="telegram",
    settings_model=TelegramConfig,
    factory=lazy_factory("adapters.telegram.adapter:TelegramAdapter"),
    enabled=lambda config: config.enabled,
    secrets=lambda config: (config.token, config.webhook_secret),
    noisy_loggers=("telegram",),
)


def __getattr__(name: str) -> Any:
    if name == "TelegramAdapter":
        from adapters.telegram.adapter import TelegramAdapter

        return TelegramAdapter
    raise AttributeError(name)
