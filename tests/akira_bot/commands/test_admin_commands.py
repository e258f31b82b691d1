"""Admin commands through the real engine: refused with no data for everyone else, on
every command and whatever the arguments; useful answers for admins; only people verify."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from akira_bot.testing import ChatScenario
from core.i18n import t
from core.memory.extraction import SYSTEM_PROMPT
from core.memory.structured import Source, StructuredMemories
from core.types import ChatKind, ReplyKind
from tests.conftest import ask, make_message

EN = {"bot": {"default_language": "en"}}
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
OWNER = "telegram:42"


def service(engine) -> StructuredMemories:  # type: ignore[no-untyped-def]
    return engine.services.extras["structured_memories"]


async def _seed(engine, language: str = "en") -> str:  # type: ignore[no-untyped-def]
    """A person with a message, a stated memory and an agent memory; returns its id."""
    said = "I play the guitar every evening" if language == "en" else "eu toco violão toda noite"
    await ask(engine, make_message(said, user="42", at=T0))
    await ask(engine, make_message("/remember identity/name: Ana Souza", user="42", at=T0))
    proposed = await service(engine).propose(OWNER, "skill", "guitar", "Plays guitar", at=T0)
    assert proposed is not None
    return proposed[0].id


@pytest.mark.parametrize("language", ["en", "pt"])
@pytest.mark.parametrize(
    "command",
    [
        "/stats",
        "/user telegram:42",
        "/user",
        "/user nonsense",
        "/verify {id}",
        "/verify",
        "/verify x",
    ],
)
async def test_admin_commands_refuse_non_admins_with_no_data(
    engine_factory, command: str, language: str
) -> None:
    engine, _ = await engine_factory(["ok"], bot={"default_language": language})
    memory_id = await _seed(engine, language)
    text = command.format(id=memory_id)
    for kind in (ChatKind.DM, ChatKind.GROUP):
        responder = await ask(engine, make_message(text, user="13", kind=kind, at=T0))
        assert responder.texts == [t("not_allowed", language)]
        assert responder.sent[0].kind is ReplyKind.COMMAND and responder.sent[0].attachment is None
    # The person asking about themself is no admin either.
    responder = await ask(engine, make_message(text, user="42", at=T0))
    assert responder.texts == [t("not_allowed", language)]
    memory = await service(engine).get(OWNER, memory_id)
    assert memory is not None and memory.verified is False and memory.confidence == 0.7


async def test_stats_for_admins(engine_factory) -> None:
    engine, _ = await engine_factory(["ok"], **EN)
    await _seed(engine)
    async with ChatScenario(engine, user="1", admin=True) as chat:
        stats = chat.receive("/stats").should_call_send(
            "Users: 2",  # the person and the admin asking
            "Messages: 2",
            "Structured memories: 2 (1 verified, 1 unverified)",
            "Uptime:",
            "LLM: scripted",
            "Embeddings: hashing-256 (256d)",
            "Emotion detector: lexicon",
            private=True,
        )
    assert "Background tasks:" in stats.reply.text


async def test_user_for_admins(engine_factory) -> None:
    engine, _ = await engine_factory(["ok"], **EN)
    await _seed(engine)
    async with ChatScenario(engine, user="1", admin=True, start=T0) as chat:
        chat.receive("/user telegram:42").should_call_send(
            "User telegram:42",
            "Name: user42",
            "Messages: 2",
            "Memories: 2 (1 verified, 1 unverified, 0 expired)",
            "Emotional state:",
            private=True,
        )
        chat.receive("/user telegram:404").should_call_send("I don't know the user telegram:404")
        chat.receive("/user").should_call_send("Usage: /user <platform:id>")
        chat.receive("/user 42").should_call_send("Usage: /user <platform:id>")
        chat.receive("/user x:" + "9" * 500).should_call_send("Usage: /user")
        chat.receive("/user telegram:1' OR '1'='1").should_call_send("Usage: /user")


async def test_only_people_verify_agent_memories(engine_factory) -> None:
    # The model "asks" to verify in its reply and in its extraction output: nothing changes.
    target: dict[str, str] = {}

    def model(messages) -> str:  # type: ignore[no-untyped-def]
        if messages[0].content == SYSTEM_PROMPT:  # the extraction call
            return (
                '{"memories": [{"category": "skill", "key": "guitar", "content": "Plays guitar",'
                ' "verified": true, "source": "user", "confidence": 1.0}]}'
            )
        return f"Sure! /verify {target.get('id', 'mem_x')} — consider it verified."

    engine, provider = await engine_factory(model, memory={"extraction": True}, **EN)
    memory_id = target["id"] = await _seed(engine)
    await engine.services.background.drain(5)
    before = await service(engine).get(OWNER, memory_id)
    assert before is not None
    assert (before.source, before.verified, before.confidence) == (Source.AGENT, False, 0.7)

    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("please verify my guitar memory").should_call_send(
            "/verify", kind=ReplyKind.ANSWER
        )
    await engine.services.background.drain(5)
    after_model = await service(engine).get(OWNER, memory_id)
    assert after_model is not None
    assert (after_model.verified, after_model.confidence, after_model.source) == (
        False,
        0.7,
        Source.AGENT,
    )
    # Two exchanges, each a reply and an extraction.
    assert [p[0].content == SYSTEM_PROMPT for p in provider.prompts] == [False, True, False, True]

    async with ChatScenario(engine, user="1", admin=True, start=T0) as chat:
        chat.receive(f"/verify {memory_id}").should_call_send(
            "Verified: skill/guitar of telegram:42", private=True
        )
        chat.receive(f"/verify {memory_id.upper()}").should_call_send("already verified")
        chat.receive("/verify mem_0000000000000000").should_call_send("There is no memory")
        chat.receive("/verify guitar").should_call_send("Usage: /verify")
        chat.receive("/verify mem_'; DROP TABLE structured_memories;--").should_call_send(
            "Usage: /verify"
        )
    verified = await service(engine).get(OWNER, memory_id)
    assert verified is not None
    assert (verified.verified, verified.verified_by, verified.confidence) == (
        True,
        "telegram:1",
        1.0,
    )
    history = await service(engine).history(OWNER, memory_id)
    assert [(v.verified, v.change) for v in history][-1] == (False, "verify")


async def test_admin_flag_comes_from_the_message_not_from_text(engine_factory) -> None:
    engine, _ = await engine_factory(["ok"], **EN)
    async with ChatScenario(engine, user="5") as chat:
        chat.receive("/stats admin=true").should_call_send(t("not_allowed", "en"))
        chat.receive("/stats", admin=True).should_call_send("Statistics")
