"""wait=False writes of a person served by this process (the emotional state, the
emotion read in the message, the language) ride on the statement that lets go of the
person's lock (core.storage.postgres.pending): none is a statement of its own, and the
next holder of the lock, in another process, finds them stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.storage.postgres import PostgresStorage
from core.storage.profile_records import ProfileCount
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.conftest import statements_sent

A = "telegram:1"
OWNERS = [A]
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def message(node_id: str) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=A,
        content="que dia bom",
        type=NodeType.USER_MESSAGE,
        timestamp=T0,
        chat_id="c1",
        scope="dm",
    )


async def test_background_writes_ride_on_the_release_and_the_next_holder_sees_them(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    await first.nodes.add(message("n1"))
    async with first.serving(A, sent_at=T0):
        await first.users.ensure(A, seen_at=T0)  # the lock's own row: no statement
        await first.nodes.recent(A, limit=1)  # the person's latest nodes, kept from now
        with statements_sent(first.db) as statements:
            await first.users.change_profile(A, "mood", lambda _: "calma", wait=False)
            await first.nodes.set_emotion(A, "n1", "alegria", 0.7, wait=False)
            await first.users.set_language(A, "en", wait=False)
            (kept,) = await first.nodes.recent(A, limit=1)  # kept: says it at once
            assert kept.emotion == "alegria"
        assert statements == []
        # Not stored before the release.
        assert await second.db.fetchval("SELECT language FROM users WHERE key = $1", A) is None
    assert first.db.pending == {} and first.db.held == {}
    async with second.serving(A, sent_at=T0 + timedelta(minutes=1)):
        user = await second.users.ensure(A, seen_at=T0 + timedelta(minutes=1))
        assert user.profile == {"mood": "calma"} and user.language == "en"
        (stored,) = await second.nodes.recent(A, limit=1)
        assert (stored.emotion, stored.id) == ("alegria", "n1")
    # The emotion read moved the node version in the release: the first process's kept
    # rows, which said it at once, are current.
    async with first.serving(A, sent_at=T0 + timedelta(minutes=2)):
        (again,) = await first.nodes.recent(A, limit=1)
        assert again.emotion == "alegria"


async def test_the_counters_an_addition_returns_answer_the_next_read_under_that_lock(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    work = ProfileCount("topic", "work", 1.0, 1.0, T0)
    async with first.serving(A, sent_at=T0):
        await first.profiles.add(A, [work])
        # Another process adds between: the read answers as if it came first.
        await second.profiles.add(A, [ProfileCount("topic", "food", 1.0, 1.0, T0)])
        assert [(c.name, c.total) for c in await first.profiles.counters(A)] == [("work", 1.0)]
        # Once: the next read asks.
        assert [c.name for c in await first.profiles.counters(A)] == ["food", "work"]
        await first.profiles.add(A, [work])
    # Not beyond the lock.
    await second.profiles.add(A, [work])
    totals = [(c.name, c.total) for c in await first.profiles.counters(A)]
    assert totals == [("food", 1.0), ("work", 3.0)]
