"""Tag postings (``graph_tags``): where shared-tag connections find their candidates."""

from __future__ import annotations

from core.storage import SQLiteStorage
from tests.core.storage.conftest import turn

ANA, BIA = "telegram:1", "discord:2"
OWNERS = (ANA, BIA)


async def test_candidates_count_tags_in_common_among_each_tags_latest_postings(
    storage: SQLiteStorage,
) -> None:
    many = [f"tag{n}" for n in range(40)]  # more tags than one statement reads
    await storage.graph.add_node(turn("a1", ANA, tags=many, minutes=0), vector=None, model="test")
    await storage.graph.add_node(
        turn("a2", ANA, tags=["saude", "tag39"], minutes=1), vector=None, model="test"
    )
    await storage.graph.add_node(
        turn("a3", ANA, tags=["saude"], minutes=2), vector=None, model="test"
    )
    await storage.graph.add_node(turn("b1", BIA, tags=many, minutes=3), vector=None, model="test")

    found = await storage.graph.tag_candidates(ANA, [*many, "saude", "saude"])
    assert found == {"a1": (40, 40), "a2": (2, 2), "a3": (1, 1)}
    # Only the latest postings of each tag: "saude" reads a3 alone, tag39 a2 alone.
    assert await storage.graph.tag_candidates(ANA, ["saude", "tag39"], per_tag=1) == {
        "a3": (1, 1),
        "a2": (1, 2),
    }
    assert await storage.graph.tag_candidates(BIA, ["saude"]) == {}
    assert await storage.graph.tag_candidates(ANA, []) == {}
