"""Writes nobody waits for (``wait=False``): returned before the commit, committed in
order behind, made again when another write got there first, and all committed when the
storage closes."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from core.storage import SQLiteStorage
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.conftest import T0

KEY = "telegram:7"
OWNERS = (KEY,)
NEW = "telegram:8"  # not a user yet


def stored_profile(path: Path, key: str = KEY) -> dict[str, object]:
    """The profile as the file holds it, read by a connection of its own."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT profile FROM users WHERE key = ?", (key,)).fetchone()
    return dict(json.loads(row[0]))


def add_one(old: object) -> int:
    return (old if isinstance(old, int) else 0) + 1


async def test_a_change_returns_before_its_commit_and_commits_behind(
    storage: SQLiteStorage,
) -> None:
    path = storage.db.path
    assert await storage.users.change_profile(KEY, "count", add_one, wait=False) == 1
    assert "count" not in stored_profile(path)  # queued, not committed yet
    # Reading the person waits for their change: what is read is what was committed.
    kept = await storage.users.get(KEY)
    assert kept is not None and kept.profile["count"] == 1
    assert stored_profile(path)["count"] == 1


async def test_changes_one_after_another_keep_their_order_and_close_commits_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "akira.db"
    storage = SQLiteStorage(path)
    await storage.open()
    await storage.users.ensure(KEY)
    seen = []
    for _ in range(30):
        # Each change waits for the last one's commit, so each sees the one before.
        seen.append(await storage.users.change_profile(KEY, "count", add_one, wait=False))
    await storage.close()  # commits what is still queued
    assert seen == list(range(1, 31))
    assert stored_profile(path)["count"] == 30


async def test_a_change_that_lost_the_race_is_made_again_on_the_stored_row(
    storage: SQLiteStorage,
) -> None:
    path = storage.db.path
    await storage.users.change_profile(KEY, "count", add_one)  # 1, and the row is kept
    with sqlite3.connect(path) as other:  # another process (an import) sets it to 10
        other.execute(
            "UPDATE users SET profile = ? WHERE key = ?", (json.dumps({"count": 10}), KEY)
        )
    # Made on the kept row (count 1): the answer is 2, the compare-and-set fails, and
    # the change is made again on the stored row behind the caller's back.
    assert await storage.users.change_profile(KEY, "count", add_one, wait=False) == 2
    await storage.users.settle()
    assert stored_profile(path)["count"] == 11
    kept = await storage.users.get(KEY)
    assert kept is not None and kept.profile["count"] == 11


async def test_a_change_that_cannot_be_stored_is_logged_not_lost_silently(
    storage: SQLiteStorage, caplog: pytest.LogCaptureFixture
) -> None:
    path = storage.db.path
    await storage.users.get(KEY)  # kept
    with sqlite3.connect(path) as other:  # the person is erased meanwhile
        other.execute("DELETE FROM users WHERE key = ?", (KEY,))
    caplog.set_level(logging.ERROR)
    await storage.users.change_profile(KEY, "count", add_one, wait=False)
    await storage.users.settle()  # returns: the failure ends the change
    assert any(KEY in r.getMessage() and r.exc_info for r in caplog.records)
    assert await storage.users.get(KEY) is None  # and the kept row was dropped


async def test_a_node_emotion_commits_behind_and_before_close(tmp_path: Path) -> None:
    path = tmp_path / "akira.db"
    storage = SQLiteStorage(path)
    await storage.open()
    await storage.users.ensure(KEY)
    node = MemoryNode(id="n1", owner=KEY, content="oi", type=NodeType.USER_MESSAGE, timestamp=T0)
    assert await storage.nodes.add(node)
    await storage.nodes.set_emotion(KEY, "n1", "feliz", 0.9, wait=False)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT emotion FROM nodes WHERE id = 'n1'").fetchone()[0] is None
    await storage.close()
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT emotion, emotion_score FROM nodes WHERE id = 'n1'").fetchone()
    assert row == ("feliz", 0.9)


async def test_a_person_s_background_writes_land_in_order_before_their_next_read(
    storage: SQLiteStorage,
) -> None:
    path = storage.db.path

    def stored_language() -> str | None:
        with sqlite3.connect(path) as conn:
            row = conn.execute("SELECT language FROM users WHERE key = ?", (KEY,)).fetchone()
        return None if row[0] is None else str(row[0])

    await storage.users.set_language(KEY, "pt", wait=False)
    assert stored_language() is None  # queued
    # A change is made on the row as last written: it waits for the language first.
    assert await storage.users.change_profile(KEY, "count", add_one, wait=False) == 1
    assert stored_language() == "pt"
    await storage.users.set_language(KEY, "en", wait=False)
    assert "count" not in stored_profile(path) and stored_language() == "pt"
    user = await storage.users.get(KEY)  # waits for both, in the order made
    assert user is not None and user.language == "en" and user.profile["count"] == 1
    assert stored_language() == "en" and stored_profile(path)["count"] == 1


async def test_a_known_person_is_seen_without_waiting_and_a_forget_waits_for_it(
    storage: SQLiteStorage,
) -> None:
    path = storage.db.path

    def stored_user() -> tuple[str | None, float] | None:
        with sqlite3.connect(path) as conn:
            row = conn.execute(
                "SELECT display_name, last_seen_at FROM users WHERE key = ?", (NEW,)
            ).fetchone()
        return None if row is None else (row[0], row[1])

    await storage.users.ensure(NEW, display_name="Ana", seen_at=T0)
    before = stored_user()
    later = T0 + timedelta(hours=2)
    user = await storage.users.ensure(NEW, display_name="Bea", seen_at=later)
    # What the upsert makes of the row, returned before it commits.
    assert user.display_name == "Bea" and user.last_seen_at == later
    assert stored_user() == before
    user = await storage.users.ensure(NEW, display_name="Bea", seen_at=later)  # waits for it
    assert stored_user() == ("Bea", later.timestamp())
    # Erasing the person waits for their writes still to come, which would bring them back.
    await storage.users.ensure(NEW, display_name="Cida", seen_at=later + timedelta(hours=1))
    await storage.users.delete_owner(NEW)
    await storage.users.settle()
    assert stored_user() is None
    assert await storage.users.get(NEW) is None
