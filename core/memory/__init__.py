"""Long-term memory: the conversation graph and structured memories."""

from core.memory.base import ConversationMemory, PlainMemory, Recall, RecalledNode

__all__ = ["ConversationMemory", "PlainMemory", "Recall", "RecalledNode"]
