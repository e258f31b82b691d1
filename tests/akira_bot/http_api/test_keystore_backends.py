"""The HTTP side's key store on both backends (akira_bot.http.keystore.key_store_for): the
same answers from SQLite and PostgreSQL, and on PostgreSQL two processes (two storages on
one database) see each other's keys: a Mind Key revoked on one stops working on the
other, a login link is used once across both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from akira_bot.http.keystore import PostgresKeyStore, SQLiteKeyStore, digest, key_store_for
from core.storage import SQLiteStorage
from core.storage.api import Storage
from core.storage.postgres import PostgresStorage
from core.types import utcnow
from tests.postgres import postgres_database

OWNER = "telegram:42"


@pytest.fixture(params=["sqlite", "postgres"])
async def two_storages(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Storage, Storage]]:
    """Two storages on one database (SQLite: one file; PostgreSQL: one database)."""
    if request.param == "sqlite":
        first, second = SQLiteStorage(tmp_path / "akira.db"), SQLiteStorage(tmp_path / "akira.db")
        async with first, second:
            yield first, second
        return
    async with postgres_database() as dsn:
        async with (
            PostgresStorage(dsn, pool_size=2) as first,
            PostgresStorage(dsn, pool_size=2) as second,
        ):
            yield first, second


async def test_keys_work_the_same_on_both_backends_and_across_processes(
    two_storages: tuple[Storage, Storage],
) -> None:
    first, second = two_storages
    keys, other = key_store_for(first), key_store_for(second)
    expected = PostgresKeyStore if first.backend == "postgres" else SQLiteKeyStore
    assert isinstance(keys, expected)
    await keys.setup()
    await other.setup()  # twice, from two processes: no error

    await keys.add("mind", digest("mind-secret"), OWNER)
    await keys.add("mind", digest("mind-secret"), OWNER)  # a duplicate is ignored
    assert await other.mind_of(digest("mind-secret")) == OWNER
    assert await other.minds(OWNER) == 1
    assert await other.mind_of(digest("unknown")) is None

    assert await other.revoke(digest("mind-secret")) is True
    assert await keys.revoke(digest("mind-secret")) is False  # already revoked
    assert await keys.mind_of(digest("mind-secret")) is None
    assert await keys.minds(OWNER) == 0

    now = utcnow()
    await keys.add("login", digest("link"), "admin:1", expires_at=now + timedelta(minutes=5))
    assert await other.use_login(digest("link"), at=now) == "admin:1"
    assert await keys.use_login(digest("link"), at=now) is None  # once, across processes
    await keys.add("login", digest("old"), "admin:1", expires_at=now - timedelta(minutes=1))
    assert await other.use_login(digest("old"), at=now) is None  # expired

    await keys.add("revoked_jwt", digest("jti-1"), "admin:1", expires_at=now + timedelta(hours=1))
    assert await other.is_revoked_jwt("jti-1") is True
    assert await other.is_revoked_jwt("jti-2") is False

    exported = await other.export_owner(OWNER)
    assert exported == [
        {
            "kind": "mind_key",
            "created_at": exported[0]["created_at"],
            "revoked": True,
            "used": False,
        }
    ]
    assert "mind-secret" not in str(exported) and digest("mind-secret") not in str(exported)
    assert await keys.delete_owner(OWNER) == 1
    assert await other.export_owner(OWNER) is None
