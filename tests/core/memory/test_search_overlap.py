"""The full-text search runs on a reader thread while the vector search runs on the loop
(``core.memory.search.GraphSearcher.search``): its read must be on its way to the thread
before the vector search's CPU work begins, or the two run one after the other (a search
at 100k nodes took ~4 ms longer so). A real SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage

OWNER = "telegram:91"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


async def test_the_text_search_is_sent_before_the_vector_search_starts(
    storage: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    for i, text in enumerate(
        ["marquei dentista pra quinta", "o ônibus atrasou hoje", "dentista cancelou, remarcar"]
    ):
        node = MemoryNode(
            f"n{i}", OWNER, text, NodeType.USER_MESSAGE, T0 + timedelta(days=i), chat_id="c"
        )
        await memory.store(node)
    assert storage.graph.db._readers, "the overlap needs the reader threads of a file database"
    unsent: list[int] = []
    vector_search = storage.graph.vector_search

    async def observed(*args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        # Reads asked for this turn and not yet handed to a reader thread.
        unsent.append(len(storage.graph.db._read_batch))
        return await vector_search(*args, **kwargs)

    monkeypatch.setattr(storage.graph, "vector_search", observed)
    query = "dentista na quinta"
    found = await memory.searcher.search(
        OWNER, query, memory.embedder.embed_query(query), depth=1, limit=3
    )
    assert unsent and unsent[0] == 0  # the seeds' vector search: the text read was sent
    assert found and found[0].node.id in {"n0", "n2"}  # and the search still finds
