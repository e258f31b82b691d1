"""core.profile: style measured per message, topics counted with decay on message time
(order-free, so a replay or an import gives the same profile), the "about this person"
text, and the feelings of core.emotion.feelings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.emotion.feelings import recalled_feeling, trajectory_days, trajectory_line
from core.emotion.state import EmotionHistoryEntry
from core.profile import ProfileLearner, about_section, measure
from core.storage import SQLiteStorage
from core.storage.records import MemoryNode, NodeType

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("oi mano, blz? kkkk 😂", {"emoji", "slang", "question", "informal", "pt"}),
        (
            "Prezado senhor, gostaria de saber o horário de funcionamento.",
            {"formal", "pt"},
        ),
        ("what do you think about python?", {"question", "en"}),
        ("I went to the market today.", {"en"}),
        ("lol idk, whatever u want", {"slang", "informal", "en"}),
        ("nossa que dia longo hoje", {"informal", "pt"}),
    ],
)
def test_style_of_one_message(text: str, expected: set[str]) -> None:
    sample = measure(text)
    found = {
        name
        for name in ("emoji", "slang", "question", "formal", "informal")
        if getattr(sample, name)
    }
    if sample.language:
        found.add(sample.language)
    assert found == expected


def _node(i: int, text: str, at: datetime, owner: str = "console:a") -> MemoryNode:
    return MemoryNode(f"n{owner}{i}", owner, text, NodeType.USER_MESSAGE, at)


MESSAGES = [
    (T0, "meu chefe me estressa no trabalho 😩"),
    (T0 + timedelta(days=1), "reunião de trabalho de novo kkk"),
    (T0 + timedelta(days=6), "fiz uma pizza ontem, ficou top"),
    (T0 + timedelta(days=6, hours=1), "vc gosta de cozinhar?"),
    (T0 + timedelta(days=29), "tô pensando em trocar de emprego"),
]


async def test_replayed_in_any_order_the_profile_is_the_same(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "a.db") as storage:
        learner = ProfileLearner(storage.profiles, half_life_days=30)
        for i, (at, text) in enumerate(MESSAGES):
            await learner.learn(_node(i, text, at, "console:live"))
        # An import of the same history, newest first, in one batch.
        await learner.learn_many(
            _node(i, text, at, "console:import")
            for i, (at, text) in reversed(list(enumerate(MESSAGES)))
        )
        at = T0 + timedelta(days=29)
        live = await learner.profile("console:live", at=at)
        imported = await learner.profile("console:import", at=at)
    assert live.to_dict() == imported.to_dict()
    assert [t.name for t in live.favorite_topics][:2] == ["work", "food"]
    assert live.favorite_topics[0].mentions == 3
    assert live.style.traits()[:2] == ["short", "informal"]
    assert "emoji" not in live.style.traits()  # 1 message in 5, decayed: under the share
    assert live.style.languages == ["pt"]
    text = about_section(live)
    assert text is not None
    assert text.splitlines()[0].startswith("Their style (mirror it): short messages, informal")
    assert text.splitlines()[1].startswith("Topics they care about: work, food")
    assert about_section(live, topics=False) == text.splitlines()[0]


async def test_old_interests_fade_and_the_bots_turns_teach_nothing(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "a.db") as storage:
        learner = ProfileLearner(storage.profiles, half_life_days=30)
        for i, (at, text) in enumerate(MESSAGES):
            await learner.learn(_node(i, text, at))
        reply = MemoryNode("r", "console:a", "adoro cozinhar 😍😍", NodeType.AKIRA_RESPONSE, T0)
        await learner.learn(reply)
        await learner.learn(_node(99, "   ", T0))
        assert (await learner.profile("console:a", at=T0 + timedelta(days=29))).style.messages == 5
        # Two half-lives later work (3 mentions a month before) counts under one mention.
        later = await learner.profile("console:a", at=T0 + timedelta(days=120))
        assert later.favorite_topics == []
        assert later.style.known  # style is a share of messages: it does not fade away
        assert await learner.profile("console:nobody") == (await learner.profile("console:nobody"))
        assert (await learner.profile("console:nobody")).empty


async def test_a_topics_keyword_counts_as_the_topic_once(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "a.db") as storage:
        learner = ProfileLearner(storage.profiles)
        node = _node(1, "trabalho trabalho", T0)
        node.tags = ["work", "trabalho", "projeto"]  # as the memory graph tags it
        await learner.learn(node)
        names = {(c.kind, c.name) for c in await storage.profiles.counters("console:a")}
    assert ("topic", "work") in names
    assert ("tag", "projeto") in names
    assert ("tag", "trabalho") not in names


def test_topic_labels_follow_the_persons_language() -> None:
    learner = ProfileLearner.__new__(ProfileLearner)
    from core.memory.tags import Tagger

    learner.tagger = Tagger()
    assert learner.topic_label("work", "pt") == "trabalho"
    assert learner.topic_label("work", "en") == "work"
    assert learner.topic_label("python", "pt") == "python"


def test_a_recalled_feeling_needs_a_confident_non_neutral_reading() -> None:
    assert recalled_feeling("agressivo", 0.9, threshold=0.5) == "angry"
    assert recalled_feeling("triste", 0.4, threshold=0.5) is None
    assert recalled_feeling("neutro", 0.99, threshold=0.5) is None
    assert recalled_feeling(None, None, threshold=0.5) is None
    assert recalled_feeling("saudoso", 0.8, threshold=0.5) == "saudoso"  # a custom state


def test_the_trajectory_is_one_line_of_changes_in_the_window() -> None:
    def entry(days: float, label: str, confidence: float = 0.9) -> EmotionHistoryEntry:
        return EmotionHistoryEntry(T0 + timedelta(days=days), label, confidence)

    now = T0 + timedelta(days=40)
    history = [
        entry(0, "feliz"),  # outside the 30 days
        entry(11, "agressivo"),
        entry(11.1, "agressivo"),
        entry(12, "neutro"),  # no feeling: the anger goes on
        entry(13, "agressivo"),
        entry(20, "triste", confidence=0.3),  # unsure: left out
        entry(33, "feliz"),
        entry(40, "triste"),
    ]
    assert trajectory_line(history, now, threshold=0.5, days=30) == (
        "Their feelings over the last 30 days: angry (29 days ago) → happy (7 days ago)"
        " → sad (just now)"
    )
    assert trajectory_line([entry(39, "neutro")], now, threshold=0.5) is None
    assert trajectory_days([30, 15, 0]) == 30
    assert trajectory_days([0]) == 30
