"""LLM providers behind one interface (:class:`LLMProvider`).

Heavy providers (``core.llm.local``, ``core.llm.openai``) are imported by
:func:`build_provider` on demand; import them directly when you need the classes.
"""

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider
from core.llm.config import LLMConfig
from core.llm.factory import build_provider
from core.llm.resilience import (
    BreakerState,
    CircuitBreaker,
    CircuitOpenError,
    ResilientProvider,
)
from core.llm.scripted import ScriptedProvider

__all__ = [
    "BreakerState",
    "ChatMessage",
    "CircuitBreaker",
    "CircuitOpenError",
    "Generation",
    "GenerationOptions",
    "LLMConfig",
    "LLMError",
    "LLMProvider",
    "ResilientProvider",
    "ScriptedProvider",
    "build_provider",
]
