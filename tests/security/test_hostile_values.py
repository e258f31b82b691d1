"""SQL-injection strings, full-text query syntax and oversized values in every field a
person controls (user id, display name, message text = the recall query, memory keys,
contents and tags, command arguments): no error, stored literally, and never another
person's data in the prompt or the reply."""

from __future__ import annotations

from core.storage import NodeType
from core.types import ReplyKind
from tests.conftest import ask, make_message

HOSTILE = [
    "'; DROP TABLE nodes; --",
    "Robert'); DROP TABLE users;--",
    "1' OR '1'='1",
    '" OR ""="',
    "x' UNION SELECT content FROM nodes --",
    "%' OR owner LIKE '%",
    "telegram:victim",
    "\\'; DELETE FROM structured_memories; --",
    # FTS5 query syntax: a MATCH built from user text must not break or widen the search.
    '"unbalanced',
    "NEAR(segredo vitima)",
    "owner:telegram* OR content:*",
    "a AND OR NOT b",
    "^segredo",
    "{owner content}: segredo",
    "*",
    "-",
    "(((",
]
VICTIM_SECRET = "segredo da vitima cofre 7731"


async def test_hostile_strings_everywhere_are_stored_literally_and_isolated(
    engine_factory,
) -> None:
    engine, provider = await engine_factory(
        lambda messages: "ok", bot={"rate_limit_messages": 0}, memory={"extraction": False}
    )
    victim = make_message(f"meu {VICTIM_SECRET}", user="victim")
    assert (await ask(engine, victim)).texts == ["ok"]
    await ask(engine, make_message(f"/remember cofre: {VICTIM_SECRET}", user="victim"))
    victim_nodes = await engine.storage.nodes.count("telegram:victim")

    for i, value in enumerate(HOSTILE):
        user = f"{value}-{i}"  # the id itself is hostile
        for text in (value, f"segredo vitima cofre {value}"):
            message = make_message(text, user=user, name=value)
            responder = await ask(engine, message)
            kinds = [r.kind for r in responder.sent]
            assert ReplyKind.ANSWER in kinds, (value, responder.texts)
            assert ReplyKind.FALLBACK not in kinds, (value, responder.texts)
            prompt = "\n".join(m.content for m in provider.prompts[-1])
            assert VICTIM_SECRET not in prompt, value
        remembered = await ask(
            engine, make_message(f"/remember {value[:40]}: valor {value}", user=user, name=value)
        )
        assert remembered.sent and remembered.sent[0].kind is not ReplyKind.FALLBACK
        listed = await ask(engine, make_message("/memories", user=user, name=value))
        assert all(VICTIM_SECRET not in text for text in listed.texts)

        owner = f"telegram:{user}"
        record = await engine.storage.users.get(owner)
        assert record is not None and record.display_name == value
        stored = [
            n.content
            for n in await engine.storage.nodes.recent(owner, limit=20)
            if n.type is NodeType.USER_MESSAGE
        ]
        assert value.strip() in stored

    # Nothing was dropped, widened or deleted: the victim's data is intact and theirs only.
    assert await engine.storage.nodes.count("telegram:victim") == victim_nodes
    export = await engine.storage.export_owner("telegram:victim")
    assert VICTIM_SECRET in repr(export)
    assert await engine.storage.users.count() == len(HOSTILE) + 1


async def test_oversized_values_are_bounded_not_errors(engine_factory) -> None:
    engine, provider = await engine_factory(
        lambda messages: "ok",
        bot={"rate_limit_messages": 0, "max_input_chars": 2000},
        memory={"extraction": False},
    )
    huge_id = "9" * 5000
    huge_name = "N" * 100_000
    huge_text = "palavra " * 200_000  # 1.6 MB
    responder = await ask(engine, make_message(huge_text, user=huge_id, name=huge_name))
    assert [r.kind for r in responder.sent] == [ReplyKind.NOTICE, ReplyKind.ANSWER]
    assert len(provider.prompts[-1][-1].content) <= 2000
    owner = f"telegram:{huge_id}"
    stored = await engine.storage.nodes.recent(owner, limit=5)
    assert stored and len(stored[0].content) <= 2000

    long_key = "k" * 10_000
    result = await ask(engine, make_message(f"/remember {long_key}: {'v' * 50_000}", user="7"))
    assert result.sent and result.sent[0].kind is not ReplyKind.FALLBACK
    # A bounded memory store: whatever was kept is within the limits, nothing crashed.
    export = await engine.storage.export_owner("telegram:7")
    for memory in export.get("memories") or []:
        assert len(str(memory.get("key", ""))) <= 200
        assert len(str(memory.get("content", ""))) <= 4000
    again = await ask(engine, make_message("ainda funciona?", user="7"))
    assert again.texts == ["ok"]
