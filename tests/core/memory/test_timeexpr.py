"""Dates named in messages, resolved against the message's own time."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from core.memory.timeexpr import spans

# A Friday in 2026 (no relation to the wall clock: the tests must pass any day).
FRIDAY = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def first(text: str, at: datetime = FRIDAY, **kw: bool) -> tuple[date, int, bool]:
    found = spans(text, at, **kw)
    assert found, f"nothing resolved in {text!r}"
    s = found[0]
    return s.start.date(), (s.end - s.start).days, s.future


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("quanto eu corri semana passada?", (date(2026, 4, 20), 7, False)),
        ("what did I do last week?", (date(2026, 4, 20), 7, False)),
        ("tenho entrevista amanhã", (date(2026, 5, 2), 1, True)),
        ("fui ontem", (date(2026, 4, 30), 1, False)),
        ("quantos km eu pedalei no sábado passado?", (date(2026, 4, 25), 1, False)),
        ("what grade did I climb last weekend?", (date(2026, 4, 25), 2, False)),
        ("o técnico só vem quinta", (date(2026, 5, 7), 1, True)),
        ("next week", (date(2026, 5, 4), 7, True)),
        ("mês que vem", (date(2026, 6, 1), 30, True)),
        ("what was my time in the race last month?", (date(2026, 4, 1), 30, False)),
        ("há 3 dias", (date(2026, 4, 28), 1, False)),
        ("a prova é dia 12", (date(2026, 5, 12), 1, True)),
        ("marcada pra 20 de maio", (date(2026, 5, 20), 1, True)),
    ],
)
def test_relative_to_the_message(text: str, expected: tuple[date, int, bool]) -> None:
    assert first(text) == expected


def test_bare_names_look_back_in_questions_and_ahead_in_plans() -> None:
    # "sábado" asked about on a Friday is last Saturday; announced, the next one.
    assert first("o que eu fiz sábado?")[0] == date(2026, 4, 25)
    assert first("vou fazer uma tatuagem sábado")[0] == date(2026, 5, 2)
    assert first("como foi em outubro?")[0] == date(2025, 10, 1)
    assert first("a Júlia vai casar em outubro")[0] == date(2026, 10, 1)


def test_holidays_move_with_the_year() -> None:
    # Carnival is 47 days before Easter: February 14-19 in 2026, March 1-6 in 2025.
    assert first("pra onde eu viajei no carnaval?")[0] == date(2026, 2, 14)
    assert first("pra onde eu viajei no carnaval?", datetime(2025, 12, 1, tzinfo=UTC))[0] == (
        date(2025, 3, 1)
    )
    # Christmas asked about in February is the last one.
    at = datetime(2026, 2, 14, tzinfo=UTC)
    assert first("como chamava o restaurante que a gente foi no Natal?", at)[0] == date(
        2025, 12, 24
    )


def test_portuguese_ordinals_are_not_weekdays() -> None:
    assert spans("passei pra segunda fase!!", FRIDAY) == []
    assert spans("minha filha tá na quinta série", FRIDAY) == []
    assert first("na segunda eu volto")[0] == date(2026, 5, 4)
    assert first("segunda-feira tem reunião")[0] == date(2026, 5, 4)


def test_timeless_text_names_nothing() -> None:
    assert spans("I may go to the store", FRIDAY) == []
    assert spans("gosto de vinho branco", FRIDAY) == []


def test_a_bare_week_month_or_year_measures_time_and_names_none() -> None:
    # "this takes a week" is a length, not last/this/next week: no window for it.
    assert spans("this takes a week to heal", FRIDAY) == []
    assert spans("vou pagar o curso por mês", FRIDAY) == []
    assert spans("I see her twice a year", FRIDAY) == []
    assert spans("o ano todo foi corrido", FRIDAY) == []
    # With last/this/next (passada, essa, que vem) it still is one.
    assert first("essa semana foi puxada")[0] == date(2026, 4, 27)
    assert first("this month")[0] == date(2026, 5, 1)
    assert first("ano passado")[0] == date(2025, 1, 1)


def test_a_plural_weekday_is_a_habit_not_a_date() -> None:
    assert spans("I swim on Mondays", FRIDAY) == []
    assert spans("às segundas eu tenho inglês", FRIDAY) == []
    assert spans("aos sábados a gente vai pra feira", FRIDAY) == []
    assert spans("terças e quintas-feiras tenho aula", FRIDAY) == []
    # "every" / "toda(s)" before one day makes it a habit too.
    assert spans("o ensaio é toda quarta às 20h", FRIDAY) == []
    assert spans("todas as segundas-feiras tem reunião", FRIDAY) == []
    assert spans("every Wednesday I go swimming", FRIDAY) == []
    assert spans("each Friday we order pizza", FRIDAY) == []
    # One day is still a day.
    assert first("a prova é quarta")[0] == date(2026, 5, 6)
    assert first("on Monday I swim")[0] == date(2026, 5, 4)
    assert first("no sábado a gente vai pra feira")[0] == date(2026, 5, 2)
