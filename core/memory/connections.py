"""Connection detection: which earlier nodes a new node links to, and how strongly.

Four kinds, each found through an index so a message's cost does not grow with the
person's history:

- ``reply_to`` (0.9): the node answers a stored platform message (``node.reply_to``).
- ``follow_up`` (0.95): the owner's most recent node, when it is at most two hours older.
  Beyond that window the most recent node is still linked as ``resumes`` (0.5): "Ficou
  melhor?" thirty days later picks up where the person left off.
- ``shared_tags`` (common / max of the two tag counts): candidates from the tag postings,
  only the latest ``per_tag`` of each tag.
- ``same_entity`` (0.7, +0.1 a further entity in common): the latest earlier nodes naming
  a person, pet, place or project the node names (core.memory.entities), from the entity
  postings: "a Júlia vai casar" reaches "a Júlia (minha irmã) ...".
- ``similar`` (the cosine): vector top-k over the owner's cached matrix, above a threshold
  calibrated per embedding model (see :data:`SIMILARITY_THRESHOLDS`), among the latest
  ``similar_window`` nodes: older ones are still found by search, but storing a message
  must cost the same after 10k messages as after 100k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from core.memory.entities import Mentions, extract_entities
from core.storage.api import GraphStore, NodeStore
from core.storage.records import Connection, MemoryNode

# Cosine above which two nodes count as "similar", per embedding model.
#
# multilingual-e5-small: every pair of texts sits between ~0.7 and 1.0, so a naive 0.7
# would link everything. Calibrated on LoCoMo (benchmarks/locomo.py --calibrate: the 3 dev
# conversations, turns embedded as stored, "Speaker: text" after the previous turn): over
# random pairs of turns of one conversation the median cosine is 0.876, the 99th
# percentile 0.938; pairs of turns cited together as evidence for one question have median
# 0.891 (barely above random). 0.935 passes 1.4% of random pairs and 5.4% of evidence
# pairs: few, fairly specific links (top-k caps them at 5 a node).
# hashing-256: random pairs median 0.41, 99th percentile 0.66 (same procedure); 0.66.
SIMILARITY_THRESHOLDS: dict[str, float] = {
    "multilingual-e5-small-q4": 0.935,
    "hashing-256": 0.66,
}
DEFAULT_SIMILARITY_THRESHOLD = 0.85  # unknown models: conservative for e5-like spreads


# How much a query-to-node cosine says, per model: (noise level, clearly related). Below
# the first a vector hit is no search seed; between the two its rank score is scaled.
# multilingual-e5-small on LoCoMo: question vs. random turn median 0.793 (90th pct 0.828),
# vs. an evidence turn median 0.840 (10th pct 0.801).
# hashing-256 on LoCoMo: question vs. random turn median 0.17, vs. an evidence turn median
# 0.24; short Portuguese lines that share only a function word reach 0.3 ("Fico nervoso
# em grupos" / "Minha irmã vai casar em junho": 0.32), so the range starts above the
# LoCoMo noise median and is wide.
SEED_RANGES: dict[str, tuple[float, float]] = {
    "multilingual-e5-small-q4": (0.78, 0.86),
    "hashing-256": (0.2, 0.6),
}


def seed_range(model: str) -> tuple[float, float]:
    if model in SEED_RANGES:
        return SEED_RANGES[model]
    if model.startswith("hashing-"):
        return SEED_RANGES["hashing-256"]
    return (0.0, 0.5)


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
    similar_window: int = 10_000  # latest nodes considered for "similar" links
    similar_threshold: float | None = None  # None: by model (SIMILARITY_THRESHOLDS)
    resume: bool = True
    extra: dict[str, float] = field(default_factory=dict)
    # Entities (core.memory.entities): postings are written and same_entity edges made.
    entities: bool = True
    entity_strength: float = 0.7
    # An entity named this many times before names too much of the history to tell
    # its messages apart (a speaker's own name, "my mom" in years of chat): no edges.
    entity_common: int = 30
    entity_max_links: int = 5


class ConnectionDetector:
    def __init__(
        self,
        graph: GraphStore,
        nodes: NodeStore,
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

    async def links(
        self, node: MemoryNode, vector: np.ndarray | None
    ) -> tuple[list[Connection], list[str]]:
        """The connections from ``node`` (not stored yet) to earlier nodes of its owner,
        its ``same_entity`` edges among them (those not already there), and the entity
        keys to store as postings: the tags' and the entities' earlier postings read
        together (GraphStore.tags_and_entities)."""
        cfg = self.config
        mentions = extract_entities(node.content) if cfg.entities else None
        keys = [*mentions.definite, *mentions.tentative] if mentions else []
        candidates, earlier = await self.graph.tags_and_entities(
            node.owner,
            node.tags,
            keys,
            per_tag=cfg.tag_per_tag,
            per_entity=cfg.entity_common,
            at=node.timestamp,
        )
        connections = await self._detect(node, vector, candidates)
        entities, links = self._entity_links(node, mentions, earlier)
        if links:
            known = {(c.node_id, c.relation_type) for c in connections}
            connections += [c for c in links if (c.node_id, c.relation_type) not in known]
        return connections, entities

    async def _detect(
        self,
        node: MemoryNode,
        vector: np.ndarray | None,
        candidates: dict[str, tuple[int, int]] | None,
    ) -> list[Connection]:
        """Connections from ``node`` (not stored yet) to earlier nodes of its owner;
        ``candidates``: its tags' earlier postings (GraphStore.tag_candidates)."""
        cfg = self.config
        found: dict[tuple[str, str], Connection] = {}

        def add(conn: Connection) -> None:
            key = (conn.node_id, conn.relation_type)
            if conn.node_id != node.id and key not in found:
                found[key] = conn

        # Index lookups, answered on the spot (no thread hop): awaited one by one, as
        # gathering them would only add a task each.
        target = (
            await self.nodes.by_platform_message(node.owner, node.reply_to)
            if node.reply_to
            else None
        )
        # The latest node, and the person's own latest message of the same type when a
        # reply sits in between: msg -> reply -> msg chains stay two hops short.
        latest_any = await self.graph.latest_node(node.owner, at=node.timestamp, exclude=node.id)
        latest_same = await self.graph.latest_node(
            node.owner, at=node.timestamp, exclude=node.id, node_type=node.type.value
        )
        if target is not None and target.id != node.id:
            add(
                Connection(
                    target.id,
                    "reply_to",
                    cfg.reply_strength,
                    f"answers message {node.reply_to}",
                )
            )
        for item in (latest_any, latest_same):
            if item is None:
                continue
            latest_id, latest_at = item
            gap = node.timestamp - latest_at
            if gap <= cfg.follow_up_window:
                minutes = int(gap.total_seconds() // 60)
                add(
                    Connection(
                        latest_id, "follow_up", cfg.follow_up_strength, f"{minutes} min later"
                    )
                )
            elif cfg.resume:
                add(
                    Connection(
                        latest_id,
                        "resumes",
                        cfg.resume_strength,
                        f"first message after {gap.days} day(s)",
                    )
                )

        if candidates:
            mine = len(set(node.tags))
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
                node.owner,
                vector,
                k=cfg.similar_k,
                exclude=[node.id],
                at=node.timestamp,
                newest=cfg.similar_window,
            )
            for node_id, sim in hits:
                if sim >= self.threshold:
                    add(Connection(node_id, "similar", round(sim, 4), f"cosine {sim:.3f}"))
        return list(found.values())

    def _entity_links(
        self, node: MemoryNode, mentions: Mentions | None, earlier: dict[str, list[str]]
    ) -> tuple[list[str], list[Connection]]:
        """The entity keys ``node`` names (to store as postings) and its ``same_entity``
        edges to the latest earlier nodes naming them (``earlier``: the entities'
        postings). A tentative name (a capital at the start of a sentence) counts only
        when the person named it before."""
        cfg = self.config
        if not mentions:
            return [], []
        named = [*mentions.definite, *(t for t in mentions.tentative if t in earlier)]
        shared: dict[str, list[str]] = {}
        order: dict[str, int] = {}  # how recent a candidate is among its entity's mentions
        for entity in named:
            mentions_before = earlier.get(entity, [])
            if len(mentions_before) >= cfg.entity_common:
                continue
            for rank, node_id in enumerate(mentions_before):
                if node_id == node.id:
                    continue
                shared.setdefault(node_id, []).append(entity)
                order[node_id] = min(order.get(node_id, rank), rank)
        best = sorted(shared, key=lambda i: (-len(shared[i]), order[i], i))
        links = [
            Connection(
                node_id,
                "same_entity",
                round(min(1.0, cfg.entity_strength + 0.1 * (len(shared[node_id]) - 1)), 4),
                "names " + ", ".join(shared[node_id]),
            )
            for node_id in best[: cfg.entity_max_links]
        ]
        return named, links
