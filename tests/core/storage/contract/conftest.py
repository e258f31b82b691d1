"""The contract suite's fixtures: every test runs against every backend, a SQLite file
and a PostgreSQL database of its own (tests.postgres)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from core.storage import SQLiteStorage, Storage
from core.storage.postgres import PostgresStorage
from tests.postgres import postgres_database

OWNERS = ("telegram:1", "telegram:2", "discord:3")
BACKENDS = ["sqlite", "postgres"]

Opener = Callable[[], Storage]


@pytest.fixture(params=BACKENDS)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Makes storages on ONE database of the backend (a second one stands for another
    process sharing it)."""
    if request.param == "sqlite":
        path = tmp_path / "akira.db"
        yield lambda: SQLiteStorage(path)
        return
    async with postgres_database() as dsn:
        yield lambda: PostgresStorage(dsn, pool_size=4)


@pytest.fixture
async def storage(opener: Opener) -> AsyncIterator[Storage]:
    """An open storage, with :data:`OWNERS` already users."""
    store = opener()
    async with store:
        for owner in OWNERS:
            await store.users.ensure(owner)
        yield store
