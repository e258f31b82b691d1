"""The conversation-memory interface the pipeline stores to and recalls from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.storage.api import Storage
from core.storage.records import MemoryNode


@dataclass(frozen=True, slots=True)
class RecalledNode:
    """A node found for a query, with the reason it was included."""

    node: MemoryNode
    score: float
    reason: str  # "direct match" or "via <relation> from <node id>"
    depth: int = 0
    via_node_id: str | None = None
    via_relation: str | None = None


@dataclass(slots=True)
class Recall:
    nodes: list[RecalledNode] = field(default_factory=list)


class ConversationMemory(ABC):
    """Stores every message as a node and finds what matters for a new one."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def check(self) -> None:
        """Raise when the stored memory cannot serve this configuration (the graph: vectors
        of another embedding model), so a bot fails at start, not at every message."""

    async def warm_up(self) -> None:
        """Load what the first message would otherwise wait for (a model's weights, the
        topic vectors), at start, while nobody waits."""

    @abstractmethod
    async def store(self, node: MemoryNode) -> bool:
        """Persist a node (tags, embedding, connections as the implementation can);
        False when it was a duplicate (same owner and ``source_id``)."""

    async def store_first(self, node: MemoryNode) -> bool:
        """Store a person's message so that it is kept (and duplicates refused) before
        this returns; what storing adds to it (a vector, connections) may follow off the
        caller's path, before the owner's next message. Here: :meth:`store`."""
        return await self.store(node)

    async def store_many(self, nodes: Sequence[MemoryNode]) -> list[bool]:
        """Bulk store (imports); implementations batch embeddings and transactions."""
        return [await self.store(node) for node in nodes]

    async def store_later(self, node: MemoryNode) -> None:
        """Store ``node`` off the caller's path (a reply, once delivered): the owner's
        next :meth:`store` waits for it, :meth:`settle` waits for all. Here: at once."""
        await self.store(node)

    async def settle(self) -> None:
        """Wait until every :meth:`store_later` has landed (before storage closes)."""

    async def settle_owner(self, owner: str) -> None:
        """Wait until what is being stored of ``owner`` off their path has landed (a
        command reads or erases their data). Here: nothing is."""

    async def then(self, owner: str, work: Awaitable[object], what: str) -> None:
        """Run ``work`` once what is being stored of ``owner`` has landed (it may read
        what storing adds to a node: its tags). Here: at once."""
        await work

    @abstractmethod
    async def recall(
        self,
        owner: str,
        query: str,
        *,
        scopes: Sequence[str] | None,
        limit: int = 8,
        exclude_ids: Sequence[str] = (),
        at: datetime | None = None,
    ) -> Recall:
        """Nodes of ``owner`` relevant to ``query``, only from ``scopes`` (None = all)."""


class PlainMemory(ConversationMemory):
    """Stores nodes without embeddings or links and recalls nothing beyond the recent
    turns the prompt already holds: the engine's memory before the graph is configured."""

    async def store(self, node: MemoryNode) -> bool:
        return await self.storage.nodes.add(node)

    async def store_many(self, nodes: Sequence[MemoryNode]) -> list[bool]:
        """Imports: each node announced to the other processes sharing the database (see
        NodeStore.add), which may be serving these people right now."""
        return [await self.storage.nodes.add(node, announce=True) for node in nodes]

    async def recall(
        self,
        owner: str,
        query: str,
        *,
        scopes: Sequence[str] | None,
        limit: int = 8,
        exclude_ids: Sequence[str] = (),
        at: datetime | None = None,
    ) -> Recall:
        return Recall()
