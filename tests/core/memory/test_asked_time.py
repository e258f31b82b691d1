"""A question asking for a time by its unit ("em quais dias da semana ...?", "which day
...?", "que horas ...?") counts the lines naming a time of that unit more
(core.memory.query, ``QueryConfig.answer_boost``; core.memory.timeexpr, ``asked_unit`` and
``names_unit``). A real SQLite file and the hashing embedder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.memory.query import QueryConfig, plan_query
from core.memory.timeexpr import asked_unit, names_unit
from core.storage import SQLiteStorage
from tests.core.memory.conftest import memory_with, ranked, said

OWNER = "telegram:7"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_the_unit_is_read_from_the_interrogative_phrase() -> None:
    for text, unit in (
        ("em quais dias da semana são minhas lições de idioma?", "day"),
        ("remind me which day my ceramics lessons are on?", "day"),
        ("que dia é a consulta?", "day"),
        ("a que horas sai o voo?", "clock"),
        ("what time does the gym open?", "clock"),
        ("em que mês é o casamento da minha irmã?", "month"),
        ("which year did we move to Lisbon?", "year"),
    ):
        assert asked_unit(text) == unit, text
    for text in (
        "quantos dias faltam pra viagem?",  # a count of days, not a day
        "qual time você torce?",  # a team
        "when I resigned from the bank, was that a good call?",  # "when" names no unit
        "aula toda terça e quinta",  # no question
        "o que eu comi ontem?",
    ):
        assert asked_unit(text) is None, text


def test_a_line_names_a_time_of_the_unit() -> None:
    assert names_unit("comecei um curso de inglês online, aula toda terça e quinta", "day")
    assert names_unit("I signed up for a pottery class on Saturdays", "day")
    assert names_unit("a consulta é dia 12", "day")
    assert not names_unit("vi que vai ter eclipse semana que vem", "day")  # "ter": a verb
    assert names_unit("o voo sai às 7h30", "clock")
    assert names_unit("the gym opens at 6am", "clock")
    assert not names_unit("comprei 3 livros", "clock")
    assert names_unit("a Júlia vai casar em outubro", "month")
    assert names_unit("we moved in 2019", "year")
    assert not names_unit("a Júlia vai casar", "month")
    assert names_unit("we got married in May", "month")
    assert not names_unit("I may go to the wedding", "month")  # a verb, not a month


def test_the_factor_applies_only_to_a_question_asking_for_a_unit() -> None:
    config = QueryConfig()
    asked = plan_query("em quais dias são minhas aulas?", T0, config)
    assert asked.unit == "day"
    assert asked.answer_factor("aula toda terça", config) == 1.0 + config.answer_boost
    assert asked.answer_factor("aula de inglês online", config) == 1.0
    told = plan_query("aula toda terça", T0, config)
    assert told.unit is None and told.answer_factor("aula toda terça", config) == 1.0


@pytest.mark.parametrize("answer_boost", [0.0, None])  # off, the default
async def test_which_days_finds_the_line_naming_them(
    storage: SQLiteStorage, answer_boost: float | None
) -> None:
    memory = memory_with(storage, answer_boost=answer_boost)
    at = T0
    lines = [
        ("schedule", "comecei o curso de violão, aula terça e quinta"),
        # Lines sharing more of the question's words, none naming a day.
        ("fun", "as aulas de violão são muito divertidas"),
        ("songs", "minhas aulas de violão têm músicas difíceis"),
        ("teacher", "meu professor de violão dá aulas ótimas"),
    ]
    for node_id, text in lines:
        await memory.store(said(OWNER, node_id, text, at, chat_id="dm-7"))
        at += timedelta(days=1)
    question = said(OWNER, "q", "em quais dias são minhas aulas de violão?", at, "dm-7")
    found = await ranked(memory, question, limit=4)
    if answer_boost is None:
        assert found[0] == "schedule"
    else:  # off: the lines sharing the question's words come first
        assert found[0] != "schedule"
