"""The learned profile's storage (core.storage.api.ProfileStore) on every backend:
counters add up per owner, concurrent additions from two processes lose nothing, the
node index, export and forget-me."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from core.profile.decay import forward_weight
from core.storage import Storage
from core.storage.profile_records import ProfileCount
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.contract.conftest import Opener

T0 = datetime(2026, 1, 30, 12, 0, tzinfo=UTC)
A, B = "telegram:1", "telegram:2"
HALF_LIFE = 30.0


def topic(name: str, at: datetime, kind: str = "topic") -> ProfileCount:
    return ProfileCount(kind, name, forward_weight(at, HALF_LIFE), 1.0, at)


async def test_counters_add_up_per_owner(storage: Storage) -> None:
    profiles = storage.profiles
    await profiles.add(A, [topic("work", T0), topic("food", T0)])
    await profiles.add(A, [topic("work", T0 + timedelta(days=3))])
    await profiles.add(A, [topic("work", T0 - timedelta(days=2)), topic("bolo", T0, "tag")])
    await profiles.add(B, [topic("work", T0)])
    await profiles.add(A, [])  # nothing to add is no error
    # One counter twice in one addition (an import's batch) counts twice.
    await profiles.add(B, [topic("sleep", T0), topic("sleep", T0 + timedelta(hours=1))])

    counters = {(c.kind, c.name): c for c in await profiles.counters(A)}
    assert list(counters) == [("tag", "bolo"), ("topic", "food"), ("topic", "work")]
    work = counters[("topic", "work")]
    assert work.total == 3
    expected = sum(forward_weight(T0 + timedelta(days=d), HALF_LIFE) for d in (0, 3, -2))
    assert abs(work.weight - expected) < 1e-9 * expected
    # First and last times whatever order the messages came in (an import of older ones).
    assert (work.first_at, work.last_at) == (T0 - timedelta(days=2), T0 + timedelta(days=3))
    assert [c.name for c in await profiles.counters(A, "topic")] == ["food", "work"]
    # Once-said keywords can be left out; other kinds are kept whatever their count.
    assert [c.name for c in await profiles.counters(A, min_tag_total=2)] == ["food", "work"]
    assert [(c.name, c.total) for c in await profiles.counters(B)] == [
        ("sleep", 2.0),
        ("work", 1.0),
    ]


async def test_two_processes_adding_at_once_lose_nothing(opener: Opener, storage: Storage) -> None:
    other = opener()
    async with other:

        async def learn(store: Storage, n: int) -> None:
            for i in range(n):
                at = T0 + timedelta(hours=i)
                await store.profiles.add(A, [topic("work", at), topic("food", at)])

        await asyncio.gather(learn(storage, 40), learn(other, 40), learn(storage, 20))
        counters = {c.name: c.total for c in await other.profiles.counters(A)}
    assert counters == {"work": 100.0, "food": 100.0}


async def test_node_index_counts_types_per_month(storage: Storage) -> None:
    def node(i: int, at: datetime, kind: NodeType, owner: str = A) -> MemoryNode:
        return MemoryNode(id=f"{owner}-{i}", owner=owner, content=f"t{i}", type=kind, timestamp=at)

    feb = datetime(2026, 2, 28, 23, 59, tzinfo=UTC)
    mar = datetime(2026, 3, 1, 0, 1, tzinfo=UTC)
    for i, (at, kind) in enumerate(
        [
            (feb, NodeType.USER_MESSAGE),
            (feb, NodeType.AKIRA_RESPONSE),
            (mar, NodeType.USER_MESSAGE),
            (mar, NodeType.USER_MESSAGE),
        ]
    ):
        await storage.nodes.add(node(i, at, kind))
    await storage.nodes.add(node(9, mar, NodeType.USER_MESSAGE, owner=B))

    index = [(e.type, e.period, e.count) for e in await storage.profiles.node_index(A)]
    assert index == [
        ("akira_response", "2026-02", 1),
        ("user_message", "2026-02", 1),
        ("user_message", "2026-03", 2),
    ]
    assert await storage.profiles.node_index("telegram:404") == []


async def test_export_holds_the_learned_profile_and_forget_erases_it(storage: Storage) -> None:
    learned = [
        topic("work", T0),
        topic("work", T0 + timedelta(days=1)),
        ProfileCount("style", "messages", forward_weight(T0, HALF_LIFE), 1.0, T0),
    ]
    await storage.profiles.add(A, learned)
    await storage.profiles.add(B, [topic("food", T0)])

    export = await storage.export_owner(A)
    section = export["learned_profile"]
    assert section["favorite_topics"] == [
        {
            "topic": "work",
            "score": 1.977,  # today's mention 1, yesterday's a little less
            "mentions": 2,
            "last_mentioned_at": (T0 + timedelta(days=1)).isoformat(),
        }
    ]
    assert {c["name"] for c in section["counters"]} == {"work", "messages"}
    assert "food" not in str(export)

    removed = await storage.forget_owner(A)
    assert removed["learned_profile"] == 2
    assert "learned_profile" not in await storage.export_owner(A)
    assert await storage.profiles.counters(A) == []
    assert [c.name for c in await storage.profiles.counters(B)] == ["food"]
