"""The adapter registry: every platform the application can start, declared by its own
package, so adding one touches nothing else.

An adapter package declares an :class:`AdapterSpec`: its name (the settings section,
``AKIRA_<NAME>__*``, TOML ``[<name>]``), its settings model, a factory, when its settings
mean "start me", the secrets to keep out of logs and the loggers too chatty at INFO.
Built-in: ``telegram`` and ``discord``. Third-party adapters come through the entry-point
group ``akira_bot.adapters`` (each entry point names an ``AdapterSpec`` object). The
console is not in the registry: it is what ``akira-bot run`` starts when none is
enabled.

This module imports no platform library: a spec's factory imports its adapter lazily
(:func:`adapters.base.lazy_factory`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from functools import cache

# What an adapter package declares lives beside the adapter base class (adapters import
# only their own package and adapters.base); it is re-exported here under its old path.
from adapters.base import AdapterSpec, lazy_factory

__all__ = ["ADAPTER_GROUP", "BUILTIN_SPECS", "AdapterSpec", "lazy_factory", "registry"]

log = logging.getLogger(__name__)

ADAPTER_GROUP = "akira_bot.adapters"
BUILTIN_SPECS = ("adapters.telegram:ADAPTER", "adapters.discord:ADAPTER")


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
