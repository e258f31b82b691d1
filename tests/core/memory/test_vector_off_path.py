"""A person's message is stored as a row first; its vector, topic tags and connections
follow off the person's path (GraphMemory.store_first, the persist stage's), and the
person's next message waits for them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from core.embeddings.hashing import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import SQLiteStorage
from core.storage.records import MemoryNode, NodeType

A = "telegram:1"
OWNERS = (A,)
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class GatedEmbedder(HashingEmbedder):
    """The hashing embedder computing stored texts (passages) only while ``gate`` is
    open, in a thread as a model would: a vector the model has not finished yet.
    Queries (recall's) are not held."""

    inline = False

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        assert self.gate.wait(30), "the gate was never opened"
        return super().embed_passages(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed_passages(texts)


def message(node_id: str, text: str, minutes: float) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=A,
        content=text,
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=minutes),
        chat_id="chat",
        source_id=f"telegram:chat:{node_id}",
    )


async def test_store_returns_with_the_row_and_the_vector_follows(
    storage: SQLiteStorage,
) -> None:
    embedder = GatedEmbedder()
    memory = GraphMemory(storage, embedder)
    assert await memory.store_first(message("n1", "I adopted a dog called Thor", 0))
    await memory.settle()
    embedder.gate.clear()
    try:
        later = message("n2", "Thor loves running on the beach", 1)
        # Returns while the model still holds the message's vector.
        assert await asyncio.wait_for(memory.store_first(later), timeout=5)
        assert await storage.nodes.get(A, "n2") is not None
        assert await storage.graph.vectors(A, ["n2"]) == {}
        assert [n.id for n in await storage.nodes.recent(A)] == ["n1", "n2"]
        # The person's next message waits for it (its recall must find "n2").
        next_one = asyncio.create_task(memory.store_first(message("n3", "and swimming", 2)))
        await asyncio.sleep(0.2)
        assert not next_one.done()
    finally:
        embedder.gate.set()
    assert await asyncio.wait_for(next_one, timeout=10)
    await asyncio.wait_for(memory.settle(), timeout=10)
    assert set(await storage.graph.vectors(A, ["n1", "n2", "n3"])) == {"n1", "n2", "n3"}
    # Its connections, tags and vector are those of a message stored in one go.
    assert "n1" in {c.node_id for c in await storage.graph.connections_of(A, "n2")}
    stored = await storage.nodes.get(A, "n2")
    assert stored is not None and stored.tags == later.tags and later.tags
    hits = await storage.graph.vector_search(
        A,
        embedder.embed_passage("I adopted a dog called Thor\nThor loves running on the beach"),
        k=1,
    )
    assert hits[0][0] == "n2" and hits[0][1] > 0.999  # with its previous turn, as before
    recalled = await memory.recall(
        A, "Thor on the beach", scopes=None, at=T0 + timedelta(minutes=3), exclude_ids=["n3"]
    )
    assert "n2" in {r.node.id for r in recalled.nodes}
    # A duplicate delivery is refused by the row's insert.
    assert not await memory.store_first(message("n2", "Thor loves running on the beach", 1))


async def test_a_node_forgotten_before_its_vector_leaves_nothing(storage: SQLiteStorage) -> None:
    embedder = GatedEmbedder()
    memory = GraphMemory(storage, embedder)
    assert await memory.store_first(message("f1", "my sister Ana lives in Lisbon", 0))
    await memory.settle()
    embedder.gate.clear()
    try:
        assert await asyncio.wait_for(
            memory.store_first(message("f2", "Ana visits Lisbon in June", 1)), timeout=5
        )
        export = await storage.export_owner(A)
        assert [m["id"] for m in export["messages"]] == ["f1", "f2"]
        await storage.forget_owner(A)
    finally:
        embedder.gate.set()
    await asyncio.wait_for(memory.settle(), timeout=10)
    for table in ("nodes", "graph_embeddings", "graph_tags", "graph_entities", "graph_connections"):
        row = await storage.db.fetchone(f"SELECT count(*) FROM {table} WHERE owner = ?", (A,))
        assert row is not None and row[0] == 0, table


async def test_a_row_left_without_its_vector_is_completed_at_the_next_message(
    tmp_path: Path,
) -> None:
    """What a process stopped between a message's row and its vector leaves (the row
    was acknowledged, so it is kept) gets its vector at the person's next message."""
    path = tmp_path / "akira.db"
    embedder = HashingEmbedder()
    async with SQLiteStorage(path) as storage:
        await storage.users.ensure(A)
        memory = GraphMemory(storage, embedder)
        assert await memory.store_first(message("r1", "I play the violin every morning", 0))
        await memory.settle()
        await memory.check()
        assert await storage.graph.add_node(
            message("r2", "the violin teacher is strict", 1), vector=None, model=memory.model
        )
    async with SQLiteStorage(path) as storage:
        memory = GraphMemory(storage, embedder)
        assert await storage.graph.vectors(A, ["r2"]) == {}
        assert await memory.store_first(message("r3", "lessons on Friday", 2))
        await memory.settle()
        assert set(await storage.graph.vectors(A, ["r1", "r2", "r3"])) == {"r1", "r2", "r3"}
        assert "r1" in {c.node_id for c in await storage.graph.connections_of(A, "r2")}
        hits = await storage.graph.vector_search(
            A, embedder.embed_query("violin teacher strict"), k=3
        )
        assert "r2" in {h for h, _ in hits}


async def test_the_next_message_does_not_wait_for_company_of_the_reply_s_vector(
    storage: SQLiteStorage,
) -> None:
    """A reply's vector may wait for other texts to share a batch with (``later_wait_ms``)
    while nobody needs it; once the person's next message waits for it, it goes."""
    memory = GraphMemory(storage, GatedEmbedder(), config=GraphConfig(later_wait_ms=60_000))
    assert await memory.store_first(message("h1", "I moved to Porto last year", 0))
    await memory.settle()
    reply = message("h2", "How do you like Porto?", 0.5)
    reply.type = NodeType.AKIRA_RESPONSE
    await memory.store_later(reply)
    await asyncio.sleep(0.05)  # the reply's vector waits in its batch
    assert await asyncio.wait_for(memory.store_first(message("h3", "I love it", 1)), timeout=5)
    assert "h2" in await storage.graph.vectors(A, ["h2"])
    await asyncio.wait_for(memory.settle(), timeout=5)
