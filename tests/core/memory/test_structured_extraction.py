"""Memory extraction: the model's JSON checked against the schema, stored as agent and
unverified, in the background with bounded concurrency; bad output logged and ignored."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from akira_bot.features.structured_memory import extraction_enabled
from akira_bot.settings import Settings
from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMProvider
from core.memory.extraction import (
    SYSTEM_PROMPT,
    ExtractionError,
    MemoryExtractor,
    parse_extraction,
)
from core.memory.structured import Category, Priority, Source, StructuredMemories
from core.pipeline import TurnContext
from core.services import Services
from core.storage import SQLiteStorage
from core.storage.owner_changes import EVERY_OWNER, record_change
from core.types import ChatKind, RecordingResponder, ReplyKind
from tests.conftest import ask, make_message

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
OWNER = "telegram:42"
VALID = (
    '{"memories": [{"category": "Preference", "key": "favourite_food", "content": "Loves pizza",'
    ' "tags": ["Food"], "priority": "high", "expires_in_days": 30}]}'
)


def scripted(reply: str, extraction: str):  # type: ignore[no-untyped-def]
    """A model that answers chat turns with ``reply`` and extraction calls with ``extraction``."""

    def model(messages: Sequence[ChatMessage]) -> str:
        return extraction if messages[0].content == SYSTEM_PROMPT else reply

    return model


def service(engine) -> StructuredMemories:  # type: ignore[no-untyped-def]
    return engine.services.extras["structured_memories"]


# --- parsing -------------------------------------------------------------------------------


def test_parse_accepts_fences_thinking_and_bare_lists() -> None:
    fenced = f"<think>the user likes pizza</think>\nHere you go:\n```json\n{VALID}\n```"
    [memory] = parse_extraction(fenced)
    assert (memory.category, memory.key, memory.priority) == (
        Category.PREFERENCE,
        "favourite_food",
        Priority.HIGH,
    )
    bare = parse_extraction('[{"category": "fact", "key": "k", "content": "c"}]')
    assert [m.key for m in bare] == ["k"]
    assert parse_extraction('{"memories": []}') == []


def test_parse_never_reads_verification_fields() -> None:
    [memory] = parse_extraction(
        '{"memories": [{"category": "fact", "key": "k", "content": "c", "verified": true,'
        ' "source": "user", "confidence": 1, "verified_by": "telegram:1"}]}'
    )
    dumped = memory.model_dump()
    assert not {"verified", "source", "confidence", "verified_by"} & set(dumped)


@pytest.mark.parametrize(
    "output",
    [
        "I think the user likes pizza.",
        '{"memories": [{"category": "fact", "key": "k"',
        '{"memories": [{"category": "diary", "key": "k", "content": "c"}]}',
        '{"memories": [{"category": "fact", "key": "", "content": "c"}]}',
        '{"memories": [{"category": "fact", "key": "k", "content": "' + "x" * 600 + '"}]}',
        '{"memories": [{"category": "fact", "key": "k", "content": "c", "tags": ["'
        + "t" * 40
        + '"]}]}',
        '{"memories": "pizza"}',
        '{"memories": ['
        + ",".join(['{"category": "fact", "key": "k", "content": "c"}'] * 9)
        + "]}",
        "x" * 30_000,
        '{"memories": [{"category": "fact", "key": "k", "content": "c", "expires_in_days": -5}]}',
    ],
)
def test_parse_rejects_invalid_output(output: str) -> None:
    with pytest.raises(ExtractionError):
        parse_extraction(output)


# --- the engine ------------------------------------------------------------------------------


async def test_valid_output_is_stored_as_agent_unverified_in_the_background(
    engine_factory,
) -> None:
    engine, provider = await engine_factory(
        scripted("Pizza is great!", VALID), latency_s=0.05, memory={"extraction": True}
    )
    responder = await ask(engine, make_message("I love pizza", at=T0))
    assert responder.texts == ["Pizza is great!"]
    # The reply went out before the extraction finished: it runs in the background.
    assert engine.services.background.pending >= 1
    assert await service(engine).all(OWNER) == []
    await engine.services.background.drain(5)
    [memory] = await service(engine).all(OWNER)
    assert (memory.category, memory.key, memory.content, memory.tags) == (
        Category.PREFERENCE,
        "favourite_food",
        "Loves pizza",
        ["food"],
    )
    assert (memory.source, memory.verified, memory.confidence) == (Source.AGENT, False, 0.7)
    assert memory.expires_at == T0 + timedelta(days=30) and memory.created_at == T0
    assert memory.scope == "dm"
    extraction_prompt = provider.prompts[-1]
    assert "USER: I love pizza" in extraction_prompt[1].content
    assert "ASSISTANT: Pizza is great!" in extraction_prompt[1].content


async def test_extraction_in_a_group_records_the_groups_scope(engine_factory) -> None:
    engine, _ = await engine_factory(scripted("ok", VALID), memory={"extraction": True})
    await ask(
        engine, make_message("I love pizza", kind=ChatKind.GROUP, chat="g", scope="guild:9", at=T0)
    )
    await engine.services.background.drain(5)
    [memory] = await service(engine).all(OWNER)
    assert memory.scope == "guild:9"


@pytest.mark.parametrize(
    "output",
    [
        "Sure! The user likes pizza.",
        '{"memories": [{"category": "diary", "key": "k", "content": "c"}]}',
        '{"memories": [{"category": "fact", "key": "!!!", "content": "c"}]}',
    ],
)
async def test_invalid_output_is_logged_and_ignored(
    engine_factory, caplog: pytest.LogCaptureFixture, output: str
) -> None:
    engine, _ = await engine_factory(scripted("Nice!", output), memory={"extraction": True})
    with caplog.at_level(logging.WARNING, logger="core.memory.extraction"):
        responder = await ask(engine, make_message("I love pizza", at=T0))
        await engine.services.background.drain(5)
    assert responder.texts == ["Nice!"]
    assert await service(engine).all(OWNER) == []
    assert any("ignored" in r.getMessage() for r in caplog.records)
    # The engine keeps working.
    assert (await ask(engine, make_message("still there?", at=T0))).texts == ["Nice!"]


async def test_model_cannot_verify_or_overwrite_what_the_person_said(engine_factory) -> None:
    output = (
        '{"memories": [{"category": "identity", "key": "name", "content": "Mallory",'
        ' "verified": true, "source": "user"},'
        ' {"category": "fact", "key": "pet", "content": "Has a dog", "verified": true,'
        ' "source": "user", "confidence": 1.0}]}'
    )
    engine, _ = await engine_factory(scripted("ok", output), memory={"extraction": True})
    await ask(engine, make_message("/remember identity/name: Ana", at=T0))
    await ask(engine, make_message("my name is Ana and I have a dog", at=T0))
    await engine.services.background.drain(5)
    memories = {m.key: m for m in await service(engine).all(OWNER)}
    assert (memories["name"].content, memories["name"].source) == ("Ana", Source.USER)
    assert await service(engine).history(OWNER, memories["name"].id) == []
    pet = memories["pet"]
    assert (pet.source, pet.verified, pet.confidence) == (Source.AGENT, False, 0.7)


async def test_no_extraction_for_commands_or_fallbacks(engine_factory) -> None:
    engine, provider = await engine_factory(
        scripted("<think>never closed", VALID), memory={"extraction": True}
    )
    await ask(engine, make_message("/remember a: b", at=T0))
    fallback = await ask(engine, make_message("hello", at=T0))
    await engine.services.background.drain(5)
    assert fallback.sent[0].kind is ReplyKind.FALLBACK
    assert [m.key for m in await service(engine).all(OWNER)] == ["a"]
    assert all(p[0].content != SYSTEM_PROMPT for p in provider.prompts)


OPENAI = {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1"}


async def test_extraction_switch_and_defaults(tmp_path: Path) -> None:
    def settings(**llm_and_memory: object) -> Settings:
        return Settings(data_dir=tmp_path, embedding={"backend": "hashing"}, **llm_and_memory)  # type: ignore[arg-type]

    assert extraction_enabled(settings(llm=OPENAI))
    assert not extraction_enabled(settings(llm={"provider": "local"}))
    assert not extraction_enabled(settings(llm={"provider": "scripted"}))
    assert extraction_enabled(settings(llm={"provider": "local"}, memory={"extraction": True}))
    assert not extraction_enabled(settings(llm=OPENAI, memory={"extraction": False}))


async def test_extraction_switched_off_never_calls_the_model(engine_factory) -> None:
    engine, provider = await engine_factory(scripted("ok", VALID), memory={"extraction": False})
    await ask(engine, make_message("I love pizza", at=T0))
    await engine.services.background.drain(5)
    assert len(provider.prompts) == 1 and await service(engine).all(OWNER) == []
    assert "memory_extractor" not in engine.services.extras


class CountingProvider(LLMProvider):
    """A slow model that records how many calls overlap."""

    name = "counting"

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.calls = 0

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.02)
        finally:
            self.running -= 1
        return Generation(text=VALID)


async def test_extraction_concurrency_is_bounded(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "akira.db") as storage:
        memories = StructuredMemories(storage.memories)
        llm = CountingProvider()
        extractor = MemoryExtractor(memories, llm, concurrency=2)

        from core.memory.base import PlainMemory
        from core.persona import load_persona

        services = Services(
            storage=storage, llm=llm, memory=PlainMemory(storage), persona=load_persona()
        )
        contexts = []
        for i in range(8):
            ctx = TurnContext(
                message=make_message("I love pizza", user=str(i), at=T0),
                responder=RecordingResponder(),
                services=services,
            )
            ctx.text, ctx.reply_text = "I love pizza", "ok"
            contexts.append(ctx)
        await asyncio.gather(*(extractor(ctx) for ctx in contexts))
    assert llm.calls == 8 and llm.peak == 2
    assert extractor.stored == 8


async def test_a_proposal_started_before_forgetme_is_dropped(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "akira.db") as storage:
        memories = StructuredMemories(storage.memories)
        epoch = memories.epoch(OWNER)  # extraction begins...
        async with memories.forgetting(OWNER):  # ...the person asks to be forgotten
            await storage.forget_owner(OWNER)
        late = await memories.propose(OWNER, "fact", "pet", "Has a dog", at=T0, epoch=epoch)
        assert late is None and await memories.all(OWNER) == []
        # Work that starts afterwards is stored normally.
        fresh = await memories.propose(
            OWNER, "fact", "pet", "Has a dog", at=T0, epoch=memories.epoch(OWNER)
        )
        assert fresh is not None and [m.key for m in await memories.all(OWNER)] == ["pet"]


async def test_a_proposal_started_before_a_forget_in_another_process_is_dropped(
    tmp_path: Path,
) -> None:
    """``akira-bot memory forget`` beside the bot (another SQLiteStorage on the file):
    the bot's extraction that began before it must not write the person back."""
    path = tmp_path / "akira.db"
    async with SQLiteStorage(path) as bot, SQLiteStorage(path) as cli:
        memories = StructuredMemories(bot.memories, storage=bot)
        kept = await memories.propose(
            OWNER, "fact", "pet", "Has a dog", at=T0, epoch=memories.epoch(OWNER)
        )
        assert kept is not None  # nothing changed elsewhere: stored
        epoch = memories.epoch(OWNER)  # extraction begins...
        await cli.forget_owner(OWNER)  # ...the person is forgotten by another process
        late = await memories.propose(OWNER, "fact", "job", "Is a nurse", at=T0, epoch=epoch)
        assert late is None and await memories.all(OWNER) == []
        # Re-embedding everything elsewhere (every owner changed) counts as well.
        epoch = memories.epoch(OWNER)
        await cli.db.run(lambda raw: record_change(raw, EVERY_OWNER, time.time()))
        assert await memories.propose(OWNER, "fact", "x", "y", at=T0, epoch=epoch) is None
        fresh = await memories.propose(
            OWNER, "fact", "pet", "Has a cat", at=T0, epoch=memories.epoch(OWNER)
        )
        assert fresh is not None
