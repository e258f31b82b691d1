"""Tag postings (``graph_tags``): where shared-tag connections find their candidates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.storage import SQLiteStorage
from core.storage.records import MemoryNode, NodeType

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
ANA, BIA = "telegram:1", "discord:2"
OWNERS = (ANA, BIA)


def tagged(node_id: str, owner: str, tags: list[str], minutes: int) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=f"turn {node_id}",
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=minutes),
        tags=tags,
    )


async def test_candidates_count_tags_in_common_among_each_tags_latest_postings(
    storage: SQLiteStorage,
) -> None:
    many = [f"tag{n}" for n in range(40)]  # more tags than one statement reads
    await storage.graph.add_node(tagged("a1", ANA, many, 0), vector=None, model="test")
    await storage.graph.add_node(
        tagged("a2", ANA, ["saude", "tag39"], 1), vector=None, model="test"
    )
    await storage.graph.add_node(tagged("a3", ANA, ["saude"], 2), vector=None, model="test")
    await storage.graph.add_node(tagged("b1", BIA, many, 3), vector=None, model="test")

    found = await storage.graph.tag_candidates(ANA, [*many, "saude", "saude"])
    assert found == {"a1": (40, 40), "a2": (2, 2), "a3": (1, 1)}
    # Only the latest postings of each tag: "saude" reads a3 alone, tag39 a2 alone.
    assert await storage.graph.tag_candidates(ANA, ["saude", "tag39"], per_tag=1) == {
        "a3": (1, 1),
        "a2": (1, 2),
    }
    assert await storage.graph.tag_candidates(BIA, ["saude"]) == {}
    assert await storage.graph.tag_candidates(ANA, []) == {}
