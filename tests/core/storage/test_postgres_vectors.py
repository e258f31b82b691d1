"""Vectors in pgvector (PostgreSQL schema 80): a person another process serves is searched
in PostgreSQL with pgvector, a person this process serves in the matrix it keeps; both
give the same hits, each person's own only. A database from before schema 80 keeps every
stored float32 exactly. A server without an extension the schema needs is one clear line
naming what to install."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import pytest

from core.storage.errors import StorageError
from core.storage.postgres import PostgresStorage
from core.storage.postgres.database import PgDatabase
from core.storage.postgres.schema import MIGRATIONS
from core.storage.records import MemoryNode, NodeType
from tests.postgres import postgres_database

A, B = "telegram:1", "telegram:2"
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
MODEL = "test-model"
DIM = 16


def node(node_id: str, owner: str, minutes: int, scope: str = "dm") -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=f"turn {node_id}",
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=minutes),
        scope=scope,
    )


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
async def filled() -> AsyncIterator[tuple[PostgresStorage, dict[str, np.ndarray]]]:
    """40 nodes of A (every fourth in a group's scope), 40 of B, with random unit vectors."""
    async with postgres_database() as dsn, PostgresStorage(dsn, pool_size=4) as store:
        await store.graph.check_model(MODEL, DIM)
        vectors: dict[str, np.ndarray] = {}
        for owner, seed in ((A, 1), (B, 2)):
            await store.users.ensure(owner)
            for i, vector in enumerate(unit_vectors(40, seed)):
                node_id = f"{owner[-1]}-{i}"
                scope = "group:g1" if i % 4 == 0 else "dm"
                await store.graph.add_node(
                    node(node_id, owner, i, scope), vector=vector, model=MODEL
                )
                vectors[node_id] = vector
        yield store, vectors


SEARCHES: list[dict[str, object]] = [
    {"k": 5},
    {"k": 40},
    {"k": 5, "scopes": ["dm"]},
    {"k": 5, "scopes": ["group:g1"]},
    {"k": 5, "scopes": []},
    {"k": 5, "at": T0 + timedelta(minutes=10)},
    {"k": 5, "exclude": ["1-3", "1-7", "2-1"]},
    {"k": 5, "newest": 12},
    {"k": 5, "newest": 12, "scopes": ["dm"], "at": T0 + timedelta(minutes=33)},
    {"k": 0},
]


@pytest.mark.parametrize("options", SEARCHES)
async def test_pgvector_search_matches_the_kept_matrix_and_keeps_to_the_owner(
    filled: tuple[PostgresStorage, dict[str, np.ndarray]], options: dict[str, object]
) -> None:
    store, vectors = filled
    query = vectors["1-5"] * 0.6 + vectors["2-5"] * 0.4  # close to one node of each
    query = (query / np.linalg.norm(query)).astype(np.float32)
    assert A not in store.db.serving
    in_server = await store.graph.vector_search(A, query, **options)  # type: ignore[arg-type]
    async with store.serving(A):  # now this process serves A: the kept matrix
        assert A in store.db.serving
        in_memory = await store.graph.vector_search(A, query, **options)  # type: ignore[arg-type]
    assert [i for i, _ in in_server] == [i for i, _ in in_memory]
    assert np.allclose([s for _, s in in_server], [s for _, s in in_memory], atol=1e-5)
    assert all(i.startswith("1-") for i, _ in in_server), "only A's own nodes"
    for node_id, score in in_server:
        assert score == pytest.approx(float(vectors[node_id] @ query), abs=1e-5)
    if options.get("k") == 5 and len(options) == 1:
        assert in_server[0][0] == "1-5"


async def test_vectors_come_back_as_stored_and_a_wrong_size_is_a_model_mismatch(
    filled: tuple[PostgresStorage, dict[str, np.ndarray]],
) -> None:
    from core.storage.graph_records import EmbeddingModelMismatch

    store, vectors = filled
    got = await store.graph.vectors(A, ["1-0", "1-1", "2-0"])
    assert set(got) == {"1-0", "1-1"}, "another person's vector is not returned"
    assert got["1-1"].dtype == np.float32
    assert np.array_equal(got["1-1"], vectors["1-1"])
    with pytest.raises(EmbeddingModelMismatch):
        await store.graph.vector_search(A, np.ones(DIM + 1, np.float32), k=3)


async def test_a_database_from_before_pgvector_keeps_every_float32_exactly() -> None:
    """Schema 80 turns the float32 bytes of earlier databases into pgvector's vector: the
    values read back are bit for bit the ones stored (signs, zero, subnormals, extremes)."""
    special = np.array(
        [0.0, -0.0, 1.0, -2.5, 1e-45, -1.4e-45, 1.17e-38, 3.4028235e38, -3.4028235e38, 0.1]
        + [float(x) for x in unit_vectors(1, 7)[0][:6]],
        dtype=np.float32,
    )
    randoms = unit_vectors(30, 3)
    async with postgres_database() as dsn:
        before = PgDatabase(dsn)
        await before.open([m for m in MIGRATIONS if m.version < 80])  # as an older AKIRA
        try:
            await before.execute(
                "INSERT INTO users(key, platform, external_id, created_at, last_seen_at)"
                " VALUES ($1, 'telegram', '1', 0, 0)",
                A,
            )
            for i, vector in enumerate([special, *randoms]):
                await before.execute(
                    "INSERT INTO nodes(id, owner, type, content, ts) VALUES ($1, $2, 'user', '', $3)",
                    f"n{i}",
                    A,
                    float(i),
                )
                await before.execute(
                    "INSERT INTO graph_embeddings(node_id, owner, model, dim, vector)"
                    " VALUES ($1, $2, $3, $4, $5)",
                    f"n{i}",
                    A,
                    MODEL,
                    DIM,
                    vector.tobytes(),
                )
        finally:
            await before.close()
        async with PostgresStorage(dsn, pool_size=2) as store:
            got = await store.graph.vectors(A, [f"n{i}" for i in range(31)])
            column = await store.db.fetchval(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = 'graph_embeddings'::regclass AND attname = 'vector'"
            )
    assert column == "vector"
    assert got["n0"].tobytes() == special.tobytes()
    for i, vector in enumerate(randoms, start=1):
        assert got[f"n{i}"].tobytes() == vector.tobytes()


async def test_a_server_without_a_needed_extension_is_one_line_naming_what_to_install() -> None:
    async with postgres_database() as dsn:
        db = PgDatabase(dsn, extensions=("vector", "akira_no_such_extension"))
        with pytest.raises(StorageError) as caught:
            await db.open(MIGRATIONS)
        message = str(caught.value)
        assert "akira_no_such_extension" in message and "install" in message
        assert "\n" not in message and "://" not in message
        # Nothing was migrated: the database is as it was.
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval("SELECT to_regclass('nodes')") is None
        finally:
            await conn.close()


def test_the_binary_form_is_pgvectors() -> None:
    """dim (uint16), reserved (uint16), big-endian float32s: what the server's
    ``vector_recv`` reads."""
    from core.storage.postgres.database import vector_array, vector_bytes

    data = vector_bytes(np.array([1.5, -2.0], np.float32))
    assert data == struct.pack(">HHff", 2, 0, 1.5, -2.0)
    assert vector_array(data).tolist() == [1.5, -2.0]
