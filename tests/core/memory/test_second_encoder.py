"""A second encoder's vector a node (GraphMemory.use_second), fused by rank with the
first: on a real SQLite file, the hashing embedder first and USE (multilingual v3)
second, as the app pairs e5 and USE."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.embeddings import HashingEmbedder
from core.embeddings.batcher import EmbeddingBatcher
from core.embeddings.usem3 import USEEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage

OWNER = "telegram:88"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
QUESTION = "pedi demissão do emprego, foi uma boa decisão?"
WANTED = "quit"

# Different days: no follow-up edges between them, so only the ranking decides. The
# question shares no word with the wanted line (another language, other words): the
# hashing embedder cannot see it, USE can.
LINES = [
    ("quit", "I quit my job today, no more spreadsheets for me"),
    ("d1", "the bus was late again, forty minutes"),
    ("d2", "bought new headphones, the old ones broke"),
    ("d3", "it rained all day so I watched a series"),
    ("d4", "trying to drink more water these days"),
    ("d5", "my sister comes to visit next month"),
    ("d6", "made lasagna for dinner, turned out great"),
    ("d7", "the neighbours were loud until midnight"),
    ("d8", "started reading a novel about a lighthouse"),
]


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    return USEEmbedder()


def line(node_id: str, text: str, day: int, kind: NodeType = NodeType.USER_MESSAGE) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=OWNER,
        content=text,
        type=kind,
        timestamp=T0 + timedelta(days=day),
        chat_id="dm-88",
    )


async def ranks(memory: GraphMemory, *, at: datetime | None = None) -> list[str]:
    if at is None:
        found = await memory.search_with_connections(QUESTION, OWNER, limit=9)
    else:
        found = await memory.search_in_conversation(QUESTION, OWNER, limit=9, at=at)
    return [r.node.id for r in found]


async def test_the_second_list_finds_the_paraphrase_the_first_misses(
    storage: SQLiteStorage, use: USEEmbedder
) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    memory.use_second(use)
    for day, (node_id, text) in enumerate(LINES):
        await memory.store(line(node_id, text, day))
    at = T0 + timedelta(days=30)
    # The second list is on in conversational recall (QueryConfig.second_weight) ...
    with_second = await ranks(memory, at=at)
    memory.config = replace(memory.config, query=replace(memory.config.query, second_weight=0.0))
    without = await ranks(memory, at=at)
    assert with_second.index(WANTED) < without.index(WANTED)
    # ... and off in the plain search by default (SearchConfig.second_weight 0); a
    # weight turns it on there too.
    plain = await ranks(memory)
    config = replace(memory.config, search=replace(memory.config.search, second_weight=1.0))
    memory.config = config
    memory.searcher.config = config.search
    weighted = await ranks(memory)
    assert WANTED in weighted[:3]
    assert WANTED not in plain or plain.index(WANTED) > weighted.index(WANTED)


async def test_without_second_vectors_recall_is_as_with_one_encoder(
    storage: SQLiteStorage, use: USEEmbedder
) -> None:
    """Old data (stored before the second encoder) and an app without one: the same
    results as a memory that never had one."""
    memory = GraphMemory(storage, HashingEmbedder())
    for day, (node_id, text) in enumerate(LINES):
        await memory.store(line(node_id, text, day))
    at = T0 + timedelta(days=30)
    before = await ranks(memory, at=at)
    memory.use_second(use)
    assert await storage.graph.second_vectors(OWNER, use.name, [i for i, _ in LINES]) == {}
    assert await ranks(memory, at=at) == before


async def test_handed_vectors_are_not_computed_again_and_replies_get_none(
    storage: SQLiteStorage, use: USEEmbedder
) -> None:
    """``handed``: the emotion stage computed the message's vector (through the shared
    batcher): the store does not embed it, :meth:`GraphMemory.store_second` writes what
    the batcher holds; a reply gets none unless ``second_replies``."""
    memory = GraphMemory(storage, HashingEmbedder())
    batcher = EmbeddingBatcher(use)
    memory.use_second(batcher, handed=True)
    message = line("m1", "tenho dor de cabeça desde ontem", 0)
    await batcher.embed_query(message.content)  # what the emotion stage does first
    texts = batcher.texts
    await memory.store(message)
    assert await storage.graph.second_vectors(OWNER, use.name, ["m1"]) == {}
    await memory.store_second(message)
    await memory.settle()
    assert batcher.texts == texts  # found among the recent ones
    assert set(await storage.graph.second_vectors(OWNER, use.name, ["m1"])) == {"m1"}
    reply = line("r1", "Sinto muito! Tomou algum remédio?", 0, NodeType.AKIRA_RESPONSE)
    await memory.store_later(reply)
    await memory.settle()
    assert await storage.graph.second_vectors(OWNER, use.name, ["r1"]) == {}
    memory.config = replace(memory.config, second_replies=True)
    reply2 = line("r2", "Que bom que melhorou!", 1, NodeType.AKIRA_RESPONSE)
    await memory.store_later(reply2)
    await memory.settle()
    assert set(await storage.graph.second_vectors(OWNER, use.name, ["r2"])) == {"r2"}


async def test_an_import_stores_second_vectors_in_batches(
    storage: SQLiteStorage, use: USEEmbedder
) -> None:
    memory = GraphMemory(storage, HashingEmbedder(), config=GraphConfig(max_batch=4))
    memory.use_second(use)
    nodes = [line(node_id, text, day) for day, (node_id, text) in enumerate(LINES)]
    assert all(await memory.store_many(nodes))
    found = await storage.graph.second_vectors(OWNER, use.name, [n.id for n in nodes])
    assert set(found) == {n.id for n in nodes}
