"""The latest nodes each person keeps in memory answer exactly what SQLite would."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage
from core.storage.sqlite_nodes import LATEST_PER_OWNER

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
OWNER = "telegram:1"
OTHER = "telegram:2"
OWNERS = (OWNER, OTHER)


def make_node(i: int, rng: random.Random, owner: str = OWNER) -> MemoryNode:
    # Times go back and forth and repeat (imports, clock skew): the order SQLite keeps
    # (time, then insertion) is what the memory must keep too.
    minutes = rng.choice([i, i, i - 30, i // 4 * 4])
    chat = rng.choice(["dm-1", "dm-1", "group-a", "group-b"])
    return MemoryNode(
        id=f"{owner}-n{i}",
        owner=owner,
        content=f"message {i}",
        type=rng.choice([NodeType.USER_MESSAGE, NodeType.AKIRA_RESPONSE]),
        timestamp=T0 + timedelta(minutes=minutes),
        chat_id=chat,
        chat_kind="dm" if chat.startswith("dm") else "group",
        scope="dm" if chat.startswith("dm") else chat,
        platform_message_id=f"p{i % 7}",
        tags=[f"t{i % 3}"],
    )


async def answers(storage: SQLiteStorage, rng: random.Random) -> list[object]:
    """The same questions every hot path asks, with random bounds."""
    nodes, graph = storage.nodes, storage.graph
    at = T0 + timedelta(minutes=rng.randint(-40, 120))
    out: list[object] = [
        await nodes.recent(OWNER, limit=rng.randint(1, 8), chat_id=rng.choice(["dm-1", "group-a"])),
        await nodes.recent(OWNER, limit=3, scopes=[rng.choice(["dm", "group-b"])]),
        await nodes.recent(OWNER, limit=4, before=at),
        await nodes.recent(OWNER, limit=2, scopes=[]),
        await nodes.by_platform_message(OWNER, f"p{rng.randint(0, 8)}"),
        await graph.latest_node(OWNER, at=at),
        await graph.latest_node(OWNER, at=at, exclude=f"{OWNER}-n{rng.randint(0, 80)}"),
        await graph.latest_node(OWNER, at=at, node_type=NodeType.AKIRA_RESPONSE.value),
        await graph.previous_in_chat(
            OWNER,
            rng.choice(["dm-1", "group-b"]),
            at=at,
            since=at - timedelta(minutes=rng.choice([5, 30, 200])),
            limit=rng.randint(1, 3),
        ),
    ]
    return out


async def test_kept_latest_nodes_answer_like_sqlite(storage: SQLiteStorage) -> None:
    rng = random.Random(7)
    compared = 0
    for i in range(LATEST_PER_OWNER * 3):
        assert await storage.nodes.add(make_node(i, rng))
        if i % 9 == 0:
            await storage.nodes.add(make_node(i, rng, owner=OTHER))
        if i % 5 == 0:
            seed = rng.random()
            kept = await answers(storage, random.Random(seed))
            storage.nodes._forget_latest()  # the same questions, answered by SQLite
            from_sql = await answers(storage, random.Random(seed))
            assert kept == from_sql, f"after {i + 1} nodes"
            compared += 1
            # Reloaded from SQLite on the next question, then kept up to date again.
    assert compared > 10
    # Nothing of the other person ever shows up.
    for node in await storage.nodes.recent(OWNER, limit=100):
        assert node.owner == OWNER


async def test_emotion_set_later_and_forgetting_are_seen(storage: SQLiteStorage) -> None:
    rng = random.Random(1)
    for i in range(5):
        await storage.nodes.add(make_node(i, rng))
    newest = (await storage.nodes.recent(OWNER, limit=1))[0]
    await storage.nodes.set_emotion(OWNER, newest.id, "triste", 0.8)
    again = (await storage.nodes.recent(OWNER, limit=1))[0]
    assert (again.emotion, again.emotion_score) == ("triste", 0.8)
    # Callers may change what they get: the kept copy does not change with it.
    again.tags.append("changed")
    assert "changed" not in (await storage.nodes.recent(OWNER, limit=1))[0].tags
    await storage.forget_owner(OWNER)
    assert await storage.nodes.recent(OWNER, limit=5) == []
    assert await storage.graph.latest_node(OWNER, at=T0 + timedelta(days=1)) is None


async def test_graph_store_keeps_the_latest_nodes_up_to_date(storage: SQLiteStorage) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    rng = random.Random(3)
    await storage.nodes.recent(OWNER, limit=1)  # loaded (empty, complete) before storing
    for i in range(6):
        assert await memory.store(make_node(i, rng))
    kept = await storage.nodes.recent(OWNER, limit=10)
    storage.nodes._forget_latest()
    assert kept == await storage.nodes.recent(OWNER, limit=10)
    assert len(kept) == 6
