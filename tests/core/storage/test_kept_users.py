"""Users' rows kept in memory stay what SQLite holds, through every kind of write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.storage import SQLiteStorage
from core.storage.records import UserRecord

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
KEY = "telegram:5"


async def from_database(storage: SQLiteStorage, key: str) -> UserRecord | None:
    storage.users._rows.clear()
    return await storage.users.get(key)


async def test_kept_rows_follow_every_write(storage: SQLiteStorage) -> None:
    users = storage.users
    steps = [
        lambda: users.ensure(KEY, display_name="Ana", seen_at=T0),
        lambda: users.ensure(KEY, display_name="Ana", seen_at=T0 + timedelta(seconds=10)),
        lambda: users.ensure(KEY, display_name="Ana", seen_at=T0 + timedelta(minutes=5)),
        lambda: users.ensure(KEY, display_name="Ana Maria", seen_at=T0 + timedelta(minutes=6)),
        lambda: users.set_language(KEY, "pt"),
        lambda: users.change_profile(KEY, "emotional_state", lambda _old: {"label": "feliz"}),
        lambda: users.update_profile(KEY, nickname="Aninha", city="Recife"),
        lambda: users.change_profile(KEY, "count", lambda old: (old or 0) + 1),
    ]
    for number, step in enumerate(steps):
        await step()
        kept = await users.get(KEY)
        assert kept is not None and KEY in users._rows
        assert kept == await from_database(storage, KEY), f"after step {number}"
        await users.get(KEY)  # kept again for the next step
    final = await users.get(KEY)
    assert final is not None
    assert (final.display_name, final.language) == ("Ana Maria", "pt")
    assert final.profile == {
        "emotional_state": {"label": "feliz"},
        "nickname": "Aninha",
        "city": "Recife",
        "count": 1,
    }
    assert final.last_seen_at == T0 + timedelta(minutes=6)


async def test_callers_get_their_own_copy_and_forgetting_is_seen(storage: SQLiteStorage) -> None:
    users = storage.users
    await users.ensure(KEY, seen_at=T0)
    record = await users.get(KEY)
    assert record is not None
    record.profile["secret"] = "changed by a caller"
    again = await users.get(KEY)
    assert again is not None and "secret" not in again.profile
    await storage.forget_owner(KEY)
    assert await users.get(KEY) is None
    assert KEY not in users._rows
    with pytest.raises(KeyError):
        await users.change_profile(KEY, "x", lambda _old: 1)
    assert await users.get(KEY) is None
