"""On PostgreSQL the prompt's structured memories ride on the recall's full-text search:
a message that says it will ask for them (``expect_entries``) gets them, in order and as
another process left them, without a statement of their own; the read answers that
message once, never a later one, and never another time or scope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from akira_bot.testing.messages import ask, make_message
from core.llm import ScriptedProvider
from core.storage.postgres import PostgresStorage
from core.storage.records import NodeType
from tests.core.storage.conftest import statements_sent
from tests.core.storage.contract.test_contract import MODEL, unit
from tests.core.storage.test_postgres_kept_nodes import turn
from tests.postgres import postgres_database

A = "telegram:1"
OWNERS = [A]
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
AT = T0 + timedelta(hours=1)


@pytest.fixture
async def two(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> tuple[PostgresStorage, PostgresStorage]:
    first, second = two_processes
    for store in (first, second):
        await store.graph.check_model(MODEL, 8)
    await first.graph.add_node(turn("n1", 1), vector=unit(1), model=MODEL)
    # Written by the other process: the ride reads the database, nothing kept.
    await second.memories.upsert(A, "fact", "pet", "has a cat named Miso", at=T0)
    await second.memories.upsert(
        A, "identity", "name", "is called Ana", priority="critical", at=T0 + timedelta(1)
    )
    await second.memories.upsert(A, "note", "gone", "expired", expires_at=T0, at=T0)
    await second.memories.upsert(A, "fact", "work", "works in a group", scope="g1", at=T0)
    return first, second


async def test_the_prompts_memories_ride_on_the_full_text_search(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    wanted = await second.memories.entries(A, at=AT, scopes=["dm"])
    assert [m.key for m in wanted] == ["name", "pet"]
    async with first.serving(A):
        first.memories.expect_entries(A, at=AT, scopes=["dm"])
        with statements_sent(first.db) as sent:
            hits = await first.graph.text_search(A, "turn n1", k=5)
            found = await first.memories.entries(A, at=AT, scopes=["dm"])
        first.memories.unexpect_entries(A)
    assert [h for h, _ in hits] == ["n1"]
    assert found == wanted
    assert len(sent) == 1  # one round trip for both


async def test_the_ride_answers_once_and_only_what_was_expected(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two
    async with first.serving(A):
        first.memories.expect_entries(A, at=AT, scopes=["dm"])
        await first.graph.text_search(A, "turn", k=5)
        with statements_sent(first.db) as sent:
            # Another time, another scope: read on their own.
            before = await first.memories.entries(A, at=T0 - timedelta(1), scopes=["dm"])
            everywhere = await first.memories.entries(A, at=AT)
        assert [m.key for m in before] == ["name", "gone", "pet"]
        assert sorted(m.key for m in everywhere) == ["name", "pet", "work"]
        assert len(sent) == 2
        # What was expected, from the ride; then a forget-me by the other process: the
        # message already read (as a statement of its own would have, a moment
        # earlier); a second ask is not answered from the ride again.
        with statements_sent(first.db) as sent:
            assert [m.key for m in await first.memories.entries(A, at=AT, scopes=["dm"])] == [
                "name",
                "pet",
            ]
        assert sent == []
        await second.memories.delete_owner(A)
        with statements_sent(first.db) as sent:
            assert await first.memories.entries(A, at=AT, scopes=["dm"]) == []
        assert len(sent) == 1
        # Expected but the message ended before asking: never answered later.
        first.memories.expect_entries(A, at=AT, scopes=["dm"])
        first.memories.unexpect_entries(A)
        with statements_sent(first.db) as sent:
            await first.graph.text_search(A, "turn", k=5)
        assert len(sent) == 1 and "structured_memories" not in sent[0]


async def test_the_latest_node_and_the_latest_of_a_type_in_one_round_trip(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    """A new message's follow-up links ask for both; the other process keeps nothing of
    the person, so it reads them, in one statement, as two reads would have found them."""
    first, second = two
    reply = turn("r1", 2)
    reply.type = NodeType.AKIRA_RESPONSE
    await first.graph.add_node(reply, vector=unit(2), model=MODEL)
    at = T0 + timedelta(minutes=3)
    for node_type in (NodeType.USER_MESSAGE.value, NodeType.AKIRA_RESPONSE.value, "none"):
        with statements_sent(second.db) as sent:
            both = await second.graph.latest_nodes(A, at=at, exclude="n9", node_type=node_type)
        assert len(sent) == 1
        assert both == (
            await second.graph.latest_node(A, at=at, exclude="n9"),
            await second.graph.latest_node(A, at=at, exclude="n9", node_type=node_type),
        )
    assert both[0] is not None and both[0][0] == "r1" and both[1] is None


async def test_a_message_on_postgres_reads_its_memories_with_its_full_text_search(
    tmp_path: Path,
) -> None:
    """The real pipeline: ``structured_expect`` before ``recall`` makes the prompt's
    memories ride on the recall's search; the prompt holds them all the same."""
    async with postgres_database() as dsn:
        settings = Settings.model_validate(
            {
                "data_dir": tmp_path,
                "llm": {"provider": "scripted"},
                "embedding": {"backend": "hashing"},
                "emotion": {"detector": "lexicon"},
                "memory": {"extraction": False},
                "storage": {"backend": "postgres", "postgres_dsn": dsn},
            }
        )
        provider = ScriptedProvider(["oi", "ok"])
        engine = build_engine(settings, llm=provider)
        async with engine:
            names = engine.pipeline.names
            assert names.index("structured_expect") < names.index("recall")
            await ask(engine, make_message("hello there, my cat sleeps", at=T0))
            owner = "telegram:42"
            await engine.storage.memories.upsert(owner, "fact", "pet", "has a cat named Miso")
            db = engine.storage.db  # type: ignore[attr-defined]
            with statements_sent(db) as sent:
                await ask(engine, make_message("what about my cat?", at=AT))
        assert "has a cat named Miso" in "\n".join(m.content for m in provider.prompts[-1])
        assert not [s for s in sent if s.startswith("SELECT m.id")]  # no read of its own
        assert [s for s in sent if "structured_memories m" in s and "ts_rank" in s]
