"""``/mood`` corrections through the real engine (lexicon detector, SQLite): the person
says how they felt, the state follows, the message's emotion is corrected, a labelled
example is kept; bad input gets the usage and changes nothing. And admins' /stats shows
the feedback ratio and the corrections per emotion, as numbers only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from akira_bot.commands.mood import MoodClaim, parse_claim
from core.emotion.state import EmotionalState
from core.llm.base import ChatMessage
from core.storage.feedback_records import Rating, ReplyRating
from core.storage.records import NodeType
from tests.conftest import ask, make_message

EN = {"bot": {"default_language": "en"}}
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
OWNER = "telegram:42"
STRICT_TAG = "<!STRICT_MODE_AGGRESSIVE>"


@pytest.mark.parametrize(
    ("words", "claim"),
    [
        ("feliz", MoodClaim(stated="feliz")),
        ("Happy", MoodClaim(stated="feliz")),
        ("not angry", MoodClaim(denied="agressivo")),
        ("não agressivo", MoodClaim(denied="agressivo")),
        ("eu NÃO estava irritado", MoodClaim(denied="agressivo")),
        ("I wasn't angry", MoodClaim(denied="agressivo")),
        ("I wasn’t mad, I was sad", MoodClaim(denied="agressivo", stated="triste")),
        ("não estava bravo, estava confusa", MoodClaim(denied="agressivo", stated="confuso")),
        ("nao triste", MoodClaim(denied="triste")),
    ],
)
def test_the_forms_of_a_correction(words: str, claim: MoodClaim) -> None:
    assert parse_claim(words) == claim


@pytest.mark.parametrize(
    "words", ["banana", "", "not", "happy and sad", "not happy, not sad", "not happy, happy"]
)
def test_sentences_naming_no_single_state_are_refused(words: str) -> None:
    assert parse_claim(words) is None


async def _state(engine: Any) -> EmotionalState:
    record = await engine.storage.users.get(OWNER)
    return EmotionalState.from_dict(record.profile.get("emotion"))


def _system(prompt: list[ChatMessage]) -> str:
    return "\n".join(m.content for m in prompt if m.role == "system")


async def test_i_was_not_angry_takes_the_anger_back(engine_factory: Any) -> None:
    engine, provider = await engine_factory(["ok"], **EN)
    await ask(engine, make_message("I am so angry with this!", at=T0))
    before = await _state(engine)
    (misread,) = [
        n for n in await engine.storage.nodes.recent(OWNER) if n.type is NodeType.USER_MESSAGE
    ]
    assert misread.emotion == "agressivo"  # the lexicon's reading
    assert before.emotional_state == "agressivo" and before.is_hostile
    assert STRICT_TAG in _system(provider.prompts[-1])

    at = T0 + timedelta(minutes=1)
    answer = await ask(engine, make_message("/mood I wasn't angry", at=at))
    (reply,) = answer.sent
    assert reply.private
    assert "irritated" in reply.text and "neutral" in reply.text

    after = await _state(engine)
    assert after.emotional_state == "neutro" and after.emotion_confidence_score == 1.0
    assert not after.is_hostile and after.aggressive_count == 0
    assert after.last_aggressive_at is None
    assert [e.emotion for e in after.emotion_history] == ["neutro"]  # the misread, relabelled
    node = await engine.storage.nodes.get(OWNER, misread.id)
    assert (node.emotion, node.emotion_score) == ("neutro", 1.0)
    (example,) = await engine.storage.feedback.corrections(OWNER)
    assert (example.text, example.predicted, example.corrected) == (
        "I am so angry with this!",
        "agressivo",
        "neutro",
    )
    assert example.node_id == misread.id and example.at == at
    assert example.predicted_score == misread.emotion_score

    # The next reply is no longer in the strict tone, and no grudge is held.
    await ask(engine, make_message("what time is it?", at=at + timedelta(minutes=1)))
    assert STRICT_TAG not in _system(provider.prompts[-1])
    assert "history of being demanding" not in _system(provider.prompts[-1])


async def test_a_state_named_in_portuguese_becomes_the_state(engine_factory: Any) -> None:
    engine, _ = await engine_factory(["ok"])
    await ask(engine, make_message("estou muito triste hoje", at=T0))
    assert (await _state(engine)).emotional_state == "triste"
    answer = await ask(engine, make_message("/mood na verdade eu estava feliz", at=T0))
    assert "Entendi" in answer.texts[0] and "feliz" in answer.texts[0]
    assert (await _state(engine)).emotional_state == "feliz"
    (example,) = await engine.storage.feedback.corrections(OWNER)
    assert (example.predicted, example.corrected) == ("triste", "feliz")
    shown = await ask(engine, make_message("/mood", at=T0 + timedelta(minutes=1)))
    assert "feliz (100%)" in shown.texts[0]


async def test_bad_or_pointless_corrections_change_nothing(engine_factory: Any) -> None:
    engine, _ = await engine_factory(["ok"], **EN)
    early = await ask(engine, make_message("/mood happy", at=T0))
    assert early.texts == ["I haven't read your mood yet: chat with me a little first."]
    await ask(engine, make_message("I am so angry with this!", at=T0))
    state = (await _state(engine)).to_dict()

    usage = await ask(engine, make_message("/mood banana", at=T0))
    assert usage.texts[0].startswith("Usage: /mood") and "/mood not <state>" in usage.texts[0]
    confused = await ask(engine, make_message("/mood happy and sad", at=T0))
    assert confused.texts == usage.texts
    not_read = await ask(engine, make_message("/mood not sad", at=T0))
    assert "haven't read any recent message of yours as sad" in not_read.texts[0]
    same = await ask(engine, make_message("/mood angry", at=T0))
    assert "That's how I read your last message: irritated" in same.texts[0]

    assert (await _state(engine)).to_dict() == state
    assert await engine.storage.feedback.corrections(OWNER) == []


async def test_stats_shows_the_feedback_ratio_and_corrections_per_emotion(
    engine_factory: Any,
) -> None:
    engine, _ = await engine_factory(["ok"], **EN)
    empty = await ask(engine, make_message("/stats", user="1", admin=True, at=T0))
    assert "Reply ratings: 👍 0 / 👎 0\n" in empty.texts[0]
    assert empty.texts[0].endswith("Mood corrections (/mood): 0")

    await ask(engine, make_message("I am so angry with this!", at=T0))
    await ask(engine, make_message("/mood not angry", at=T0))
    await ask(engine, make_message("I am so angry with this!", user="7", at=T0))
    await ask(engine, make_message("/mood I was sad", user="7", at=T0))
    for owner, node, kind in [
        (OWNER, "r1", Rating.UP),
        (OWNER, "r2", Rating.UP),
        ("telegram:7", "r3", Rating.DOWN),
    ]:
        await engine.storage.feedback.rate(
            ReplyRating(owner, node, kind, "c", "m", "👍" if kind is Rating.UP else "👎", T0)
        )
    stats = await ask(engine, make_message("/stats", user="1", admin=True, at=T0))
    (reply,) = stats.sent
    assert reply.private
    assert "Reply ratings: 👍 2 / 👎 1 (67% positive)" in reply.text
    assert "Mood corrections (/mood): 2; read as: irritated 2" in reply.text
    assert "angry with this" not in reply.text  # numbers only, no one's words
    pt = await ask(engine, make_message("/stats", user="1", admin=True, at=T0, locale="pt-BR"))
    assert "Avaliações das respostas: 👍 2 / 👎 1 (67% positivas)" in pt.texts[0]
    assert "lido como: irritado(a) 2" in pt.texts[0]
