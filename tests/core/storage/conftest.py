"""Fixtures for the storage tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.storage.postgres import PostgresStorage
from core.storage.postgres.database import PgDatabase
from core.storage.records import MemoryNode, NodeType
from tests.postgres import postgres_database

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def turn(
    node_id: str,
    owner: str,
    content: str | None = None,
    *,
    minutes: int = 0,
    tags: Sequence[str] = (),
) -> MemoryNode:
    """``owner``'s message ``minutes`` after ``T0`` (content: "turn <id>" unless given)."""
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=f"turn {node_id}" if content is None else content,
        type=NodeType.USER_MESSAGE,
        timestamp=T0 + timedelta(minutes=minutes),
        tags=list(tags),
    )


@pytest.fixture
async def two_processes(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[PostgresStorage, PostgresStorage]]:
    """Two storages on one PostgreSQL database of their own, as two bot processes share
    one; the test module's ``OWNERS`` already users."""
    async with postgres_database() as dsn:
        first, second = PostgresStorage(dsn, pool_size=4), PostgresStorage(dsn, pool_size=4)
        async with first, second:
            for owner in getattr(request.module, "OWNERS", ()):
                await first.users.ensure(owner)
            yield first, second


@contextlib.contextmanager
def statements_sent(
    db: PgDatabase, methods: Sequence[str] = ("fetch", "fetchrow", "fetchval", "execute")
) -> Iterator[list[str]]:
    """The statements sent through ``db``'s ``methods`` while the block runs."""
    sent: list[str] = []

    def counting(send: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(sql: str, *args: object) -> Any:
            sent.append(sql)
            return await send(sql, *args)

        return counted

    for name in methods:
        setattr(db, name, counting(getattr(db, name)))
    try:
        yield sent
    finally:
        for name in methods:
            delattr(db, name)
