"""Connection detection: which earlier nodes a new node links to, and how strongly.

Four kinds, each found through an index so a message's cost does not grow with the
person's history:

- ``reply_to`` (0.9): the node answers a stored platform message (``node.reply_to``).
- ``follow_up`` (0.95): the owner's most recent node, when it is at most two hours older.
  Beyond that window the most recent node is still linked as ``resumes`` (0.5): "Ficou
  melhor?" thirty days later picks up where the person left off.
- ``shared_tags`` (common / max of the two tag counts): candidates from the tag postings,
  only the latest ``per_tag`` of each tag.
- ``similar`` (the cosine): vector top-k over the owner's cached matrix, above a threshold
  calibrated per embedding model (see :data:`SIMILARITY_THRESHOLDS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from core.storage.records import Connection, MemoryNode
from core.storage.sqlite_graph import GraphStore
from core.storage.sqlite_nodes import SQLiteNodeStore

# Cosine above which two nodes count as "similar", per embedding model.
#
# multilingual-e5-small: every pair of texts sits between ~0.7 and 1.0, so a naive 0.7
# would link everything. Calibrated on LoCoMo (benchmarks/locomo.py --calibrate, the 3
# dev conversations, texts as stored: "Speaker: turn"): over random pairs of turns of one
# conversation the median cosine is 0.80 and the 99th percentile 0.873; pairs of turns
# cited together as evidence for one question have median 0.843. 0.875 keeps about 1% of
# random pairs (a handful of links per node at 1k nodes, and top-k caps it) while ~22% of
# evidence pairs pass.
# hashing-256 (tests, installs without ML): random pairs median 0.03, 99th percentile
# 0.21; 0.22 is the same 1% cut.
SIMILARITY_THRESHOLDS: dict[str, float] = {
    "multilingual-e5-small-q4": 0.875,
    "hashing-256": 0.22,
}
DEFAULT_SIMILARITY_THRESHOLD = 0.85  # unknown models: conservative for e5-like spreads


def similarity_threshold(model: str) -> float:
    if model in SIMILARITY_THRESHOLDS:
        return SIMILARITY_THRESHOLDS[model]
    if model.startswith("hashing-"):
        return SIMILARITY_THRESHOLDS["hashing-256"]
    return DEFAULT_SIMILARITY_THRESHOLD


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    follow_up_window: timedelta = timedelta(hours=2)
    follow_up_strength: float = 0.95
    resume_strength: float = 0.5
    reply_strength: float = 0.9
    tag_min_strength: float = 0.34  # at least one tag in three in common
    tag_per_tag: int = 50  # postings read per tag (the latest ones)
    tag_max_links: int = 5
    similar_k: int = 5
    similar_threshold: float | None = None  # None: by model (SIMILARITY_THRESHOLDS)
    resume: bool = True
    extra: dict[str, float] = field(default_factory=dict)


class ConnectionDetector:
    def __init__(
        self,
        graph: GraphStore,
        nodes: SQLiteNodeStore,
        model: str,
        config: ConnectionConfig | None = None,
    ) -> None:
        self.graph = graph
        self.nodes = nodes
        self.config = config or ConnectionConfig()
        self.threshold = (
            self.config.similar_threshold
            if self.config.similar_threshold is not None
            else similarity_threshold(model)
        )

    async def detect(self, node: MemoryNode, vector: np.ndarray | None) -> list[Connection]:
        """Connections from ``node`` (not stored yet) to earlier nodes of its owner."""
        cfg = self.config
        found: dict[tuple[str, str], Connection] = {}

        def add(conn: Connection) -> None:
            key = (conn.node_id, conn.relation_type)
            if conn.node_id != node.id and key not in found:
                found[key] = conn

        if node.reply_to:
            target = await self.nodes.by_platform_message(node.owner, node.reply_to)
            if target is not None and target.id != node.id:
                add(
                    Connection(
                        target.id,
                        "reply_to",
                        cfg.reply_strength,
                        f"answers message {node.reply_to}",
                    )
                )

        latest = await self.graph.latest_node(node.owner, at=node.timestamp, exclude=node.id)
        if latest is not None:
            latest_id, latest_at = latest
            gap = node.timestamp - latest_at
            if gap <= cfg.follow_up_window:
                minutes = int(gap.total_seconds() // 60)
                add(
                    Connection(
                        latest_id, "follow_up", cfg.follow_up_strength, f"{minutes} min later"
                    )
                )
            elif cfg.resume:
                days = gap.days
                add(
                    Connection(
                        latest_id,
                        "resumes",
                        cfg.resume_strength,
                        f"first message after {days} day(s)",
                    )
                )

        if node.tags:
            mine = len(set(node.tags))
            candidates = await self.graph.tag_candidates(
                node.owner, node.tags, per_tag=cfg.tag_per_tag
            )
            scored = sorted(
                (
                    (common / max(mine, ntags), node_id, common)
                    for node_id, (common, ntags) in candidates.items()
                ),
                reverse=True,
            )
            for strength, node_id, common in scored[: cfg.tag_max_links]:
                if strength >= cfg.tag_min_strength:
                    add(
                        Connection(
                            node_id, "shared_tags", round(strength, 4), f"{common} tag(s) in common"
                        )
                    )

        if vector is not None and cfg.similar_k > 0:
            hits = await self.graph.vector_search(
                node.owner, vector, k=cfg.similar_k, exclude=[node.id], at=node.timestamp
            )
            for node_id, sim in hits:
                if sim >= self.threshold:
                    add(Connection(node_id, "similar", round(sim, 4), f"cosine {sim:.3f}"))
        return list(found.values())
