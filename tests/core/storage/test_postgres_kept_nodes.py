"""PostgreSQL keeps a person's latest nodes and vectors while it serves them, checked
against the person's node version: two processes (two storages on one database) serving
one person in turn each see the other's turns, an emotion read and a write that lands
while the other holds the lock; one process alone reads them from memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.storage.postgres import PostgresStorage
from core.storage.postgres.graph import KEPT_PER_ENTITY
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.conftest import statements_sent
from tests.core.storage.contract.test_contract import MODEL, unit

A = "telegram:1"
OWNERS = [A]
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
READS = ("fetch", "fetchrow", "fetchval")  # the statements that answer something


def turn(node_id: str, minutes: float) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=A,
        content=f"turn {node_id}",
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=minutes),
        chat_id="c1",
        scope="dm",
        platform_message_id=f"m-{node_id}",
    )


@pytest.fixture
async def two(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> tuple[PostgresStorage, PostgresStorage]:
    first, second = two_processes
    await first.graph.check_model(MODEL, 8)
    await second.graph.check_model(MODEL, 8)
    return first, second


async def ids(store: PostgresStorage) -> list[str]:
    return [n.id for n in await store.nodes.recent(A, limit=10)]


async def test_two_processes_serving_one_person_in_turn_see_each_others_turns(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    async with first.serving(A):
        assert await ids(first) == []
        await first.graph.add_node(turn("n1", 1), vector=unit(1), model=MODEL)
        assert await ids(first) == ["n1"]
    async with second.serving(A):
        assert await ids(second) == ["n1"]
        await second.graph.add_node(turn("n2", 2), vector=unit(2), model=MODEL)
        await second.nodes.set_emotion(A, "n1", "joy", 0.9)
    async with first.serving(A):
        assert await ids(first) == ["n1", "n2"]
        latest = await first.graph.latest_node(A, at=T0 + timedelta(hours=1))
        assert latest is not None and latest[0] == "n2"
        found = await first.nodes.by_platform_message(A, "m-n2")
        assert found is not None and found.id == "n2"
        assert [h for h, _ in await first.graph.vector_search(A, unit(2), k=1)] == ["n2"]
        (kept,) = [n for n in await first.nodes.recent(A) if n.id == "n1"]
        assert kept.emotion == "joy"


async def test_a_write_landing_while_another_process_serves_is_not_lost(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    """The other process's reply, stored after it let go of the lock, lands while this
    one serves the person: this one's next own write sees the version jump and reads the
    person's nodes again."""
    first, second = two
    async with first.serving(A):
        await first.graph.add_node(turn("n1", 1), vector=unit(1), model=MODEL)
        assert await ids(first) == ["n1"]
        await second.graph.add_node(turn("late", 2), vector=unit(2), model=MODEL)
        await first.graph.add_node(turn("n3", 3), vector=unit(3), model=MODEL)
        assert await ids(first) == ["n1", "late", "n3"]
        assert [h for h, _ in await first.graph.vector_search(A, unit(2), k=1)] == ["late"]


async def test_one_process_serving_reads_the_kept_nodes(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, _ = two
    async with first.serving(A):
        await first.graph.add_node(turn("n1", 1), vector=unit(1), model=MODEL)
        assert await ids(first) == ["n1"]  # read once, kept
        assert await first.graph.vector_search(A, unit(1), k=1) != []
    with statements_sent(first.db, READS) as statements:
        async with first.serving(A):
            await first.graph.add_node(turn("n2", 2), vector=unit(2), model=MODEL)
            assert await ids(first) == ["n1", "n2"]
            assert [h for h, _ in await first.graph.vector_search(A, unit(2), k=1)] == ["n2"]
            latest = await first.graph.latest_node(A, at=T0 + timedelta(hours=1))
            assert latest is not None and latest[0] == "n2"
    # The node written; history, vectors and the latest node from memory.
    assert len(statements) == 1 and "INSERT INTO nodes" in statements[0], statements


async def test_tag_and_entity_postings_are_kept_while_serving_and_read_after_another_process(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two

    def tagged(node_id: str, minutes: float, tags: list[str]) -> MemoryNode:
        node = turn(node_id, minutes)
        node.tags = tags
        return node

    at = T0 + timedelta(hours=1)
    async with first.serving(A):
        await first.graph.add_node(
            tagged("n1", 1, ["cats", "home"]), vector=unit(1), model=MODEL, entities=["julia"]
        )
        first_answer = await first.graph.tags_and_entities(A, ["cats"], ["julia"], at=at)
        assert first_answer == ({"n1": (1, 2)}, {"julia": ["n1"]})
        await first.graph.add_node(
            tagged("n2", 2, ["cats"]), vector=unit(2), model=MODEL, entities=["julia"]
        )
    with statements_sent(first.db, READS) as statements:
        async with first.serving(A):
            kept = await first.graph.tags_and_entities(A, ["cats"], ["julia"], at=at)
            # Before n2: what a node said earlier than the kept postings reach is asked.
            earlier = await first.graph.tags_and_entities(
                A, [], ["julia"], at=T0 + timedelta(minutes=1.5), per_entity=1
            )
    assert kept == ({"n1": (1, 2), "n2": (1, 1)}, {"julia": ["n2", "n1"]})
    assert earlier == ({}, {"julia": ["n1"]})
    assert statements == []  # both from memory
    # Another process serves the person and names Júlia again: read again after.
    async with second.serving(A):
        await second.graph.add_node(
            tagged("n3", 3, ["cats"]), vector=unit(3), model=MODEL, entities=["julia"]
        )
    async with first.serving(A):
        again = await first.graph.tags_and_entities(A, ["cats", "home"], ["julia"], at=at)
    assert again == (
        {"n1": (2, 2), "n2": (1, 1), "n3": (1, 1)},
        {"julia": ["n3", "n2", "n1"]},
    )
    # The same as PostgreSQL's own answer for a person not served.
    assert again == await second.graph.tags_and_entities(A, ["cats", "home"], ["julia"], at=at)


async def test_recalls_entity_question_is_answered_from_the_kept_postings(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    """Recall asks for an entity's mentions in the message's scopes: from memory while the
    person is served, from PostgreSQL when what is kept cannot tell (the kept depth holds
    only other scopes' mentions, older ones may be in the asked scope)."""
    first, _ = two

    def naming(node_id: str, minutes: float, scope: str) -> MemoryNode:
        node = turn(node_id, minutes)
        node.scope = node.chat_id = scope
        return node

    at = T0 + timedelta(days=1)
    await first.graph.add_node(naming("dm0", 0, "dm"), vector=None, model=MODEL, entities=["julia"])
    for i in range(KEPT_PER_ENTITY):
        await first.graph.add_node(
            naming(f"g{i}", 1 + i / 100, "g1"), vector=None, model=MODEL, entities=["julia"]
        )
    async with first.serving(A):
        assert await first.graph.entity_mentions(A, ["julia"], scopes=["g1"], at=at, per_entity=2)
        with statements_sent(first.db, READS) as statements:
            in_group = await first.graph.entity_mentions(
                A, ["julia", "nobody"], scopes=["g1"], at=at, per_entity=2
            )
        assert in_group == {"julia": [f"g{KEPT_PER_ENTITY - 1}", f"g{KEPT_PER_ENTITY - 2}"]}
        assert statements == []  # from memory
        with statements_sent(first.db, READS) as statements:
            in_dm = await first.graph.entity_mentions(A, ["julia"], scopes=["dm"], at=at)
        assert in_dm == {"julia": ["dm0"]}
        assert len(statements) == 1  # the kept 200 are all the group's: asked


async def test_after_another_process_one_statement_reads_nodes_vectors_and_postings_again(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    at = T0 + timedelta(hours=1)

    def tagged(node_id: str, minutes: float) -> MemoryNode:
        node = turn(node_id, minutes)
        node.tags = ["cats"]
        return node

    async with first.serving(A):
        await first.graph.add_node(tagged("n1", 1), vector=unit(1), model=MODEL, entities=["julia"])
        assert await ids(first) == ["n1"]
        assert await first.graph.tags_and_entities(A, ["cats"], ["julia"], at=at) == (
            {"n1": (1, 1)},
            {"julia": ["n1"]},
        )
        assert await first.graph.vector_search(A, unit(1), k=1) != []
    async with second.serving(A):
        await second.graph.add_node(
            tagged("n2", 2), vector=unit(2), model=MODEL, entities=["julia"]
        )
    with statements_sent(first.db, READS) as statements:
        async with first.serving(A):
            assert await ids(first) == ["n1", "n2"]
            postings = await first.graph.tags_and_entities(A, ["cats"], ["julia"], at=at)
            found = await first.graph.vector_search(A, unit(2), k=1)
    assert postings == ({"n1": (1, 1), "n2": (1, 1)}, {"julia": ["n2", "n1"]})
    assert [h for h, _ in found] == ["n2"]
    assert len(statements) == 1, statements  # the latest nodes, the new vector, the postings
