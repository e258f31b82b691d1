"""PostgreSQL schemas 63 and 82 on a database an older AKIRA made: the person's counters
version (what a process keeps of their learned profile is checked against it), and a
node's vector, postings and edges going with the node by a trigger instead of foreign
keys (a node write no longer checks them; deleting a node, or the person, still leaves
nothing of it behind)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from core.storage.postgres import PostgresStorage
from core.storage.postgres.database import PgDatabase
from core.storage.postgres.schema import MIGRATIONS, VECTOR_MIGRATIONS
from core.storage.profile_records import ProfileCount
from core.storage.records import Connection, MemoryNode, NodeType
from tests.postgres import postgres_database

A, B = "telegram:1", "telegram:2"
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
GRAPH = ("graph_embeddings", "graph_tags", "graph_entities", "graph_connections")


def node(node_id: str, owner: str) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=f"trabalho {node_id}",
        type=NodeType.USER_MESSAGE,
        timestamp=T0,
        tags=["work"],
    )


async def rows(store: PostgresStorage, owner: str) -> dict[str, int]:
    return {
        table: int(await store.db.fetchval(f"SELECT count(*) FROM {table} WHERE owner = $1", owner))
        for table in GRAPH
    }


async def test_an_older_database_is_upgraded_and_a_deleted_node_takes_its_rows_along() -> None:
    async with postgres_database() as dsn:
        before = PgDatabase(dsn, extensions=("vector",))
        older = [m for m in [*MIGRATIONS, *VECTOR_MIGRATIONS] if m.version not in (63, 82)]
        await before.open(older)  # as an older AKIRA
        try:
            keys = await before.fetchval(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                " AND conrelid::regclass::text LIKE 'graph_%'"
            )
            assert keys == 4  # embeddings, tags, entities, second embeddings
        finally:
            await before.close()
        async with PostgresStorage(dsn, pool_size=2) as store:
            assert (
                await store.db.fetchval(
                    "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                    " AND conrelid::regclass::text LIKE 'graph_%'"
                )
                == 0
            )
            for owner in (A, B):
                await store.users.ensure(owner)
                for name in ("n1", "n2"):
                    await store.graph.add_node(
                        node(f"{owner}-{name}", owner),
                        vector=np.ones(4, np.float32) / 2,
                        model="m",
                        connections=[Connection(f"{owner}-n1", "similar", 0.9)]
                        if name == "n2"
                        else [],
                        entities=["ana"],
                    )
            assert await rows(store, A) == {
                "graph_embeddings": 2,
                "graph_tags": 2,
                "graph_entities": 2,
                "graph_connections": 1,
            }
            # A node deleted (here by hand) takes its vector, postings and edges both ways.
            await store.db.execute("DELETE FROM nodes WHERE id = $1", f"{A}-n1")
            assert await rows(store, A) == {
                "graph_embeddings": 1,
                "graph_tags": 1,
                "graph_entities": 1,
                "graph_connections": 0,
            }
            # The person deleted (as forget-me's last step) takes the rest; B keeps theirs.
            await store.db.execute("DELETE FROM users WHERE key = $1", A)
            assert set((await rows(store, A)).values()) == {0}
            assert set((await rows(store, B)).values()) == {1, 2}
            # The counters version starts at 0 and moves with each addition.
            assert (
                await store.db.fetchval("SELECT counters_version FROM users WHERE key = $1", B) == 0
            )
            await store.profiles.add(B, [ProfileCount("topic", "work", 1.0, 1.0, T0)])
            assert (
                await store.db.fetchval("SELECT counters_version FROM users WHERE key = $1", B) == 1
            )
