"""What the memory graph's storage hands back, whatever the backend: edges with both
ends known, where and when a node was said, and the error for vectors of another model."""

from __future__ import annotations

from dataclasses import dataclass

from core.storage.errors import StorageError


class EmbeddingModelMismatch(StorageError):
    """The database holds vectors of another embedding model than the configured one."""


@dataclass(frozen=True, slots=True)
class Edge:
    """A stored connection seen from the graph (both ends known)."""

    from_id: str
    to_id: str
    relation_type: str
    strength: float
    explanation: str = ""

    def other(self, node_id: str) -> str:
        return self.to_id if node_id == self.from_id else self.from_id


@dataclass(frozen=True, slots=True)
class NodePlace:
    """When (epoch seconds) and in which privacy scope a node was said."""

    ts: float
    scope: str
