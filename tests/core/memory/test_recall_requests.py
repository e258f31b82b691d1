"""What a message asks for itself (core.memory.query, session 8): a question that names
its subject leans less on the open threads, and a remember-what-I-told-you request is
searched without its wrapper. A real SQLite file and the hashing embedder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.memory.query import QueryConfig, names_its_subject, plan_query, recall_request
from core.storage import MemoryNode, SQLiteStorage
from tests.core.memory.conftest import CHATTER_PT, memory_with, ranked, said

OWNER = "telegram:7"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2019, 5, 6, 9, 0, tzinfo=UTC)  # a Monday; everything is relative to it


def node(node_id: str, text: str, at: datetime) -> MemoryNode:
    return said(OWNER, node_id, text, at, chat_id="dm-7")


def test_which_messages_name_their_subject() -> None:
    config = QueryConfig()
    asked = plan_query("tô num restaurante, tem algo no cardápio que me faz mal?", T0, config)
    bare = plan_query("Ficou melhor?", T0, config)
    news = plan_query("saiu o resultado: passei em 12º lugar!!!", T0, config)
    assert names_its_subject(asked, config)
    assert not names_its_subject(bare, config)  # two words at most: it leans on the thread
    assert not names_its_subject(news, config)  # news, not a question


def test_the_wrapper_of_a_recall_request_is_left_out() -> None:
    assert recall_request("lembra que eu te falei que levanto de madrugada?") == (
        "levanto de madrugada?"
    )
    assert recall_request("Remind me which day my ceramics lessons are on?") == (
        "which day my ceramics lessons are on?"
    )
    assert recall_request("meu chefe me deu bronca por causa daquele atraso, lembra?") == (
        "meu chefe me deu bronca por causa daquele atraso?"
    )
    assert recall_request("how old is my dog again?") == "how old is my dog?"
    assert recall_request("did I tell you about the new flat?") == "about the new flat?"
    # Not requests, or nothing told besides the wrapper.
    assert recall_request("Ficou melhor?") is None
    assert recall_request("lembra?") is None
    assert recall_request("I remembered the keys this time") is None
    # Remembering told, not asked for: another subject than the listener.
    assert recall_request("can't even remember the title") is None
    assert recall_request("ela não lembra de nada do que aconteceu?") is None
    assert recall_request("vc lembra o nome do meu cachorro?") == "o nome do meu cachorro?"


@pytest.mark.parametrize("named_threads", [1.0, None])  # off, the defaults
async def test_a_question_naming_its_subject_leans_less_on_an_announced_event(
    storage: SQLiteStorage, named_threads: float | None
) -> None:
    memory = memory_with(storage, named_threads=named_threads)
    await memory.store(node("allergy", "descobri que sou alérgico a camarão, fui pro hospital", T0))
    # Announced for the next day: come due by the question, an open thread.
    await memory.store(node("eclipse", "vi que amanhã vai ter eclipse", T0 + timedelta(days=1)))
    at = T0 + timedelta(days=2)
    for i, text in enumerate(CHATTER_PT):
        await memory.store(node(f"c{i}", text, at))
        at += timedelta(hours=7)
    question = node(
        "q",
        "tem camarão no cardápio do restaurante, posso comer ou me faz mal?",
        at + timedelta(days=4),
    )
    found = await ranked(memory, question)
    if named_threads is None:
        assert found[0] == "allergy"
    else:  # off: the announced event comes first
        assert found[0] == "eclipse"


@pytest.mark.parametrize("request_query", [False, None])  # off, the defaults
async def test_a_recall_request_is_searched_without_its_wrapper(
    storage: SQLiteStorage, request_query: bool | None
) -> None:
    memory = memory_with(storage, request_query=request_query)
    await memory.store(node("wake", "acordo de madrugada todo dia pra abrir a padaria", T0))
    at = T0 + timedelta(days=1)
    for i, text in enumerate(CHATTER_PT):
        await memory.store(node(f"c{i}", text, at))
        at += timedelta(hours=7)
    await memory.store(node("note", "falei pro meu irmão que ele nunca lembra de nada", at))
    question = node("q", "lembra que eu te falei que levanto de madrugada?", at + timedelta(days=2))
    found = await ranked(memory, question)
    if request_query is None:
        assert found[0] == "wake"
    else:  # "lembra", "falei" find the line about remembering first
        assert found.index("note") < found.index("wake")
