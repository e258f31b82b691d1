"""Fixtures for the memory tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.memory.query import QueryConfig
from core.storage import MemoryNode, NodeType, SQLiteStorage

# Everyday lines sharing no topic with anything a recall test asks for.
CHATTER_PT = [
    "que calor hoje, o ventilador não dá conta",
    "o trânsito tava um caos, levei uma hora",
    "assisti um filme bobo ontem à noite",
    "acabou a internet aqui em casa de novo",
    "comprei um fone novo, o antigo quebrou",
    "a reunião podia ter sido um email",
    "fiz uma faxina geral no apartamento",
    "o ônibus atrasou quarenta minutos",
]


async def store_lines(
    memory: GraphMemory, owner: str, chat_id: str, lines: Sequence[tuple[datetime, str, str]]
) -> None:
    """Stores (time, id, text) as the person's messages, through the store path."""
    for at, node_id, text in lines:
        node = MemoryNode(node_id, owner, text, NodeType.USER_MESSAGE, at, chat_id=chat_id)
        await memory.store(node)


def memory_with(storage: SQLiteStorage, **query: object) -> GraphMemory:
    """The hashing embedder and the defaults, but for the ``query`` settings given (None:
    the default kept)."""
    changed = {k: v for k, v in query.items() if v is not None}
    config = GraphConfig(query=replace(QueryConfig(), **changed))  # type: ignore[arg-type]
    return GraphMemory(storage, HashingEmbedder(), config=config)


def said(owner: str, node_id: str, text: str, at: datetime, chat_id: str) -> MemoryNode:
    """One of the person's messages in a private chat."""
    return MemoryNode(node_id, owner, text, NodeType.USER_MESSAGE, at, chat_id=chat_id)


async def ranked(memory: GraphMemory, message: MemoryNode, limit: int = 5) -> list[str]:
    """Stores the message, then the ids conversational recall finds for it (at its time,
    itself excluded), best first."""
    await memory.store(message)
    return await recalled(memory, message, limit)


async def recalled(memory: GraphMemory, message: MemoryNode, limit: int = 5) -> list[str]:
    """The ids conversational recall finds for the already stored ``message`` (at its
    time, itself excluded), best first."""
    recall = await memory.recall(
        message.owner,
        message.content,
        scopes=None,
        limit=limit,
        exclude_ids=[message.id],
        at=message.timestamp,
    )
    return [r.node.id for r in recall.nodes]
