"""Fixtures for the memory tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType


async def store_lines(
    memory: GraphMemory, owner: str, chat_id: str, lines: Sequence[tuple[datetime, str, str]]
) -> None:
    """Stores (time, id, text) as the person's messages, through the store path."""
    for at, node_id, text in lines:
        node = MemoryNode(node_id, owner, text, NodeType.USER_MESSAGE, at, chat_id=chat_id)
        await memory.store(node)
