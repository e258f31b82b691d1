"""The adapter base class every platform bridge implements."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

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
