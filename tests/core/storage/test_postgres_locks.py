"""A person's lock across processes (core.storage.postgres.locks): the steps of one batch
run in order in one statement (``akira_person_locks``, schema 62), the earlier message of
a person goes first whichever process registered it, and a message that went away while
its step was on its way lets go of what it was granted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from core.storage.postgres import PostgresStorage
from core.storage.postgres.locks import ARRIVAL_TTL_S, person_key
from tests.postgres import postgres_database

A = "telegram:1"
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
STEPS = "SELECT arrival, first, version FROM akira_person_locks($1, $2, $3, $4, $5, $6, $7)"


@pytest.fixture
async def two() -> AsyncIterator[tuple[PostgresStorage, PostgresStorage]]:
    async with postgres_database() as dsn:
        first, second = PostgresStorage(dsn, pool_size=4), PostgresStorage(dsn, pool_size=4)
        async with first, second:
            await first.users.ensure(A)
            yield first, second


async def test_one_batch_runs_its_steps_in_order(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    key = person_key(A)
    conn = await first.db.connect()
    try:
        # Two messages of one person in one batch: the lock is re-entrant on one session,
        # so the second is refused by the first's arrival (registered by the step before
        # it), and the lock it took is let go again (held once, not twice).
        rows = await conn.fetch(
            STEPS, ["a", "a"], [A, A], [1.0, 2.0], [0, 0], [0, 0], [key, key], ARRIVAL_TTL_S
        )
        (one, first_ok, version), (two_, second_ok, no_version) = rows
        assert (first_ok, second_ok) == (True, False)
        assert version == 0 and no_version is None
        other = await second.db.connect()
        try:
            refused = await other.fetch(STEPS, ["a"], [A], [0.5], [0], [0], [key], ARRIVAL_TTL_S)
            assert refused[0]["first"] is None  # held by the first session
            # The first message done and the second tried again, in one batch.
            rows = await conn.fetch(
                STEPS,
                ["d", "t"],
                [A, A],
                [1.0, 2.0],
                [0, 0],
                [one, two_],
                [key, key],
                ARRIVAL_TTL_S,
            )
            # The message registered by the other session (sent earlier) is waiting.
            assert rows[1]["first"] is False
            # Forgetting it ('r') lets the second go; 'f' keeps a lock even when not first.
            await other.fetch(
                STEPS, ["r"], [A], [0.5], [0], [refused[0]["arrival"]], [key], ARRIVAL_TTL_S
            )
            rows = await conn.fetch(STEPS, ["t"], [A], [2.0], [0], [two_], [key], ARRIVAL_TTL_S)
            assert rows[0]["first"] is True and rows[0]["version"] == 0
            rows = await other.fetch(STEPS, ["a"], [A], [9.0], [0], [0], [key], ARRIVAL_TTL_S)
            assert rows[0]["first"] is None
            await conn.fetch(STEPS, ["d"], [A], [2.0], [0], [two_], [key], ARRIVAL_TTL_S)
            rows = await other.fetch(
                STEPS, ["f"], [A], [9.0], [0], [rows[0]["arrival"]], [key], ARRIVAL_TTL_S
            )
            assert rows[0]["first"] is True
            assert (
                await other.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = "
                    "'advisory' AND pid = pg_backend_pid()"
                )
                == 1
            )
        finally:
            await other.close()
    finally:
        await conn.close()


async def test_the_earlier_message_goes_first_whichever_process_has_it(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    order: list[str] = []
    holding = asyncio.Event()
    release = asyncio.Event()

    async def serve(store: PostgresStorage, name: str, minutes: int) -> None:
        async with store.serving(A, sent_at=T0 + timedelta(minutes=minutes), message_id=name):
            order.append(name)
            if name == "2":
                holding.set()
                await release.wait()

    holder = asyncio.create_task(serve(first, "2", 2))
    await holding.wait()
    # Both wait while "2" is served: "3" in the holder's process, "1" (sent earlier,
    # registered later) in the other's.
    later = asyncio.create_task(serve(first, "3", 3))
    await asyncio.sleep(0.05)
    earlier = asyncio.create_task(serve(second, "1", 1))
    await asyncio.sleep(0.05)
    assert order == ["2"]
    release.set()
    await asyncio.wait_for(asyncio.gather(holder, later, earlier), 10)
    assert order == ["2", "1", "3"]
    assert first.locks.yielded >= 1  # "3" was granted the lock and let "1" go first
    assert await first.db.fetchval("SELECT count(*) FROM person_arrivals") == 0


async def test_a_message_gone_while_its_step_was_on_its_way_lets_go(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    entering = asyncio.create_task(first.serving(A).__aenter__())
    await asyncio.sleep(0)  # the step is queued and sent
    entering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await entering
    # The other process is not held up by what the cancelled message was granted.
    async with asyncio.timeout(5):
        async with second.serving(A):
            pass
    for _ in range(100):
        if await first.db.fetchval("SELECT count(*) FROM person_arrivals") == 0:
            break
        await asyncio.sleep(0.02)
    assert await first.db.fetchval("SELECT count(*) FROM person_arrivals") == 0
