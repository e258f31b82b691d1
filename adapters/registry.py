"""The adapter registry: every platform the application can start, declared by its own
package, so adding one touches nothing else.

An adapter package declares an :class:`AdapterSpec`: its name (the settings section,
``AKIRA_<NAME>__*``, TOML ``[<name>]``), its settings model, a factory, when its settings
mean "start me", the secrets to keep out of logs and the loggers too chatty at INFO.
Built-in: ``telegram`` and ``discord``. Third-party adapters come through the entry-point
group ``akira_bot.adapters`` (each entry point names an ``AdapterSpec`` object). The
console is not in the registry: it is what ``akira-bot run`` starts when none is
enabled.

This module imports no platform library: a spec's factory imports its adapter lazily.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

if TYPE_CHECKING:
    from adapters.base import Adapter
    from core.types import MessageHandler

log = logging.getLogger(__name__)

ADAPTER_GROUP = "akira_bot.adapters"
BUILTIN_SPECS = ("adapters.telegram:ADAPTER", "adapters.discord:ADAPTER")


def _enabled_by_token(config: Any) -> bool:
    token = getattr(config, "token", None)
    if isinstance(token, SecretStr):
        return bool(token.get_secret_value())
    return bool(token)


def _no_secrets(config: Any) -> Iterable[SecretStr | str | None]:
    return ()


@dataclass(frozen=True)
class AdapterSpec:
    """What an adapter declares to the application."""

    name: str  # settings section and env prefix: AKIRA_<NAME>__*
    settings_model: type[BaseModel]
    # (the engine, this adapter's settings) -> the adapter; imports the platform library.
    factory: Callable[[MessageHandler, Any], Adapter]
    # Whether these settings ask for the adapter to start (default: a non-empty token).
    enabled: Callable[[Any], bool] = _enabled_by_token
    # The settings' secret values (tokens, webhook secrets): redacted from every log line.
    secrets: Callable[[Any], Iterable[SecretStr | str | None]] = _no_secrets
    # Loggers kept at WARNING or above (HTTP clients, the platform library).
    noisy_loggers: tuple[str, ...] = ()
    # Log filters to install: logger name -> filter (a library's warning that says
    # nothing to whoever runs the bot).
    log_filters: tuple[tuple[str, Callable[[], logging.Filter]], ...] = field(default=())

    def secret_values(self, config: Any) -> list[str]:
        values = []
        for secret in self.secrets(config):
            value = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
            if value:
                values.append(value)
        return values


def lazy_factory(target: str) -> Callable[[MessageHandler, Any], Adapter]:
    """A factory for ``"package.module:AdapterClass"`` that imports it only when called,
    so declaring an adapter never imports its platform library."""
    module, _, name = target.partition(":")

    def create(handler: MessageHandler, config: Any) -> Adapter:
        adapter_class = getattr(importlib.import_module(module), name)
        return adapter_class(handler, config)  # type: ignore[no-any-return]

    return create


def _load(target: str) -> AdapterSpec:
    module, _, attr = target.partition(":")
    spec = getattr(importlib.import_module(module), attr or "ADAPTER")
    if not isinstance(spec, AdapterSpec):
        raise TypeError(f"{target} is not an AdapterSpec")
    return spec


@cache
def registry() -> dict[str, AdapterSpec]:
    """Every known adapter by name: the built-ins, then the installed entry points (a
    third-party adapter cannot take a built-in's name)."""
    specs: dict[str, AdapterSpec] = {}
    for target in BUILTIN_SPECS:
        spec = _load(target)
        specs[spec.name] = spec
    for entry in importlib.metadata.entry_points(group=ADAPTER_GROUP):
        try:
            spec = entry.load()
        except Exception as exc:
            log.error("adapter entry point %r failed to load: %s", entry.name, exc)
            continue
        if not isinstance(spec, AdapterSpec):
            log.error("adapter entry point %r is not an AdapterSpec", entry.name)
        elif spec.name in specs:
            log.error("adapter entry point %r: the name %r is taken", entry.name, spec.name)
        else:
            specs[spec.name] = spec
    return specs
