"""The everyone-commands through the real engine: a real SQLite file in tmp_path, the
scripted LLM and a recording responder (via the NoneBug-style ``ChatScenario``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from akira_bot.testing import ChatScenario
from core.i18n import t
from core.memory.structured import Source, StructuredMemories
from core.types import ChatKind, ReplyKind
from tests.conftest import ask, make_message

EN = {"bot": {"default_language": "en"}}
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def service(engine) -> StructuredMemories:  # type: ignore[no-untyped-def]
    return engine.services.extras["structured_memories"]


async def test_start_and_help_in_both_languages(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, name="Ana") as chat:
        chat.receive("/start").should_call_send("Hi, Ana! I'm AKIRA", "/help")
        user_help = chat.receive("/help").should_call_send(
            "/remember", "/memories", "/forget", "/forgetme", "/export", "/mood", absent=("/stats",)
        )
        admin_help = chat.receive("/help", admin=True, user="1").should_call_send(
            "For admins:", "/stats", "/user <platform:id>", "/verify <mem_id>"
        )
    assert "Remember something about you" in user_help.reply.text
    assert admin_help.reply.text.index("/mood") < admin_help.reply.text.index("/stats")

    engine_pt, _ = await engine_factory()
    async with ChatScenario(engine_pt, name="Ana") as chat:
        chat.receive("/start").should_call_send("Oi, Ana! Eu sou AKIRA")
        chat.receive("/help").should_call_send("Comandos:", "Guardar algo sobre você")


async def test_remember_the_seeds_upsert_example(engine_factory) -> None:
    engine, provider = await engine_factory(**EN)
    async with ChatScenario(engine) as chat:
        chat.receive("/remember project/project_synapse_status: v1.4.0 deployed").should_call_send(
            "Saved: project/project_synapse_status", private=False
        )
        chat.receive("/remember project/project_synapse_status: v1.5.0 deployed").should_call_send(
            "Updated: project/project_synapse_status", "history"
        )
        listing = chat.receive("/memories").should_call_send("v1.5.0 deployed", private=True)
    assert "v1.4.0" not in listing.reply.text
    stored = await service(engine).all("telegram:42")
    assert [(m.category.value, m.key, m.content) for m in stored] == [
        ("project", "project_synapse_status", "v1.5.0 deployed")
    ]
    assert (stored[0].source, stored[0].verified, stored[0].confidence) == (Source.USER, True, 1.0)
    history = await service(engine).history("telegram:42", stored[0].id)
    assert [v.content for v in history] == ["v1.4.0 deployed"]
    assert provider.prompts == []  # commands never ask the model


async def test_remember_forms_tags_and_category_inference(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine) as chat:
        chat.receive("/remember I live in Lisbon").should_call_send("Saved: note/i_live_in_lisbon")
        chat.receive("/remember favourite food: pizza #Food #italian").should_call_send(
            "Saved: note/favourite_food"
        )
        chat.receive("/remember identity/name: Ana Souza").should_call_send("Saved: identity/name")
        chat.receive("/remember I live in Lisbon").should_call_send("I already knew that")
        chat.receive("/remember meeting at 12:30 see https://example.com").should_call_send(
            "Saved: note/meeting_at_12_30_see_https_example_com"
        )
    memories = {m.key: m for m in await service(engine).all("telegram:42")}
    assert memories["favourite_food"].content == "pizza"
    assert memories["favourite_food"].tags == ["food", "italian"]
    assert memories["name"].category.value == "identity"
    assert (
        memories["meeting_at_12_30_see_https_example_com"].content
        == "meeting at 12:30 see https://example.com"
    )
    assert len(memories) == 4


async def test_remember_wrong_arguments_get_a_usage_line(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine) as chat:
        chat.receive("/remember").should_call_send("Usage: /remember")
        chat.receive("/remember diary/today: sunny").should_call_send(
            "Unknown category", "identity, preference", "Usage: /remember"
        )
        chat.receive("/remember " + "k" * 300 + ": value").should_call_send(
            "keys have up to 64 characters", "Usage: /remember"
        )
        chat.receive("/remember " + "word " * 2000).should_call_send(
            "content up to 2000", "Usage: /remember"
        )
        chat.receive(
            "/remember many: tags " + " ".join(f"#t{i}" for i in range(12))
        ).should_call_send("up to 10 tags", "Usage: /remember")
        chat.receive("/remember long tag: x #" + "t" * 40).should_call_send("Usage: /remember")
    assert await service(engine).all("telegram:42") == []


async def test_sql_injection_in_keys_tags_and_queries_is_stored_literally(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    hostile = "Robert'); DROP TABLE structured_memories;-- \" OR 1=1"
    async with ChatScenario(engine) as chat:
        chat.receive(f"/remember {hostile}").should_call_send("Saved: note/")
        chat.receive("/remember x'; DROP TABLE users;--: boom #'or'1'='1").should_call_send(
            "Saved: note/x_drop_table_users"
        )
        chat.receive("/remember tagged: yes #robert');drop").should_call_send("Saved: note/tagged")
        chat.receive("/forget '; DELETE FROM structured_memories;--").should_call_send(
            "I found no memory", private=True
        )
        chat.receive("/forget " + "x" * 5000).should_call_send("Usage: /forget")
        # Words after /memories are a search: read as words, never as SQL or FTS syntax.
        chat.receive("/memories 1 OR 1=1").should_call_send(
            "Memories matching “1 OR 1=1”: 2", hostile, "boom", private=True
        )
        chat.receive("/memories 99999999999999").should_call_send("Usage: /memories")
        chat.receive("/memories").should_call_send(hostile, "boom", private=True)
    stored = {m.content: m for m in await service(engine).all("telegram:42")}
    assert set(stored) == {hostile, "boom #'or'1'='1", "yes #robert');drop"}  # kept as text
    assert stored["yes #robert');drop"].tags == ["robert"]
    assert stored["boom #'or'1'='1"].key == "x_drop_table_users"
    assert await engine.storage.users.count() == 1  # the users table is intact


async def test_memories_are_paged_and_private(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine) as chat:
        chat.receive("/memories").should_call_send("I haven't stored any memories", private=True)
        for i in range(12):
            chat.receive(f"/remember item {i:02d}: value {i:02d}").should_call_send("Saved")
        first = chat.receive("/memories").should_call_send(
            "page 1/2", "12 memories: 12 verified, 0 unverified", "Next page: /memories 2"
        )
        second = chat.receive("/memories 2").should_call_send("page 2/2", absent=("Next page",))
        chat.receive("/memories 3").should_call_send("There is no page 3; there are 2 page(s)")
        chat.receive("/memories two").should_call_send("None of your memories match “two”")
        chat.receive("/memories 0").should_call_send("Usage: /memories [page]")
    # Most recent first: page 1 holds items 11..02, page 2 the two oldest.
    assert "[001] note (NORMAL) [verified] item_11" in first.reply.text
    assert "value 02" in first.reply.text and "value 01" not in first.reply.text
    assert "[011] note (NORMAL) [verified] item_01" in second.reply.text
    assert "[012] note (NORMAL) [verified] item_00" in second.reply.text
    assert re.search(r"\n    id: [0-9a-f]{6}\n", second.reply.text)  # short enough to type


async def test_memories_shows_expired_ones_last_and_marked(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    await engine.storage.users.ensure("telegram:42", seen_at=T0)
    await service(engine).store_memory(
        "telegram:42", "context", "trip", "In Porto this week", expires_at=T0, at=T0
    )
    await service(engine).store_memory("telegram:42", "note", "stay", "Stays", at=T0)
    async with ChatScenario(engine, start=T0) as chat:
        listing = chat.receive("/memories").should_call_send("(expired)")
    text = listing.reply.text
    assert text.index("stay") < text.index("trip") < text.index("(expired)")


async def test_forget_by_key_by_id_and_ambiguous_keys(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    other = await service(engine).store_memory("telegram:7", "note", "pet", "Bob's cat")
    async with ChatScenario(engine) as chat:
        chat.receive("/remember pet: a dog").should_call_send("Saved: note/pet")
        chat.receive("/remember fact/pet: dogs are great").should_call_send("Saved: fact/pet")
        chat.receive("/remember city: Recife").should_call_send("Saved")
        chat.receive("/forget pet").should_call_send(
            "more than one category", "note/pet", "fact/pet", private=True
        )
        chat.receive("/forget note/pet").should_call_send("Forgotten: note/pet", private=True)
        chat.receive(f"/forget {other[0].id}").should_call_send("I found no memory")
        chat.receive("/forget").should_call_send("Usage: /forget")
    remaining = await service(engine).all("telegram:42")
    assert {f"{m.category.value}/{m.key}" for m in remaining} == {"fact/pet", "note/city"}
    city = next(m for m in remaining if m.key == "city")
    async with ChatScenario(engine) as chat:
        chat.receive(f"/forget {city.id}").should_call_send("Forgotten: note/city")
    assert [m.key for m in await service(engine).all("telegram:42")] == ["pet"]
    assert await service(engine).get("telegram:7", other[0].id) is not None  # Bob's is safe


async def test_export_holds_everything_then_forgetme_erases_it(engine_factory) -> None:
    engine, _ = await engine_factory(["Que bom saber disso!"], **EN)
    owner = "telegram:42"
    async with ChatScenario(engine) as chat:
        chat.receive("I love hiking in the mountains").should_call_send(
            "Que bom", kind=ReplyKind.ANSWER
        )
        chat.receive("/remember hobby: hiking").should_call_send("Saved")
        chat.receive("/remember hobby: mountain hiking").should_call_send("Updated")
        export = chat.receive("/export").should_call_send(
            "everything I store about you", private=True, attachment=True
        )
    attachment = export.reply.attachment
    assert attachment is not None and attachment.filename == "akira-export.json"
    data = json.loads(attachment.data)
    assert data["user"] == owner
    assert [m["content"] for m in data["messages"]] == [
        "I love hiking in the mountains",
        "Que bom saber disso!",
    ]
    assert [(m["key"], m["content"]) for m in data["memories"]] == [("hobby", "mountain hiking")]
    assert [h["content"] for h in data["memories"][0]["history"]] == ["hiking"]
    assert data["profile"]["display_name"] == "user42"
    assert "emotion" in data["profile"]["profile"]  # the emotional state and its history

    # Someone else's data must survive the erasure.
    await ask(engine, make_message("/remember city: Recife", user="7"))

    async with ChatScenario(engine) as chat:
        ask_code = chat.receive("/forgetme").should_call_send(
            "EVERYTHING", "/forgetme ", "5 minutes", private=True
        )
        chat.receive("/forgetme WRONG1").should_call_send("doesn't match", "Nothing was erased")
    code = ask_code.reply.text.split("/forgetme ")[1].split()[0]
    assert len(code) == 6
    assert await engine.storage.nodes.count(owner) == 2  # nothing erased yet

    async with ChatScenario(engine) as chat:
        chat.receive(f"/forgetme {code.lower()}").should_call_send(
            "I erased everything about you", private=True
        )
    exported = await engine.storage.export_owner(owner)
    assert exported["profile"] is None
    assert all(not value for key, value in exported.items() if key not in ("user", "profile"))
    assert await engine.storage.nodes.count(owner) == 0
    recall = await engine.services.memory.recall(owner, "hiking mountains", scopes=None)
    assert recall.nodes == []
    assert await service(engine).search(owner, "hiking") == []
    assert [m.content for m in await service(engine).all("telegram:7")] == ["Recife"]
    # The code is used up; talking again starts a fresh, empty profile.
    async with ChatScenario(engine) as chat:
        chat.receive(f"/forgetme {code}").should_call_send("no pending request")
    fresh = await engine.storage.export_owner(owner)
    assert fresh["profile"]["profile"] == {} and fresh["memories"] == [] and fresh["messages"] == []


async def test_forgetme_code_expires_with_message_time(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember keep: me").should_call_send("Saved")
        asked = chat.receive("/forgetme", at=T0).should_call_send("/forgetme ")
    code = asked.reply.text.split("/forgetme ")[1].split()[0]
    async with ChatScenario(engine) as chat:
        chat.receive(f"/forgetme {code}", at=T0 + timedelta(minutes=6)).should_call_send(
            "no pending request", "expired"
        )
    assert [m.key for m in await service(engine).all("telegram:42")] == ["keep"]


async def test_mood_is_private_and_reads_the_stored_state(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/mood").should_call_send("I haven't read your mood yet", private=True)
    await engine.storage.users.update_profile(
        "telegram:42",
        emotion={
            "emotional_state": "triste",
            "emotion_confidence_score": 0.82,
            "state_updated_at": (T0 - timedelta(days=1)).isoformat(),
            "last_emotion_change": (T0 - timedelta(days=1)).isoformat(),
            "emotion_history": [
                {
                    "timestamp": (T0 - timedelta(days=1)).isoformat(),
                    "emotion": "triste",
                    "confidence": 0.82,
                }
            ],
        },
    )
    async with ChatScenario(engine, start=T0) as chat:
        sad = chat.receive("/mood").should_call_send("sad (82%)", "24 hours ago", private=True)
    assert "Recent readings" in sad.reply.text
    # Read at message time: 30 days later the sadness is no longer remembered (20 days).
    async with ChatScenario(engine, start=T0 + timedelta(days=30)) as chat:
        chat.receive("/mood").should_call_send("as I read it: neutral.", "31 days ago: sad")


async def test_a_conversation_gives_mood_a_state_in_portuguese(engine_factory) -> None:
    engine, _ = await engine_factory(["Entendo."])
    async with ChatScenario(engine) as chat:
        chat.receive("estou muito feliz hoje, obrigado!").should_call_send(
            "Entendo", kind=ReplyKind.ANSWER
        )
        chat.receive("/mood").should_call_send("Seu estado emocional", private=True)


async def test_structured_memories_reach_the_prompt_with_scope_rules(engine_factory) -> None:
    engine, provider = await engine_factory(["ok"], **EN)
    owner = "telegram:42"
    group = {"kind": ChatKind.GROUP, "chat": "g1", "scope": "guild:1"}
    async with ChatScenario(engine) as chat:
        chat.receive("/remember secret: private diagnosis").should_call_send("Saved")
        chat.receive("/remember team: plays on the red team", **group).should_call_send("Saved")
        chat.receive("hello there, how are you?").should_call_send("ok", kind=ReplyKind.ANSWER)
    await service(engine).propose(owner, "fact", "pet", "Has a dog", at=T0)
    dm_prompt = provider.prompts[-1][0].content
    assert "## Structured memories" in dm_prompt
    assert "private diagnosis" in dm_prompt and "red team" in dm_prompt

    async with ChatScenario(engine) as chat:
        chat.receive("hello group, how are you?", **group).should_call_send(
            "ok", kind=ReplyKind.ANSWER
        )
        chat.receive("and in DM, do you know my pet?").should_call_send("ok", kind=ReplyKind.ANSWER)
    group_prompt = provider.prompts[-2][0].content
    assert "red team" in group_prompt
    assert "private diagnosis" not in group_prompt and "Has a dog" not in group_prompt
    dm_prompt = provider.prompts[-1][0].content
    assert "[unverified] pet" in dm_prompt and "[verified] secret" in dm_prompt
    assert "do not state them as certain" in dm_prompt


async def test_expired_memory_is_left_out_of_the_prompt(engine_factory) -> None:
    engine, provider = await engine_factory(["ok"], **EN)
    await engine.storage.users.ensure("telegram:42", seen_at=T0)
    await service(engine).store_memory(
        "telegram:42",
        "context",
        "trip",
        "Flying to Tokyo",
        expires_at=T0 + timedelta(days=1),
        at=T0,
    )
    async with ChatScenario(engine) as chat:
        chat.receive("hi, where am I going?", at=T0 + timedelta(hours=1)).should_call_send(
            "ok", kind=ReplyKind.ANSWER
        )
        chat.receive("hi again, where am I going?", at=T0 + timedelta(days=2)).should_call_send(
            "ok", kind=ReplyKind.ANSWER
        )
    assert "Flying to Tokyo" in provider.prompts[0][0].content
    assert "Flying to Tokyo" not in provider.prompts[1][0].content
    assert [m.key for m in await service(engine).all("telegram:42")] == ["trip"]


async def test_unknown_command_and_language_of_refusals(engine_factory) -> None:
    engine, _ = await engine_factory()
    async with ChatScenario(engine) as chat:
        chat.receive("/frobnicate").should_call_send(t("unknown_command", "pt", name="frobnicate"))
        chat.receive("/remember").should_call_send("Uso: /remember")
