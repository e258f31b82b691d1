"""Result diversity (maximal marginal relevance) in the plain search, on a real SQLite file
with the hashing embedder: a question gathering several facts gets the different ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage

OWNER = "telegram:77"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2018, 6, 1, 10, 0, tzinfo=UTC)
QUESTION = "acampar com as crianças e a barraca na areia, onde já fomos?"

# Different days: no follow-up edges between them, so only the ranking decides.
LINES = [
    ("beach1", "levamos as crianças pra acampar na praia de Ubatuba, barraca na areia"),
    ("beach2", "acampar na praia de Ubatuba com as crianças, barraca na areia, que delícia"),
    ("hills", "acampamos na serra com neblina e fogueira, a barraca quase voou"),
    ("c1", "o ônibus atrasou quarenta minutos hoje"),
    ("c2", "comprei um fone novo, o antigo quebrou"),
    ("c3", "a reunião de segunda podia ter sido um email"),
    ("c4", "fiz uma faxina geral no apartamento"),
    ("c5", "meu notebook tá lento demais"),
    ("c6", "choveu o dia inteiro e fiquei vendo série"),
    ("c7", "to tentando beber mais água"),
    ("c8", "a internet caiu de novo aqui em casa"),
]


async def stored(storage: SQLiteStorage, diversity: float) -> GraphMemory:
    base = GraphConfig()
    config = replace(base, search=replace(base.search, diversity=diversity))
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    for day, (node_id, text) in enumerate(LINES):
        node = MemoryNode(
            id=node_id,
            owner=OWNER,
            content=text,
            type=NodeType.USER_MESSAGE,
            timestamp=T0 + timedelta(days=day),
            chat_id="dm-77",
        )
        await memory.store(node)
    return memory


async def test_a_gathering_question_gets_the_different_facts(storage: SQLiteStorage) -> None:
    memory = await stored(storage, diversity=0.5)
    found = await memory.search_with_connections(QUESTION, OWNER, limit=3)
    assert [r.node.id for r in found] == ["beach2", "hills", "beach1"]
    # Scores still fall with the rank: the repeated moment's is discounted.
    assert found[0].score >= found[1].score >= found[2].score


async def test_without_diversity_the_same_moment_told_twice_fills_the_top(
    storage: SQLiteStorage,
) -> None:
    memory = await stored(storage, diversity=0.0)
    found = await memory.search_with_connections(QUESTION, OWNER, limit=3)
    assert [r.node.id for r in found] == ["beach2", "beach1", "hills"]


async def test_conversational_recall_keeps_diversity_off(storage: SQLiteStorage) -> None:
    memory = await stored(storage, diversity=0.5)
    at = T0 + timedelta(days=len(LINES) + 1)
    recall = await memory.recall(OWNER, QUESTION, scopes=None, limit=3, at=at)
    assert [r.node.id for r in recall.nodes][:2] == ["beach2", "beach1"]
