"""What the memory graph's storage hands back, whatever the backend: edges with both
ends known, where and when a node was said, and the error for vectors of another model."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.storage.errors import StorageError
from core.storage.records import Connection, MemoryNode


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


def storable_connections(node: MemoryNode, connections: Sequence[Connection]) -> list[Connection]:
    """The edges a stored node gets, one per (target, relation) (the table's key: the
    last given wins): never to itself, never with a NaN strength (stored as NULL, it would
    fail the whole write)."""
    kept = {
        (c.node_id, c.relation_type): c
        for c in connections
        if c.node_id != node.id and math.isfinite(c.strength)
    }
    return list(kept.values())


# The columns of an edge as both backends store and export them.
EDGE_COLUMNS = "from_id, to_id, relation_type, strength, explanation"


def edges_export(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Edge rows (:data:`EDGE_COLUMNS`) as a person's export shows them."""
    return [
        {
            "from": r[0],
            "to": r[1],
            "relation_type": r[2],
            "strength": round(float(r[3]), 4),
            "explanation": r[4],
        }
        for r in rows
    ]
