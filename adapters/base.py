"""The adapter base class every platform bridge implements, and the spec an adapter
package declares to the application (:class:`AdapterSpec`, see adapters.registry)."""

from __future__ import annotations

import importlib
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, SecretStr

from core.types import MessageHandler


class AdapterStartError(RuntimeError):
    """An adapter could not connect (a rejected token, an unreachable server...): the
    message is one line for the person starting the bot and never holds a secret."""


class Adapter(ABC):
    """A platform bridge. ``start`` connects and begins delivering messages to the handler
    (it returns once running); ``stop`` stops taking new updates, lets in-flight replies
    finish within a bound and disconnects."""

    name: str = "adapter"

    def __init__(self, handler: MessageHandler) -> None:
        self.handler = handler

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    @property
    def connected(self) -> bool:
        """Whether the platform is reachable as far as the adapter knows (``/health``).
        An adapter with nothing to lose (the console) is connected while it runs."""
        return True


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


_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, preferring paragraph,
    then line, then sentence, then word boundaries; a word longer than the limit is cut."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    while len(text) > limit:
        window = text[: limit + 1]
        cut = -1
        for pattern in ("\n\n", "\n"):
            cut = window.rfind(pattern, 0, limit)
            if cut > limit // 3:
                break
            cut = -1
        if cut == -1:
            ends = [m.start() for m in _SENTENCE_END.finditer(window) if m.start() <= limit]
            cut = ends[-1] if ends and ends[-1] > limit // 3 else -1
        if cut == -1:
            cut = window.rfind(" ", 0, limit)
            if cut <= 0:
                cut = limit
        head, text = text[:cut].rstrip(), text[cut:].lstrip()
        if head:
            chunks.append(head)
    if text:
        chunks.append(text)
    return chunks
