"""People in charge of their structured memories, through the real engine (a real SQLite
file, or PostgreSQL with AKIRA_TEST_STORAGE=postgres; the scripted LLM): priority and
expiry in /remember, /memories search, #tag, expiring, confirm and edit, short ids."""

from __future__ import annotations

import random
import re
import uuid
from datetime import UTC, datetime, timedelta

from akira_bot.commands.memories import UnknownCategory, parse_remember
from akira_bot.commands.memory_options import MemoryOptionError, parse_until, split_options
from akira_bot.testing import ChatScenario
from core.memory.structured import (
    MemoryValidationError,
    Priority,
    Source,
    StructuredMemories,
    short_ids,
)
from core.storage.memory_records import StructuredMemory

EN = {"bot": {"default_language": "en"}}
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)  # a Sunday; ChatScenario's first message time
OWNER = "telegram:42"
SHORT_ID = re.compile(r"id: ([0-9a-f]{6,16})\b")


def service(engine) -> StructuredMemories:  # type: ignore[no-untyped-def]
    return engine.services.extras["structured_memories"]


async def by_key(engine, owner: str = OWNER) -> dict[str, StructuredMemory]:  # type: ignore[no-untyped-def]
    return {m.key: m for m in await service(engine).all(owner)}


def midnight(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


async def test_remember_takes_priority_and_expiry_in_both_languages(engine_factory) -> None:
    engine, provider = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember !high trip: Porto until 2026-12-31").should_call_send(
            "Saved: note/trip", "Priority: high.", "Kept until 2026-12-31."
        )
        chat.receive("/remember gym: Tuesday class for 2 weeks #fitness").should_call_send(
            "Saved: note/gym", "Kept until 2025-06-15"
        )
        chat.receive("/remember exam: maths until next friday !critical").should_call_send(
            "Saved: note/exam", "Priority: critical."
        )
        chat.receive("/remember I played guitar for 10 years.").should_call_send(
            "Saved", absent=("Kept until",)
        )
        chat.receive(
            "/remember !baixa viagem: Lisboa até 31/12/2026", locale="pt-BR"
        ).should_call_send("Guardado: note/viagem", "Prioridade: baixa.", "Vale até 2026-12-31.")
        chat.receive("/remember curso: inglês por 3 meses", locale="pt-BR").should_call_send(
            "Guardado"
        )
        # Day first, month first only where day first is impossible (31 is no month).
        chat.receive("/remember prazo: relatório até 12/31/2026").should_call_send("Saved")
    memories = await by_key(engine)
    assert memories["trip"].priority is Priority.HIGH
    assert memories["trip"].expires_at == midnight(2027, 1, 1)  # kept through Dec 31
    assert memories["trip"].content == "Porto"
    gym = memories["gym"]
    assert (gym.content, gym.tags, gym.expires_at) == (
        "Tuesday class",
        ["fitness"],
        gym.created_at + timedelta(weeks=2),  # two weeks after the message's own time
    )
    exam = memories["exam"]
    assert exam.priority is Priority.CRITICAL and exam.content == "maths"
    assert exam.expires_at == midnight(2025, 6, 7)  # through Friday June 6
    assert memories["i_played_guitar_for_10"].expires_at is None  # the full stop kept it text
    assert memories["i_played_guitar_for_10"].content == "I played guitar for 10 years."
    assert memories["viagem"].priority is Priority.LOW
    assert memories["viagem"].expires_at == midnight(2027, 1, 1)
    curso = memories["curso"]
    assert curso.expires_at == curso.created_at.replace(month=9)  # three months
    assert memories["prazo"].expires_at == midnight(2027, 1, 1)
    assert all(m.source is Source.USER and m.verified for m in memories.values())
    assert provider.prompts == []


async def test_a_bad_priority_or_date_stores_nothing_and_says_why(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember !urgentissimo x: y").should_call_send(
            "Unknown priority !urgentissimo", "!high", "Nothing was stored", "Usage: /remember"
        )
        chat.receive("/remember trip: Porto until 2026-13-45").should_call_send(
            "couldn't read the date “2026-13-45”", "Nothing was stored"
        )
        chat.receive("/remember trip: Porto until 2020-01-01").should_call_send(
            "“2020-01-01” has already passed"
        )
        chat.receive("/remember trip: Porto until yesterday").should_call_send("already passed")
        chat.receive("/remember trip: Porto for 0 days").should_call_send("couldn't read")
        chat.receive("/remember trip: Porto for 9999 years").should_call_send("more than 100 years")
        chat.receive("/remember viagem: Porto até 32/13/2026", locale="pt-BR").should_call_send(
            "Não entendi a data “32/13/2026”", "Nada foi guardado", "Uso: /remember"
        )
        chat.receive("/remember !alta", locale="pt-BR").should_call_send(
            "Uso: /remember", absent=("caracteres",)
        )
        chat.receive("/remember until 2026-12-31").should_call_send(
            "Usage: /remember", absent=("characters",)
        )
        # Words that only look like a clause are content: "until she calls", "I ate ...".
        chat.receive("/remember wait: until she calls").should_call_send("Saved: note/wait")
        chat.receive("/remember lunch: I ate yesterday").should_call_send("Saved: note/lunch")
        chat.receive("/remember shop: open until 5 pm").should_call_send("couldn't read the date")
        chat.receive("/remember shop: open until 5 pm.").should_call_send("Saved: note/shop")
    memories = await by_key(engine)
    assert set(memories) == {"wait", "lunch", "shop"}
    assert memories["shop"].content == "open until 5 pm."
    assert memories["wait"].content == "until she calls"
    assert memories["lunch"].content == "I ate yesterday"
    assert all(m.expires_at is None for m in memories.values())


async def test_memories_search_tag_and_expiring(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember food: loves pizza margherita #food #italy").should_call_send(
            "Saved"
        )
        chat.receive("/remember drink: café com leite #food").should_call_send("Saved")
        chat.receive("/remember trip: Rome in July #italy for 5 days").should_call_send("Saved")
        chat.receive("/remember visa: renew the visa until 2025-06-20").should_call_send("Saved")
        for i in range(12):
            chat.receive(f"/remember item {i:02d}: value {i:02d}").should_call_send("Saved")
        pizza = chat.receive("/memories pizza").should_call_send(
            "Memories matching “pizza”: 1", "loves pizza margherita", private=True
        )
        chat.receive("/memories CAFE").should_call_send("café com leite", absent=("pizza",))
        tagged = chat.receive("/memories #food").should_call_send("“#food”: 2", "pizza", "café")
        chat.receive("/memories pizza #italy").should_call_send("“pizza #italy”: 1")
        chat.receive("/remember hols: Recife #Férias").should_call_send("Saved")
        chat.receive("/memories #ferias").should_call_send("“#ferias”: 1", "Recife")
        chat.receive("/memories #FÉRIAS").should_call_send("“#férias”: 1", "Recife")
        chat.receive("/memories search expiring").should_call_send("None of your memories match")
        chat.receive("/memories nothinglikethis").should_call_send(
            "None of your memories match “nothinglikethis”", private=True
        )
        soon = chat.receive("/memories expiring").should_call_send(
            "expire within 7 day(s): 1", "Rome in July", "(until 2025-06-06 12:0", private=True
        )
        chat.receive("/memories expiring 30").should_call_send(
            "within 30 day(s): 2", "Rome", "renew the visa (until", absent=("pizza",)
        )
        chat.receive("/memories expiring 0").should_call_send("Usage: /memories expiring [days]")
        chat.receive("/memories expiring soon").should_call_send("Usage: /memories expiring")
        chat.receive("/memories expiring 2", at=T0 + timedelta(days=30)).should_call_send(
            "None of your memories expire within 2 day(s)"
        )
        chat.receive("/memories 2").should_call_send("page 2/2", "17 memories")
    assert "drink" not in pizza.reply.text and "[001]" in pizza.reply.text
    assert SHORT_ID.search(tagged.reply.text)
    assert "visa" not in soon.reply.text


async def test_confirm_a_memory_the_bot_proposed(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    await engine.storage.users.ensure(OWNER, seen_at=T0)
    proposed, _ = await service(engine).propose(OWNER, "fact", "pet", "Has a dog", at=T0)  # type: ignore[misc]
    bobs, _ = await service(engine).propose("telegram:7", "fact", "pet", "Has a cat", at=T0)  # type: ignore[misc]
    async with ChatScenario(engine, start=T0) as chat:
        listing = chat.receive("/memories").should_call_send(
            "[unverified] pet", "/memories confirm <id>"
        )
        await chat.run()
        short = SHORT_ID.search(listing.reply.text).group(1)  # type: ignore[union-attr]
        assert len(short) == 6 and proposed.id.startswith(f"mem_{short}")
        chat.receive(f"/memories confirm {bobs.id}").should_call_send(
            "No memory of yours has the id", private=True
        )
        chat.receive("/memories confirm").should_call_send("Usage: /memories confirm <id>")
        chat.receive("/memories confirm two ids").should_call_send("Usage: /memories confirm")
        chat.receive(f"/memories confirm {short}").should_call_send(
            "Confirmed: fact/pet is now verified", private=True
        )
        chat.receive(f"/memories confirm mem_{short}").should_call_send("was already verified")
        chat.receive("/memories").should_call_send("[verified] pet")
    pet = (await by_key(engine))["pet"]
    assert (pet.verified, pet.source, pet.verified_by, pet.confidence, pet.content) == (
        True,
        Source.AGENT,  # confirming keeps who proposed it
        OWNER,
        1.0,
        "Has a dog",
    )
    history = await service(engine).history(OWNER, pet.id)
    assert [(v.verified, v.change) for v in history] == [(False, "verify")]
    assert not (await by_key(engine, "telegram:7"))["pet"].verified  # Bob's is untouched


async def test_edit_one_memory_by_id_keeps_its_history(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    await engine.storage.users.ensure(OWNER, seen_at=T0)
    proposed, _ = await service(engine).propose(OWNER, "fact", "city", "Lives in Lisbon", at=T0)  # type: ignore[misc]
    bobs, _ = await service(engine).propose("telegram:7", "fact", "city", "Recife", at=T0)  # type: ignore[misc]
    short = short_ids([proposed])[proposed.id]
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive(
            f"/memories edit {short} Lives in Porto !high until 2026-12-31"
        ).should_call_send(
            "Edited: fact/city", "history", "Priority: high.", "Kept until 2026-12-31", private=True
        )
        chat.receive(f"/memories edit {short} !bogus").should_call_send(
            "Unknown priority !bogus", "Usage: /memories edit"
        )
        chat.receive(f"/memories edit {short} until 2024-01-01").should_call_send("already passed")
        chat.receive(f"/memories edit {short}").should_call_send("Usage: /memories edit <id>")
        chat.receive("/memories edit").should_call_send("Usage: /memories edit <id>")
        chat.receive(f"/memories edit {bobs.id} mine now").should_call_send("No memory of yours")
        chat.receive(f"/memories edit {short} " + "x" * 2100).should_call_send(
            "content up to 2000", "Usage: /memories edit"
        )
    city = (await by_key(engine))["city"]
    assert (city.content, city.priority, city.expires_at) == (
        "Lives in Porto",
        Priority.HIGH,
        midnight(2027, 1, 1),
    )
    assert (city.source, city.verified) == (Source.USER, True)  # the person stated it now
    async with ChatScenario(engine, start=T0 + timedelta(minutes=5)) as chat:
        chat.receive(f"/memories edit mem_{short} no expiry !low").should_call_send(
            "Edited", "Priority: low.", "No expiry."
        )
        chat.receive(f"/memories edit {short} Lives in Porto").should_call_send(
            "Nothing changed in fact/city"
        )
        chat.receive(f"/memories edit {short} #home #porto").should_call_send("Edited")
        chat.receive(
            f"/memories editar {short} Mora no Porto #cidade", locale="pt-BR"
        ).should_call_send("Editada")
    city = (await by_key(engine))["city"]
    assert (city.content, city.tags, city.priority, city.expires_at) == (
        "Mora no Porto",
        ["cidade"],
        Priority.LOW,
        None,
    )
    history = await service(engine).history(OWNER, city.id)
    assert [(v.content, v.tags) for v in history] == [
        ("Lives in Lisbon", []),
        ("Lives in Porto", []),
        ("Lives in Porto", []),
        ("Lives in Porto", ["home", "porto"]),  # a tags-only edit kept the content
    ]
    assert (await by_key(engine, "telegram:7"))["city"].content == "Recife"


async def test_short_ids_are_shown_and_forget_takes_them(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember pet: a dog").should_call_send("Saved")
        chat.receive("/remember city: Recife").should_call_send("Saved")
        listing = chat.receive("/memories").should_call_send("id: ")
        await chat.run()
        shown = SHORT_ID.findall(listing.reply.text)
        assert len(shown) == 2 and all(len(s) == 6 for s in shown)
        assert "mem_" not in listing.reply.text
        city = (await by_key(engine))["city"]
        short = next(s for s in shown if city.id.startswith(f"mem_{s}"))
        chat.receive(f"/forget {short}").should_call_send("Forgotten: note/city", private=True)
    assert list(await by_key(engine)) == ["pet"]


def test_short_ids_grow_where_two_ids_share_a_start() -> None:
    def memory(memory_id: str) -> StructuredMemory:
        return StructuredMemory(memory_id, OWNER, "note", "k", "c")  # type: ignore[arg-type]

    shown = short_ids(
        [memory("mem_abcdef0123456789"), memory("mem_abcdef9876543210"), memory("mem_0123")]
    )
    assert shown == {
        "mem_abcdef0123456789": "abcdef0",
        "mem_abcdef9876543210": "abcdef9",
        "mem_0123": "0123",
    }


async def test_an_ambiguous_short_id_asks_for_more(engine_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Ids are random; two that share their first digits are made here on purpose.
    ids = iter(["mem_abcd000000000001", "mem_abcd000000000002"])
    monkeypatch.setattr(
        "core.storage.memory_records.new_memory_id",
        lambda: next(ids, f"mem_{uuid.uuid4().hex[:16]}"),
    )
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember one: first").should_call_send("Saved")
        chat.receive("/remember two: second").should_call_send("Saved")
        chat.receive("/memories").should_call_send("id: abcd000000000001", "id: abcd000000000002")
        chat.receive("/memories edit abcd changed").should_call_send(
            "More than one memory starts with abcd", "abcd000000000001", "abcd000000000002"
        )
        chat.receive("/memories edit abc changed").should_call_send("No memory of yours")
        chat.receive("/memories edit abcd000000000002 changed").should_call_send("Edited: note/two")
    assert [m.content for m in await service(engine).all(OWNER)] == ["changed", "first"]


async def test_hostile_huge_and_binary_arguments_get_a_polite_reply(engine_factory) -> None:
    engine, _ = await engine_factory(**EN)
    async with ChatScenario(engine, start=T0) as chat:
        chat.receive("/remember keep: me").should_call_send("Saved")
        chat.receive("/memories 1 OR 1=1").should_call_send("None of your memories match")
        chat.receive("/memories ' OR ''=' --").should_call_send("None of your memories match")
        chat.receive('/memories "keep" NEAR me*').should_call_send("keep")
        chat.receive("/memories \x00\x01\x02 ???").should_call_send("Usage: /memories")
        chat.receive("/memories " + "x" * 5000).should_call_send("Usage: /memories")
        chat.receive("/memories " + "word " * 150).should_call_send("at most 500 characters")
        chat.receive("/memories #" + "t" * 40).should_call_send("Tags have up to 32")
        chat.receive("/memories 99999999999999").should_call_send("Usage: /memories")
        chat.receive("/memories ²").should_call_send("None of your memories match")
        chat.receive("/memories expiring ³").should_call_send("Usage: /memories expiring")
        chat.receive("/memories confirm\n\tzzzz").should_call_send("No memory of yours")
        chat.receive("/memories confirm " + "f" * 300).should_call_send("Usage: /memories confirm")
        chat.receive("/memories edit zzzz new").should_call_send("No memory of yours")
        chat.receive("/remember x: y until " + "9" * 400).should_call_send("couldn't read")
        chat.receive("/remember " + "z" * 10000).should_call_send("content up to 2000")
        chat.receive("/remember bin: \x00\x7f\ufffd data").should_call_send("Saved: note/bin")
    assert {m.key for m in await service(engine).all(OWNER)} == {"keep", "bin"}


def test_until_reads_iso_numeric_and_named_dates() -> None:
    at = T0
    assert parse_until("2026-12-31", at) == midnight(2027, 1, 1)
    assert parse_until("31/12/2026", at) == midnight(2027, 1, 1)
    assert parse_until("10/01", at) == midnight(2025, 1, 11).replace(year=2026)  # next Jan
    assert parse_until("o Natal", at) == midnight(2025, 12, 27)
    assert parse_until("the end of next week", at) == midnight(2025, 6, 9)  # weeks start Monday
    assert parse_until("she calls", at) is None
    # "the end of the month" is this one's end (T0 is in June 2025; weeks start Monday).
    assert parse_until("end of the month", at) == midnight(2025, 7, 1)
    assert parse_until("fim do mês", at) == midnight(2025, 7, 1)
    assert parse_until("the end of the week", at) == midnight(2025, 6, 2)
    assert parse_until("end of the year", at) == midnight(2026, 1, 1)
    text, options = split_options("!alta viagem: Porto #viagem", at)
    assert (text, options.priority, options.expires_at) == ("viagem: Porto #viagem", "high", None)
    text, options = split_options("trip: Porto until 2026-12-31 #travel", at)
    assert (text, options.expires_at) == ("trip: Porto #travel", midnight(2027, 1, 1))


def test_any_remember_text_parses_or_is_refused_with_a_reason() -> None:
    """Random texts built from the pieces the parser looks for: each one is a request or
    one of the refusals the handler turns into a reply (never another exception)."""
    pieces = [
        "!high", "!alta", "!x", "!", "until", "até", "ate", "for", "por", "2", "0", "99999",
        "weeks", "dias", "2026-12-31", "2026-02-30", "31/12/2026", "12/31/2026", "29/02",
        "next", "friday", "sexta", "que", "vem", "Natal", "#tag", "#", "key:", "fact/k:",
        "x/y:", "café", "\x00", "\n", ".", "🙂", "no expiry", "sem validade", "9" * 30,
    ]  # fmt: skip
    rng = random.Random(24)
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(3000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        try:
            request = parse_remember(text, T0)
        except (MemoryOptionError, MemoryValidationError, UnknownCategory):
            outcomes["refused"] += 1
            continue
        outcomes["ok"] += 1
        assert request.content.strip() and request.key
        assert request.options.expires_at is None or request.options.expires_at > T0
    assert outcomes["ok"] > 100 and outcomes["refused"] > 100
