"""The LLM provider interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class GenerationOptions:
    max_tokens: int = 512
    temperature: float = 0.7
    # Extraction asks for JSON; providers that support a JSON mode may use it.
    json_mode: bool = False
    # The person's language ("pt", "en"): a small local model is reminded to answer in it.
    language: str | None = None


@dataclass(frozen=True, slots=True)
class Generation:
    """What a provider returned. ``text`` may still hold thinking blocks and tags: the
    cleaner removes them. ``reasoning`` (a provider's ``reasoning_content``) is kept apart
    and never shown to anyone."""

    text: str
    model: str = ""
    reasoning: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class LLMError(RuntimeError):
    """The provider failed after its retries (time-out, refused, 5xx, malformed answer)."""


class LLMProvider(ABC):
    """Chat completion behind one interface. Implementations handle their own time-outs
    and retries, raise :class:`LLMError` when they give up, and never block the loop."""

    name: str = "provider"
    model: str = ""

    @abstractmethod
    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation: ...

    async def start(self) -> None:
        """Load models / open clients. Called once before the first message."""

    async def close(self) -> None:
        """Release resources."""
