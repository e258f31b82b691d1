"""Structured memories on a real SQLite file: upsert with history, verification by people
only, expiry by message time, the recall text, search, and hostile input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.memory.structured import (
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    Category,
    MemoryValidationError,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemories,
    render_recall,
)
from core.storage import SQLiteStorage

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ALICE = "telegram:1"
BOB = "telegram:2"


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    async with SQLiteStorage(tmp_path / "akira.db") as store:
        yield store


@pytest.fixture
def memories(storage: SQLiteStorage) -> StructuredMemories:
    return StructuredMemories(storage.memories)


async def test_the_seeds_upsert_example_keeps_one_memory_and_its_history(
    memories: StructuredMemories,
) -> None:
    first, created = await memories.store_memory(
        ALICE, "project", "project_synapse_status", "v1.4.0 deployed", tags=["Synapse"], at=T0
    )
    second, updated = await memories.store_memory(
        ALICE,
        "project",
        "project_synapse_status",
        "v1.5.0 deployed",
        tags=["synapse"],
        at=T0 + timedelta(days=3),
    )
    assert (created, updated) == (StoreOutcome.CREATED, StoreOutcome.UPDATED)
    assert second.id == first.id and second.id.startswith("mem_")
    everything = await memories.all(ALICE)
    assert [(m.key, m.content, m.version) for m in everything] == [
        ("project_synapse_status", "v1.5.0 deployed", 2)
    ]
    assert everything[0].created_at == T0 and everything[0].updated_at == T0 + timedelta(days=3)
    history = await memories.history(ALICE, first.id)
    assert [(v.version, v.content, v.change) for v in history] == [(1, "v1.4.0 deployed", "update")]
    assert history[0].valid_from == T0 and history[0].replaced_at == T0 + timedelta(days=3)


async def test_same_statement_twice_is_unchanged_and_adds_no_history(
    memories: StructuredMemories,
) -> None:
    first, _ = await memories.store_memory(ALICE, "preference", "tea", "Likes green tea", at=T0)
    again, outcome = await memories.store_memory(
        ALICE, "preference", "Tea", "Likes green tea", at=T0 + timedelta(hours=1)
    )
    assert outcome is StoreOutcome.UNCHANGED and again.id == first.id
    assert await memories.history(ALICE, first.id) == []


async def test_keys_are_unique_per_category_and_per_owner(memories: StructuredMemories) -> None:
    await memories.store_memory(ALICE, "fact", "city", "Lisbon", at=T0)
    await memories.store_memory(ALICE, "project", "city", "City builder game", at=T0)
    await memories.store_memory(BOB, "fact", "city", "Recife", at=T0)
    assert sorted(m.content for m in await memories.all(ALICE)) == ["City builder game", "Lisbon"]
    assert [m.content for m in await memories.all(BOB)] == ["Recife"]
    found = await memories.find(ALICE, "city")
    assert {m.category for m in found} == {Category.FACT, Category.PROJECT}
    assert [m.content for m in await memories.find(ALICE, "fact/city")] == ["Lisbon"]
    # Another owner's id is invisible: every read filters by owner.
    bob_city = (await memories.all(BOB))[0]
    assert await memories.get(ALICE, bob_city.id) is None
    assert await memories.find(ALICE, bob_city.id) == []
    assert await memories.delete(ALICE, bob_city.id) is False
    assert await memories.verify(ALICE, bob_city.id, verified_by=ALICE) is None


async def test_sources_set_verification_and_confidence(memories: StructuredMemories) -> None:
    user, _ = await memories.store_memory(ALICE, "identity", "name", "Alice", at=T0)
    agent, _ = await memories.store_memory(
        ALICE, "fact", "pet", "Has a dog", source=Source.AGENT, at=T0
    )
    assert (user.source, user.verified, user.confidence, user.verified_by) == (
        Source.USER,
        True,
        1.0,
        ALICE,
    )
    assert (agent.source, agent.verified, agent.confidence, agent.verified_by) == (
        Source.AGENT,
        False,
        0.7,
        None,
    )


async def test_agent_never_overwrites_what_a_person_said(memories: StructuredMemories) -> None:
    said, _ = await memories.store_memory(ALICE, "identity", "name", "Alice", at=T0)
    kept = await memories.propose(ALICE, "identity", "name", "Alicia", at=T0 + timedelta(hours=1))
    assert kept is not None
    memory, outcome = kept
    assert outcome is StoreOutcome.KEPT and memory.content == "Alice" and memory.verified
    assert await memories.history(ALICE, said.id) == []


async def test_agent_updates_its_own_memory_unverified_and_a_person_confirms_it(
    memories: StructuredMemories,
) -> None:
    first = await memories.propose(ALICE, "fact", "pet", "Has a cat", at=T0)
    assert first is not None
    second = await memories.propose(ALICE, "fact", "pet", "Has a dog", at=T0 + timedelta(hours=1))
    assert second is not None and second[1] is StoreOutcome.UPDATED
    assert (second[0].verified, second[0].confidence) == (False, 0.7)
    # The person restating it makes it theirs: verified, confidence 1.0.
    mine, outcome = await memories.store_memory(
        ALICE, "fact", "pet", "Has a dog", at=T0 + timedelta(hours=2)
    )
    assert outcome is StoreOutcome.UPDATED
    assert (mine.source, mine.verified, mine.confidence) == (Source.USER, True, 1.0)
    history = await memories.history(ALICE, mine.id)
    assert [(v.content, v.source) for v in history] == [
        ("Has a cat", Source.AGENT),
        ("Has a dog", Source.AGENT),
    ]


async def test_verify_needs_a_persons_key_and_keeps_the_unverified_version(
    memories: StructuredMemories,
) -> None:
    proposed = await memories.propose(ALICE, "skill", "python", "Writes Python", at=T0)
    assert proposed is not None
    memory = proposed[0]
    with pytest.raises(ValueError):
        await memories.verify(ALICE, memory.id, verified_by="the model said so")
    assert (await memories.get(ALICE, memory.id)).verified is False  # type: ignore[union-attr]
    done = await memories.verify(ALICE, memory.id, verified_by="discord:99", at=T0 + timedelta(1))
    assert done is not None
    assert (done.verified, done.verified_by, done.confidence) == (True, "discord:99", 1.0)
    history = await memories.history(ALICE, memory.id)
    assert [(v.verified, v.change) for v in history] == [(False, "verify")]


async def test_expired_memories_leave_recall_but_stay_stored(
    storage: SQLiteStorage, memories: StructuredMemories
) -> None:
    await memories.store_memory(
        ALICE, "context", "trip", "Travelling to Porto", expires_at=T0 + timedelta(days=2), at=T0
    )
    await memories.store_memory(ALICE, "identity", "name", "Alice", at=T0)
    later = T0 + timedelta(days=3)
    assert [m.key for m in await memories.active(ALICE, at=T0)] == ["name", "trip"]  # newest first
    assert [m.key for m in await memories.active(ALICE, at=later)] == ["name"]
    assert "trip" in await memories.recall(ALICE, at=T0)
    assert "trip" not in await memories.recall(ALICE, at=later)
    # Still in the database and in the person's export.
    assert {m.key for m in await memories.all(ALICE)} == {"trip", "name"}
    exported = await storage.export_owner(ALICE)
    assert {m["key"] for m in exported["memories"]} == {"trip", "name"}
    assert (await memories.counts(ALICE, at=later)).expired == 1


async def test_expiring_within_days_uses_the_given_time(memories: StructuredMemories) -> None:
    for key, days in (("soon", 1), ("later", 10), ("gone", -1)):
        await memories.store_memory(
            ALICE, "context", key, f"expires in {days}", expires_at=T0 + timedelta(days=days)
        )
    await memories.store_memory(ALICE, "note", "forever", "never expires", at=T0)
    assert [m.key for m in await memories.expiring(ALICE, within_days=2, at=T0)] == ["soon"]
    assert [m.key for m in await memories.expiring(ALICE, within_days=30, at=T0)] == [
        "soon",
        "later",
    ]


async def test_recall_text_format_and_order(memories: StructuredMemories) -> None:
    await memories.store_memory(ALICE, "note", "old_low", "a low one", priority="low", at=T0)
    await memories.store_memory(
        ALICE, "preference", "food", "Loves pizza", tags=["Food", "#Italian"], at=T0
    )
    await memories.store_memory(
        ALICE, "identity", "name", "Alice", priority=Priority.CRITICAL, at=T0 - timedelta(days=9)
    )
    await memories.propose(
        ALICE, "fact", "pet", "Has a dog", tags=["pets"], at=T0 + timedelta(minutes=5)
    )
    await memories.store_memory(
        ALICE, "project", "akira", "Builds AKIRA\nin Python", priority="high", at=T0
    )
    text = await memories.recall(ALICE, at=T0 + timedelta(hours=1))
    assert text == (
        "=== STRUCTURED MEMORIES ===\n"
        "5 total (4 verified, 1 unverified)\n"
        "\n"
        "[001] identity (CRITICAL) [verified] name\n"
        "    Alice\n"
        "\n"
        "[002] project (HIGH) [verified] akira\n"
        "    Builds AKIRA\n"
        "    in Python\n"
        "\n"
        "[003] fact (NORMAL) [unverified] pet\n"
        "    Has a dog\n"
        "    Tags: pets\n"
        "\n"
        "[004] preference (NORMAL) [verified] food\n"
        "    Loves pizza\n"
        "    Tags: food, italian\n"
        "\n"
        "[005] note (LOW) [verified] old_low\n"
        "    a low one"
    )
    assert render_recall([]) == "=== STRUCTURED MEMORIES ===\n0 total (0 verified, 0 unverified)"


async def test_recall_can_be_cut_and_says_how_many_more(memories: StructuredMemories) -> None:
    for i in range(5):
        await memories.store_memory(ALICE, "note", f"n{i}", f"note {i}", at=T0 + timedelta(i))
    text = await memories.recall(ALICE, at=T0 + timedelta(days=9), limit=2)
    assert text.startswith("=== STRUCTURED MEMORIES ===\n5 total (5 verified, 0 unverified)")
    assert "[002] note (NORMAL) [verified] n3" in text and "[003]" not in text
    assert text.endswith("... and 3 more")


async def test_group_scopes_limit_what_is_recalled(memories: StructuredMemories) -> None:
    await memories.store_memory(ALICE, "fact", "secret", "Private thing", scope="dm", at=T0)
    await memories.store_memory(
        ALICE, "fact", "team", "Plays in the guild team", scope="guild:7", at=T0
    )
    assert [m.key for m in await memories.active(ALICE, at=T0, scopes=["guild:7"])] == ["team"]
    assert {m.key for m in await memories.active(ALICE, at=T0, scopes=None)} == {"secret", "team"}
    assert await memories.active(ALICE, at=T0, scopes=[]) == []


async def test_full_text_search_with_tag_filter_and_accents(memories: StructuredMemories) -> None:
    await memories.store_memory(
        ALICE, "preference", "comida", "Adora feijoada e açaí", tags=["food"], at=T0
    )
    await memories.store_memory(ALICE, "preference", "drink", "Drinks acai juice", at=T0)
    await memories.store_memory(ALICE, "project", "synapse", "Synapse memory engine", at=T0)
    await memories.store_memory(BOB, "preference", "comida", "Adora açaí também", at=T0)
    found = await memories.search(ALICE, "acai")
    assert {m.key for m in found} == {"comida", "drink"}  # accents folded, Bob excluded
    assert [m.key for m in await memories.search(ALICE, "açaí", tags=["FOOD"])] == ["comida"]
    assert [m.key for m in await memories.search(ALICE, "", tags=["food"])] == ["comida"]
    assert next(m.key for m in await memories.search(ALICE, "synapse engine")) == "synapse"
    assert [m.key for m in await memories.by_tag(ALICE, "#Food")] == ["comida"]
    assert await memories.search(ALICE, "   ") == []


@pytest.mark.parametrize(
    "hostile",
    [
        "'; DROP TABLE structured_memories; --",
        '" OR 1=1 --',
        'key" NEAR(a b) OR content:*',
        "Robert'); DELETE FROM users;--",
        "\x00\x01 NUL",
        "🙂 🔥 émoji",
    ],
)
async def test_hostile_strings_are_stored_literally_and_searched_safely(
    storage: SQLiteStorage, memories: StructuredMemories, hostile: str
) -> None:
    memory, _ = await memories.store_memory(
        ALICE, "note", "hostile", hostile, tags=[hostile[:30]], at=T0
    )
    # Kept literally, but for NUL, which no backend keeps (PostgreSQL text cannot hold it).
    stored = (await memories.get(ALICE, memory.id)).content  # type: ignore[union-attr]
    assert stored == hostile.replace("\x00", "").strip()
    await memories.search(ALICE, hostile, tags=[hostile[:30]])
    await memories.by_tag(ALICE, hostile[:30])
    await memories.find(ALICE, "note/hostile")
    # The tables are intact and the other owner's data untouched.
    await memories.store_memory(BOB, "note", "safe", "still here", at=T0)
    assert [m.content for m in await memories.all(BOB)] == ["still here"]
    assert await storage.users.count() == 0


async def test_oversized_or_empty_values_are_refused_with_a_readable_error(
    memories: StructuredMemories,
) -> None:
    cases: list[dict[str, Any]] = [
        dict(key="k" * (MAX_KEY_CHARS + 1), content="x"),
        dict(key="k" * 100_000, content="x"),
        dict(key="!!!", content="x"),
        dict(key="ok", content="x" * (MAX_CONTENT_CHARS + 1)),
        dict(key="ok", content="   "),
        dict(key="ok", content="x", tags=["t" * 33]),
        dict(key="ok", content="x", tags=[f"t{i}" for i in range(11)]),
        dict(key="ok", content="x", category="diary"),
        dict(key="ok", content="x", priority="urgent!!"),
    ]
    for case in cases:
        args: dict[str, Any] = {"category": "note", "priority": "normal", "tags": (), **case}
        with pytest.raises(MemoryValidationError):
            await memories.store_memory(
                ALICE,
                args["category"],
                args["key"],
                args["content"],
                tags=args["tags"],
                priority=args["priority"],
                at=T0,
            )
    assert await memories.all(ALICE) == []
    # An oversized search query is cut, not an error.
    assert await memories.search(ALICE, "word " * 50_000) == []


async def test_delete_removes_the_memory_and_its_history(
    storage: SQLiteStorage, memories: StructuredMemories
) -> None:
    memory, _ = await memories.store_memory(ALICE, "fact", "car", "Red car", at=T0)
    await memories.store_memory(ALICE, "fact", "car", "Blue car", at=T0 + timedelta(1))
    assert await memories.delete(ALICE, memory.id)
    assert await memories.all(ALICE) == [] and await memories.history(ALICE, memory.id) == []
    assert await memories.search(ALICE, "car") == []  # the FTS index follows


async def test_export_and_forget_owner_span_memories_and_history(
    storage: SQLiteStorage, memories: StructuredMemories
) -> None:
    await memories.store_memory(ALICE, "project", "p", "v1", at=T0)
    await memories.store_memory(ALICE, "project", "p", "v2", at=T0 + timedelta(1))
    await memories.store_memory(BOB, "project", "p", "bob's", at=T0)
    exported = await storage.export_owner(ALICE)
    assert [(m["content"], [h["content"] for h in m["history"]]) for m in exported["memories"]] == [
        ("v2", ["v1"])
    ]
    removed = await storage.forget_owner(ALICE)
    assert removed["memories"] == 2  # one memory + one history row
    assert (await storage.export_owner(ALICE))["memories"] == []
    assert [m.content for m in await memories.all(BOB)] == ["bob's"]
    assert await memories.search(ALICE, "v2") == []


async def test_update_by_id_keeps_history(memories: StructuredMemories) -> None:
    memory, _ = await memories.store_memory(ALICE, "skill", "guitar", "Beginner", at=T0)
    changed = await memories.update(
        ALICE, memory.id, content="Intermediate", priority="high", at=T0 + timedelta(1)
    )
    assert changed is not None and (changed.content, changed.priority) == (
        "Intermediate",
        Priority.HIGH,
    )
    assert [v.content for v in await memories.history(ALICE, memory.id)] == ["Beginner"]
    assert await memories.update(BOB, memory.id, content="hijack") is None


async def test_counts_for_one_owner_and_everyone(memories: StructuredMemories) -> None:
    await memories.store_memory(ALICE, "note", "a", "a", at=T0)
    await memories.propose(ALICE, "note", "b", "b", at=T0)
    await memories.store_memory(BOB, "note", "c", "c", at=T0)
    alice = await memories.counts(ALICE)
    everyone = await memories.counts()
    assert (alice.total, alice.verified, alice.unverified) == (2, 1, 1)
    assert (everyone.total, everyone.verified, everyone.unverified) == (3, 2, 1)


async def test_schema_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "akira.db"
    async with SQLiteStorage(path) as first:
        await StructuredMemories(first.memories).store_memory(ALICE, "note", "k", "kept", at=T0)
    async with SQLiteStorage(path) as second:
        memories = StructuredMemories(second.memories)
        assert [m.content for m in await memories.search(ALICE, "kept")] == ["kept"]
