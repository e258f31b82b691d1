"""LLM providers behind one interface (:class:`LLMProvider`)."""

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider
from core.llm.scripted import ScriptedProvider

__all__ = ["ChatMessage", "Generation", "GenerationOptions", "LLMError", "LLMProvider", "ScriptedProvider"]
