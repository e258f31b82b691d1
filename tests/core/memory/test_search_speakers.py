"""Whose line it is (``SearchConfig.other_speaker``), on a real SQLite file with the
hashing embedder: in a transcript stored under one owner ("Name: text" lines), a question
naming one speaker finds what that speaker said before another speaker's reaction to it,
even when the reaction repeats the question's words more closely."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from core.embeddings import HashingEmbedder
from core.memory.entities import speaker
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import SQLiteStorage
from tests.core.memory.conftest import store_lines

OWNER = "discord:80"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2020, 9, 1, 19, 0, tzinfo=UTC)

# Different days (no follow-up edges between them): only the ranking decides.
LINES = [
    ("told", "Rosa: finally finished the quilt for my niece, blue and yellow squares"),
    ("reaction", "Teo: Rosa your quilt for your niece, blue and yellow squares, so lovely!"),
    ("c1", "Teo: the train was late again this morning"),
    ("c2", "Rosa: I repainted the kitchen door on Sunday"),
    ("c3", "Teo: my laptop keeps freezing"),
    ("c4", "Rosa: we had pizza for dinner"),
    ("plain", "the quilt shop downtown closed last week"),
]


async def ranked(storage: SQLiteStorage, other_speaker: float, question: str) -> list[str]:
    base = GraphConfig()
    config = replace(base, search=replace(base.search, other_speaker=other_speaker, diversity=0.0))
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    lines = [(T0 + timedelta(days=day), i, text) for day, (i, text) in enumerate(LINES)]
    await store_lines(memory, OWNER, "guild-80", lines)
    found = await memory.search_with_connections(question, OWNER, limit=5)
    return [r.node.id for r in found]


QUESTION = "what did Rosa make for her niece, the quilt with blue and yellow squares?"


async def test_the_named_speakers_line_comes_before_anothers_reaction(
    storage: SQLiteStorage,
) -> None:
    top = await ranked(storage, 0.6, QUESTION)
    assert top[0] == "told"
    assert top.index("told") < top.index("reaction")


async def test_without_speakers_the_closer_wording_wins(storage: SQLiteStorage) -> None:
    top = await ranked(storage, 1.0, QUESTION)
    assert top[0] == "reaction"
    assert top.index("reaction") < top.index("told")


async def test_a_question_naming_no_speaker_weighs_every_line_alike(
    storage: SQLiteStorage,
) -> None:
    unnamed = "the quilt for a niece with blue and yellow squares, so lovely!"
    assert await ranked(storage, 0.6, unnamed) == await ranked(storage, 1.0, unnamed)


def test_a_transcript_line_names_its_speaker() -> None:
    assert speaker("Rosa: finally finished the quilt") == "rosa"
    assert speaker("Ana Paula: cheguei") == "ana paula"
    assert speaker("finally finished: the quilt") is None  # two words then more: prose
    assert speaker("ok: vamos") is None  # a function word is no one
