"""Who and what read apart (``SearchConfig.topic_share``), on a real SQLite file with the
hashing embedder: in a transcript under one owner, a question naming the speaker ("where
has Rosa camped?") finds the long line where she tells it before her short lines on
nothing in particular, which share little with the question but her name; and its
full-text list looks for "camped", not for every line Rosa said
(``SearchConfig.topic_text``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from core.embeddings import HashingEmbedder
from core.memory.entities import without_names
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import SQLiteStorage
from tests.core.memory.conftest import store_lines

OWNER = "discord:81"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2020, 9, 1, 19, 0, tzinfo=UTC)

# Different days (no follow-up edges between them): only the ranking decides. Rosa is
# named in 6 lines (5 labels, one address): with ``entity_postings`` 3 a name that
# tells nothing apart, as a speaker's is among hundreds of lines.
LINES = [
    (
        "camping",
        "Rosa: hi Teo! a quiet weekend here after we went camping by the lake with the "
        "kids, then the car broke down on the way back",
    ),
    ("r1", "Rosa: good night Teo"),
    ("r2", "Rosa: so tired today"),
    ("r3", "Rosa: thanks, Teo!"),
    ("r4", "Rosa: haha yes"),
    ("t1", "Teo: I went camping in the hills once"),
    ("t2", "Teo: how are you Rosa?"),
]
QUESTION = "Where has Rosa camped?"


async def ranked(
    storage: SQLiteStorage,
    topic_share: float,
    entity_postings: int,
    *,
    topic_text: bool = True,
    other_speaker: float | None = None,
) -> list[str]:
    base = GraphConfig()
    search = replace(
        base.search,
        topic_share=topic_share,
        topic_text=topic_text,
        other_speaker=base.search.other_speaker if other_speaker is None else other_speaker,
        entity_postings=entity_postings,
        diversity=0.0,
        min_similarity=0.0,  # the hashing embedder's cosines are low: every line a seed
    )
    memory = GraphMemory(storage, HashingEmbedder(), config=replace(base, search=search))
    lines = [(T0 + timedelta(days=day), i, text) for day, (i, text) in enumerate(LINES)]
    await store_lines(memory, OWNER, "guild-81", lines)
    found = await memory.search_with_connections(QUESTION, OWNER, limit=7)
    return [r.node.id for r in found]


async def test_the_topic_line_comes_first_with_the_speakers_name_read_apart(
    storage: SQLiteStorage,
) -> None:
    assert (await ranked(storage, 0.5, 3))[0] == "camping"


async def test_without_it_a_short_line_of_the_speaker_comes_first(
    storage: SQLiteStorage,
) -> None:
    assert (await ranked(storage, 0.0, 3))[0] != "camping"


async def test_a_name_the_memory_holds_rarely_stays_in_the_query(
    storage: SQLiteStorage,
) -> None:
    # 6 mentions under a threshold of 200: the name tells lines apart, nothing changes.
    assert await ranked(storage, 0.5, 200) == await ranked(storage, 0.0, 200)


async def test_the_full_text_list_looks_for_the_topics_words(storage: SQLiteStorage) -> None:
    # The speaker rule off, so only the lists decide: without the name, the full-text
    # list holds the two lines about camping (Teo's too), not Rosa's other lines.
    top = await ranked(storage, 0.5, 3, other_speaker=1.0)
    assert set(top[:2]) == {"camping", "t1"}


async def test_with_the_name_in_it_rosas_other_lines_come_before(
    storage: SQLiteStorage,
) -> None:
    top = await ranked(storage, 0.5, 3, topic_text=False, other_speaker=1.0)
    assert top[0] == "camping"
    assert top[1].startswith("r")


def test_names_are_taken_out_as_entities_key_them() -> None:
    assert without_names("What has Melanie painted?", ["melanie"]) == "What has painted?"
    assert without_names("What are Melanie's pets' names?", ["melanie"]) == (
        "What are pets' names?"
    )
    assert without_names("Onde a Júlia mora?", ["julia"]) == "Onde a mora?"
    assert without_names("Is Rio de Janeiro nice, Ana?", ["rio de janeiro"]) == "Is nice, Ana?"
    assert without_names("Anabel came", ["ana"]) == "Anabel came"  # whole words only
    assert without_names("my sister came", ["rel:sister"]) == "my sister came"
