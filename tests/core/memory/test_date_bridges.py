"""A question joining two plans reaches the second through its date: two events the person
announced for about the same time are bridged (core.memory.query.date_bridges,
QueryConfig.date_bridge_share), for questions that do not ask for a suggestion."""

from __future__ import annotations

from datetime import timedelta

from core.memory.query import QueryConfig, date_bridges
from core.storage import MemoryNode, NodeType, SQLiteStorage
from tests.core.memory.conftest import memory_with, ranked
from tests.core.memory.test_recall_conversation import OWNER, T0, node
from tests.core.memory.test_word_bridges import MORE_CHATTER

OWNERS = [OWNER]  # users in the storage fixture (conftest)
DAYS, MOST, SPAN = 21.0, 3, 45.0


def bridges(pool: list[MemoryNode]) -> dict[str, list[str]]:
    return date_bridges(pool, DAYS, MOST, SPAN)


def test_events_told_for_about_the_same_time_are_bridged() -> None:
    # T0 is 4 March 2019: every date below lies ahead of the line that tells it.
    pool = [
        node("surgery", "o ortopedista marcou a cirurgia do joelho pra 14 de abril", T0),
        node("baby", "o bebê da minha filha deve nascer lá pela primeira semana de abril", T0),
        node("exams", "as provas da faculdade são em 20 de junho", T0),
        node("gym", "fui na academia hoje cedo", T0),
    ]
    found = bridges(pool)
    assert found["surgery"] == ["baby"]  # 14 April and April: overlapping
    assert found["baby"] == ["surgery"]
    assert "exams" not in found  # two months away from both
    assert "gym" not in found  # "hoje" is no announced event
    # A looser gap reaches 20 June from the end of April (50 days).
    assert "exams" in date_bridges(pool, 60.0, MOST, SPAN)["baby"]


def test_asked_dates_the_bots_lines_and_long_times_bridge_nothing() -> None:
    reply = MemoryNode(
        "reply", OWNER, "Boa sorte na cirurgia do dia 15 de abril!", NodeType.AKIRA_RESPONSE, T0
    )
    pool = [
        node("surgery", "o ortopedista marcou a cirurgia do joelho pra 14 de abril", T0),
        reply,
        node("asked", "dia 13 de abril é feriado?", T0),
        node("year", "ano que vem quero mudar de cidade", T0),
    ]
    assert bridges(pool) == {}


def test_a_line_keeps_its_nearest_events() -> None:
    pool = [node("trip", "viajo pra Salvador dia 10 de maio", T0)] + [
        node(f"e{day}", f"tenho compromisso dia {day} de maio", T0) for day in (20, 11, 14, 12)
    ]
    assert date_bridges(pool, DAYS, 2, SPAN)["trip"] == ["e11", "e12"]


def _history() -> list[tuple[str, str]]:
    chatter = MORE_CHATTER[:-4]
    return [
        ("surgery", "o ortopedista marcou a cirurgia do menisco pra 14 de abril"),
        *((f"c{i}", text) for i, text in enumerate(chatter[:8])),
        ("baby", "minha filha Luísa tá grávida, o neto deve nascer dia 10 de abril"),
        *((f"d{i}", text) for i, text in enumerate(chatter[8:])),
    ]


async def _ranks(storage: SQLiteStorage, text: str, share: float) -> list[str]:
    memory = memory_with(storage, date_bridge_share=share)
    at = T0
    for node_id, content in _history():
        await memory.store(node(node_id, content, at))
        at += timedelta(days=1)
    return await ranked(memory, node("q", text, at), limit=5)


async def test_a_question_joining_two_plans_reaches_both(storage: SQLiteStorage) -> None:
    question = "o neto vai nascer antes ou depois de eu entrar na faca?"
    found = await _ranks(storage, question, QueryConfig().date_bridge_share)
    # The birth is found by its words and passes its score to the surgery, dated nearby.
    assert set(found[:2]) == {"baby", "surgery"}
    # Without the bridge only its own small closeness and recency place it.
    assert "surgery" not in (await _ranks(storage, question, 0.0))[:3]


async def test_a_request_for_a_suggestion_is_not_bridged(storage: SQLiteStorage) -> None:
    # What fits the person matters to a request, not what else is planned for then.
    request = "me sugere um presente pro neto quando nascer?"
    with_bridges = await _ranks(storage, request, QueryConfig().date_bridge_share)
    assert with_bridges[0] == "baby"
    assert with_bridges == await _ranks(storage, request, 0.0)
