"""A question joining two facts reaches the second through a word the two lines share
that the person rarely says (core.memory.query.word_bridges, QueryConfig.bridge_share)."""

from __future__ import annotations

from datetime import timedelta

from core.memory.query import QueryConfig, word_bridges
from core.storage import MemoryNode, NodeType, SQLiteStorage
from tests.core.memory.conftest import memory_with, ranked
from tests.core.memory.test_recall_conversation import CHATTER, OWNER, T0, node

OWNERS = [OWNER]  # users in the storage fixture (conftest)
# Everyday lines between the facts a question joins (none shares a word with them).
MORE_CHATTER = [
    *CHATTER,
    "fiz um bolo de cenoura, ficou ótimo",
    "minha vizinha adotou um cachorro barulhento",
    "to viciado numa série coreana",
    "o mercado aumentou o preço do café de novo",
    "achei uma nota de vinte reais no casaco",
    "meu tênis furou, preciso de outro",
    "dormi mal, o calor não deixou",
    "a padaria da esquina fechou",
    "aprendi a fazer pão de queijo",
    "o elevador do prédio quebrou de novo",
]


def test_lines_sharing_a_rare_word_are_bridged() -> None:
    pool = [
        node("trip", "a facul vai fazer viagem de campo pra Floripa em julho", T0),
        node("sister", "minha irmã Carol mora em Floripa, disse que tá frio", T0),
        node("a", "fui na academia cedo", T0),
        node("b", "academia lotada, desisti", T0),
        node("c", "paguei o mês da academia", T0),
    ]
    bridges = word_bridges(pool, most=2)
    assert bridges["trip"] == ["sister"]
    assert bridges["sister"] == ["trip"]
    # "academia" is said in three lines: common in this history, no bridge.
    assert "a" not in bridges and "b" not in bridges
    # With a looser rarity it bridges them all.
    assert set(word_bridges(pool, most=3)["a"]) == {"b", "c"}


def test_the_bots_echo_neither_counts_nor_is_bridged() -> None:
    reply = MemoryNode(
        "reply", OWNER, "Floripa em julho deve estar fria!", NodeType.AKIRA_RESPONSE, T0
    )
    pool = [node("trip", "vou pra Floripa em julho", T0), reply]
    assert word_bridges(pool, most=2) == {}
    # Said twice by the person, echoed once by the bot: still rare.
    pool.append(node("sister", "minha irmã mora em Floripa", T0))
    assert word_bridges(pool, most=2)["trip"] == ["sister"]


async def test_a_question_joining_two_facts_reaches_both(storage: SQLiteStorage) -> None:
    # "Can I make it to rehearsal?" joins when rehearsal is and when the new shift ends;
    # only the first shares a word with the question.
    async def question_ranks(share: float) -> list[str]:
        return await ranked(memory_with(storage, bridge_share=share), question, limit=5)

    memory = memory_with(storage)
    at = T0
    chatter = MORE_CHATTER
    lines = [
        ("rehearsal", "o ensaio da banda é toda quarta às 20h, num estúdio no centro"),
        *((f"c{i}", text) for i, text in enumerate(chatter[:11])),
        ("shift", "mudaram minha escala no call center, agora saio às 21h toda quarta"),
        *((f"d{i}", text) for i, text in enumerate(chatter[11:])),
    ]
    for node_id, text in lines:
        await memory.store(node(node_id, text, at))
        at += timedelta(days=1)
    question = node(
        "q", "dá pra eu chegar no ensaio da banda no estúdio essa semana ou não rola?", at
    )
    await memory.store(question)
    found = await question_ranks(QueryConfig().bridge_share)
    # The rehearsal line is found and passes a share of its score to the shift line.
    assert found.index("shift") == found.index("rehearsal") + 1
    assert "shift" not in await question_ranks(0.0)
