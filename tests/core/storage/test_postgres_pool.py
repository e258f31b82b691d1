"""The PostgreSQL backend's own connection pool (core.storage.postgres.database): at most
``max_size`` connections, each lent to one caller at a time, waiting callers served in
turn; a connection in an unknown state (cancelled mid-query, broken, a transaction that
could not end) is never lent again; a server error leaves it usable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from core.storage.errors import StorageUnavailableError
from core.storage.postgres.database import ConnectionPool, PgDatabase
from tests.postgres import postgres_database


@pytest.fixture
async def db() -> AsyncIterator[PgDatabase]:
    async with postgres_database() as dsn:
        database = PgDatabase(dsn, max_size=2)
        await database.open([])
        try:
            yield database
        finally:
            await database.close()


async def backend(pool: ConnectionPool) -> int:
    return int(await pool.fetchval("SELECT pg_backend_pid()"))


async def test_at_most_max_size_connections_and_every_caller_served(db: PgDatabase) -> None:
    pids = await asyncio.gather(
        *(db.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)") for _ in range(8))
    )
    assert len(set(pids)) <= 2
    # Idle connections are lent again: no new server process for the next query.
    assert await backend(db.pool) in set(pids)


async def test_a_server_error_leaves_the_connection_usable(db: PgDatabase) -> None:
    before = await backend(db.pool)
    with pytest.raises(asyncpg.PostgresError):
        await db.fetchval("SELECT 1/0")
    with pytest.raises(asyncpg.PostgresError):
        async with db.transaction() as conn:
            await conn.execute("CREATE TABLE t (x int)")
            await conn.execute("SELECT 1/0")
    assert await backend(db.pool) == before
    # The transaction was rolled back, on a connection that is in none now.
    assert await db.fetchval("SELECT to_regclass('t') IS NULL") is True
    async with db.pool.connection() as conn:
        assert not conn.is_in_transaction()


async def test_a_caller_cancelled_mid_query_does_not_lend_its_connection_again(
    db: PgDatabase,
) -> None:
    before = await backend(db.pool)
    query = asyncio.create_task(db.fetchval("SELECT pg_sleep(5)"))
    await asyncio.sleep(0.2)
    query.cancel()
    with pytest.raises(asyncio.CancelledError):
        await query
    async with asyncio.timeout(3):
        assert await backend(db.pool) != before
        assert await db.fetchval("SELECT 41 + 1") == 42


async def test_a_broken_connection_is_replaced_and_waiters_still_served(db: PgDatabase) -> None:
    killer = await db.connect()
    try:
        first = await backend(db.pool)
        await killer.execute("SELECT pg_terminate_backend($1)", first)
        await asyncio.sleep(0.1)
        # A connection the server closed is seen closed and not lent again (had it not
        # been noticed yet, its caller would be told the server is away, nothing more).
        try:
            assert await backend(db.pool) != first
        except StorageUnavailableError:
            pass
        # ...and the next ones get connections that work, all of them served.
        async with asyncio.timeout(5):
            values = await asyncio.gather(*(db.fetchval("SELECT $1::int", i) for i in range(6)))
        assert values == list(range(6))
    finally:
        await killer.close()


async def test_closing_tells_waiting_callers_and_closes_what_comes_back(db: PgDatabase) -> None:
    pool = db.pool
    busy = [asyncio.create_task(pool.fetchval("SELECT pg_sleep(0.3)")) for _ in range(2)]
    await asyncio.sleep(0.1)
    waiting = asyncio.create_task(pool.fetchval("SELECT 1"))
    await asyncio.sleep(0.05)
    await db.close()
    with pytest.raises(asyncpg.InterfaceError):
        await waiting
    await asyncio.gather(*busy)  # the queries under way finish...
    with pytest.raises(asyncpg.InterfaceError):  # ...and nothing is lent any more
        await pool.fetchval("SELECT 1")
    assert pool._idle == []


async def test_plans_are_postgresql_s_own_choice(db: PgDatabase) -> None:
    # Forced generic plans made a heavy person's full-text search walk all their nodes
    # (docs/storage.md): the pool's connections keep the server's default.
    assert await db.fetchval("SHOW plan_cache_mode") == "auto"
    assert await db.fetchval("SHOW synchronous_commit") == "on"  # acknowledged writes
