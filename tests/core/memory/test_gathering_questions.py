"""Which questions gather facts told at different times (``core.memory.query.gathers``),
and what the search does with them: a gathering question gets several moments in its top
results, not one moment told in several lines (``SearchConfig.spread``), on a real SQLite
file with the hashing embedder."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.memory.query import gathers
from core.storage import SQLiteStorage
from tests.core.memory.conftest import store_lines

OWNER = "telegram:79"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2019, 3, 4, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "question",
    [
        "which museums has Tomás visited?",
        "what songs have we learned on the ukulele?",
        "where has Priya gone sailing?",
        "what are the names of her nephews?",
        "how many times did I miss the bus this month?",
        "quais séries eu já terminei?",
        "o que eu já te contei sobre a reforma?",
        "que livros a Bia me emprestou?",
        "quantas vezes eu fui na academia?",
    ],
)
def test_a_question_asking_for_several_things_gathers(question: str) -> None:
    assert gathers(question)


@pytest.mark.parametrize(
    "question",
    [
        "what did Priya cook last Sunday?",
        "where is the new office?",
        "how long has she been at the bakery?",
        "qual o nome do meu chefe?",
        "em que mês é o casamento?",
        "I visited three museums and learned two songs.",  # not a question
        "what?",
    ],
)
def test_a_question_about_one_thing_does_not(question: str) -> None:
    assert not gathers(question)


QUESTION = "which trails has Ines hiked with the dog?"
# One hike told in two lines the same evening, another hike a week later. Lines of
# different days have no follow-up edges between them; the same evening's two do, and
# both rank above the later hike by their words.
LINES = [
    (0, "hike1a", "Ines hiked the ridge trail with the dog today, muddy but lovely"),
    (5, "hike1b", "the dog loved the ridge trail, Ines says they hiked it in two hours"),
    (60 * 24 * 7, "hike2", "Ines and the dog did the river trail on Saturday morning"),
    (60 * 24 * 8, "c1", "the bus was forty minutes late again"),
    (60 * 24 * 9, "c2", "bought new headphones, the old ones broke"),
    (60 * 24 * 10, "c3", "cleaned the whole flat this afternoon"),
    (60 * 24 * 11, "c4", "my laptop is painfully slow"),
    (60 * 24 * 12, "c5", "it rained all day so I watched a series"),
]


async def found(storage: SQLiteStorage, spread: float, question: str = QUESTION) -> list[str]:
    base = GraphConfig()
    config = replace(base, search=replace(base.search, spread=spread, diversity=0.0))
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    lines = [(T0 + timedelta(minutes=minutes), i, text) for minutes, i, text in LINES]
    await store_lines(memory, OWNER, "dm-79", lines)
    return [r.node.id for r in await memory.search_with_connections(question, OWNER, limit=3)]


async def test_a_gathering_question_gets_another_moment_second(storage: SQLiteStorage) -> None:
    top = await found(storage, spread=0.5)
    assert top[1] == "hike2"
    assert set(top) == {"hike1a", "hike1b", "hike2"}


async def test_without_the_spread_one_moment_fills_the_top(storage: SQLiteStorage) -> None:
    top = await found(storage, spread=0.0)
    assert top[2] == "hike2"


async def test_a_question_about_one_moment_is_not_spread(storage: SQLiteStorage) -> None:
    question = "when did Ines hike the ridge trail?"
    assert await found(storage, spread=0.5, question=question) == await found(
        storage, spread=0.0, question=question
    )


async def test_a_gathering_question_looks_further_down_its_lists(storage: SQLiteStorage) -> None:
    # Two candidates a list: the later hike is third by its words, beyond them unless the
    # gathering question takes three times as many.
    async def top(gather_k: float) -> list[str]:
        base = GraphConfig()
        search = replace(base.search, seed_k=2, gather_k=gather_k, spread=0.15, diversity=0.0)
        memory = GraphMemory(storage, HashingEmbedder(), config=replace(base, search=search))
        # No walk: only what the lists give.
        found = await memory.search_with_connections(QUESTION, OWNER, depth=0, limit=5)
        return [r.node.id for r in found]

    await found(storage, spread=0.0)  # stores the lines
    assert "hike2" in await top(3.0)
    assert "hike2" not in await top(1.0)
