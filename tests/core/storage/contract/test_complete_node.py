"""A node stored first and given its vector, tags, entity postings and connections after
it (GraphStore.complete_node: a person's message is stored before its vector is
computed, core.memory.graph), on every backend."""

from __future__ import annotations

from datetime import timedelta

from core.storage import Connection, Storage
from tests.core.storage.contract.conftest import Opener
from tests.core.storage.contract.test_contract import MODEL, T0, A, B, node, unit


def cache_info(storage: Storage) -> dict[str, int]:
    info: dict[str, int] = storage.graph.cache_info()  # type: ignore[attr-defined]
    return info


async def test_a_node_stored_without_its_vector_gets_it_later(
    opener: Opener, storage: Storage
) -> None:
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    async with storage.serving(A, sent_at=T0):
        assert await graph.add_node(node("c1", tags=["music"]), vector=unit(1), model=MODEL)
        assert [h for h, _ in await graph.vector_search(A, unit(1), k=5)] == ["c1"]
        kept = cache_info(storage)
        # The row alone: the duplicate check is its insert.
        late = node("c2", content="the violin again", minutes=1, source_id="m2")
        assert await graph.add_node(late, vector=None, model=MODEL)
        assert not await graph.add_node(
            node("c2b", minutes=1, source_id="m2"), vector=None, model=MODEL
        )
        found = await storage.nodes.get(A, "c2")
        assert found is not None and found.tags == []
        assert [n.id for n in await storage.nodes.recent(A, limit=5)] == ["c1", "c2"]
        # Not searchable by vector yet, and the owner's kept matrix is still there.
        assert [h for h, _ in await graph.vector_search(A, unit(2), k=5)] == ["c1"]
        assert cache_info(storage)["rows"] == kept["rows"] == 1
        assert await graph.node_count_with_vectors(A) == 1

        late.tags = ["music", "violin"]
        assert await graph.complete_node(
            late,
            vector=unit(2),
            model=MODEL,
            connections=[Connection("c1", "follow_up", 0.8, "next turn")],
            entities=["violin"],
        )
        hits = await graph.vector_search(A, unit(2), k=5)
        assert hits[0][0] == "c2" and {h for h, _ in hits} == {"c1", "c2"}
        assert cache_info(storage)["rows"] == 2  # appended to, not read again
        edges, _ = await graph.neighbours(A, ["c1"])
        assert {(e.from_id, e.to_id, e.relation_type) for e in edges} == {("c2", "c1", "follow_up")}
        assert await graph.tag_candidates(A, ["violin"]) == {"c2": (1, 2)}
        assert await graph.entity_mentions(A, ["violin"]) == {"violin": ["c2"]}
        kept_node = (await storage.nodes.recent(A, limit=1))[0]
        assert kept_node.id == "c2" and kept_node.tags == ["music", "violin"]
    # The same for another process reading the database.
    async with opener() as other:
        assert (await other.graph.vector_search(A, unit(2), k=1))[0][0] == "c2"
        stored = await other.nodes.get(A, "c2")
        assert stored is not None and stored.tags == ["music", "violin"]
        assert [c.node_id for c in await other.graph.connections_of(A, "c2")] == ["c1"]
        assert await other.graph.node_count_with_vectors(A) == 2


async def test_completing_writes_nothing_for_another_owners_or_a_forgotten_node(
    storage: Storage,
) -> None:
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    assert await graph.add_node(node("f1"), vector=unit(1), model=MODEL)
    waiting = node("f2", minutes=1, tags=["secret"])
    assert await graph.add_node(waiting, vector=None, model=MODEL)
    # Another owner's node of that id: nothing written, for either of them.
    stranger = node("f2", B, minutes=1, tags=["secret"])
    assert not await graph.complete_node(stranger, vector=unit(2), model=MODEL)
    assert await graph.node_count_with_vectors(B) == 0
    assert await graph.node_count_with_vectors(A) == 1
    # The export has the node whose vector is still to come.
    export = await storage.export_owner(A)
    assert [m["id"] for m in export["messages"]] == ["f1", "f2"]
    await storage.forget_owner(A)
    # A vector computed before the person was forgotten arrives after: nothing stays.
    assert not await graph.complete_node(
        waiting,
        vector=unit(2),
        model=MODEL,
        connections=[Connection("f1", "follow_up", 0.8)],
        entities=["thor"],
    )
    assert await graph.node_count_with_vectors(A) == 0
    assert await graph.vector_search(A, unit(2), k=5) == []
    assert await graph.edges(A, ["f1", "f2"]) == []
    assert await graph.tag_candidates(A, ["secret"]) == {}
    assert await graph.entity_mentions(A, ["thor"]) == {}
    assert await storage.nodes.count(A) == 0


async def test_a_walk_stays_in_memory_across_a_late_vector(storage: Storage) -> None:
    """The kept matrix read while a node waits for its vector (a recall between the row
    and the vector) still holds every edge after it: the node brought none yet, and
    complete_node adds its own."""
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    async with storage.serving(A, sent_at=T0):
        assert await graph.add_node(node("w1"), vector=unit(1), model=MODEL)
    storage.drop_cached(A)
    async with storage.serving(A, sent_at=T0 + timedelta(minutes=1)):
        waiting = node("w2", minutes=1)
        assert await graph.add_node(waiting, vector=None, model=MODEL)
        # A fresh matrix, read while w2 has no vector.
        assert [h for h, _ in await graph.vector_search(A, unit(1), k=5)] == ["w1"]
        assert await graph.complete_node(
            waiting,
            vector=unit(2),
            model=MODEL,
            connections=[Connection("w1", "follow_up", 0.8)],
        )
        assert [h for h, _ in await graph.vector_search(A, unit(2), k=1)] == ["w2"]
        edges, places = await graph.neighbours(A, ["w1"])
        assert [(e.from_id, e.to_id) for e in edges] == [("w2", "w1")]
        assert set(places) == {"w1", "w2"}
        vectors = storage.graph._cache[A]  # type: ignore[attr-defined]
        walkable = getattr(vectors, "vectors", vectors)
        assert walkable.walkable
