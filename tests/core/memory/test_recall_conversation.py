"""Recall that follows the conversation (core.memory.query) on a real SQLite file with the
hashing embedder: follow-ups without shared words, times named in questions, privacy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphMemory
from core.memory.query import QueryConfig, plan_query
from core.storage import MemoryNode, NodeType, SQLiteStorage
from tests.core.memory.conftest import ranked

OWNER = "telegram:42"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
# Years in the past on purpose: everything is relative to the messages' own times.
T0 = datetime(2019, 3, 4, 9, 0, tzinfo=UTC)  # a Monday

CHATTER = [
    "que calor hoje, o ventilador não dá conta",
    "o trânsito tava um caos, levei uma hora",
    "assisti um filme bobo ontem à noite",
    "acabou a internet aqui em casa de novo",
    "choveu o dia inteiro, fiquei organizando o guarda-roupa",
    "comprei um fone novo, o antigo quebrou",
    "a reunião podia ter sido um email",
    "fiz uma faxina geral no apartamento",
    "o ônibus atrasou quarenta minutos",
    "to tentando beber mais água",
    "meu notebook tá muito lento",
    "vi um vídeo de gatinho e perdi meia hora",
]


@pytest.fixture
def memory(storage: SQLiteStorage) -> GraphMemory:
    return GraphMemory(storage, HashingEmbedder())


def node(node_id: str, text: str, at: datetime, *, scope: str = "dm") -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=OWNER,
        content=text,
        type=NodeType.USER_MESSAGE,
        timestamp=at,
        chat_id="dm-42" if scope == "dm" else scope,
        chat_kind="dm" if scope == "dm" else "group",
        scope=scope,
    )


async def chatter(memory: GraphMemory, start: datetime, every: timedelta) -> datetime:
    at = start
    for i, text in enumerate(CHATTER):
        await memory.store(node(f"c{i}", text, at))
        at += every
    return at


async def test_an_announced_event_is_picked_up_by_a_follow_up_without_shared_words(
    memory: GraphMemory,
) -> None:
    await memory.store(node("interview", "amanhã tenho entrevista na Totvs, to nervoso", T0))
    # Chatter on the following days, then the news, three days later.
    end = await chatter(memory, T0 + timedelta(hours=5), timedelta(hours=5))
    news = node("news", "e aí, adivinha? passei!!", end + timedelta(days=1))
    found = await ranked(memory, news, limit=3)
    assert found[0] == "interview"
    # Without the conversation (a plain search of the words) the event is not found.
    plain = await memory.search_with_connections(news.content, OWNER, limit=3, at=news.timestamp)
    assert "interview" not in [r.node.id for r in plain]


async def test_a_date_in_a_question_the_person_asked_opens_no_thread(
    memory: GraphMemory,
) -> None:
    await memory.store(node("exam", "amanhã cedo faço a prova do Detran, torce aí", T0))
    end = await chatter(memory, T0 + timedelta(hours=5), timedelta(hours=5))
    # Asked the day before the news, in the session before it: newer and as "due" as the
    # exam if its "amanhã" were read as an announcement.
    asked = node("asked", "amanhã a padaria abre no feriado? não lembro mais", end)
    await memory.store(asked)
    news = node("news", "e aí, adivinha? passei!!", end + timedelta(days=1))
    found = await ranked(memory, news, limit=3)
    assert found[0] == "exam"


async def test_a_time_named_in_a_question_picks_among_similar_messages(
    memory: GraphMemory,
) -> None:
    await memory.store(node("run1", "corri 5km no parque hoje", T0 - timedelta(days=9)))
    await memory.store(node("run2", "corri 10km no parque hoje, recorde", T0 - timedelta(days=2)))
    await memory.store(node("run3", "corri 7km no parque hoje", T0 + timedelta(days=2)))
    question = node("q", "quanto eu corri no parque semana passada?", T0 + timedelta(days=4))
    found = await ranked(memory, question)
    assert found[0] == "run2"  # the week before that Friday, not the latest or the first
    assert "run3" in found  # the others are still there, lower


async def test_a_statement_dating_its_own_news_is_no_window(memory: GraphMemory) -> None:
    plan = plan_query("she flew back yesterday, we cried at the airport", T0)
    assert plan.windows == []
    plan = plan_query("what did I eat last week?", T0)
    assert [w.start.date().isoformat() for w in plan.windows] == ["2019-02-25"]


def test_a_request_for_a_suggestion_names_the_coming_day_not_the_last() -> None:
    # T0 is a Monday: a bare "Sunday" in a question about the past is yesterday's, but a
    # request for a suggestion is about plans, so it names no window to search in.
    plan = plan_query("hosting my team for brunch on Sunday, what should I make?", T0)
    assert plan.windows == []
    plan = plan_query("sábado tem churrasco, o que eu posso comer?", T0)
    assert plan.windows == []
    # What was asked about the past stays so, in a request or not.
    plan = plan_query("what did I cook on Sunday?", T0)
    assert [w.start.date().isoformat() for w in plan.windows] == ["2019-03-03"]
    plan = plan_query("I loved last Sunday's brunch, what should I make this time?", T0)
    assert [w.start.date().isoformat() for w in plan.windows] == ["2019-03-03"]


def test_context_weight_follows_what_the_message_carries() -> None:
    config = QueryConfig()
    short = plan_query("Ficou melhor?", T0, config)
    pointing = plan_query("e ela, voltou?", T0, config)
    long = plan_query(
        "When did Caroline go to the LGBTQ support group meeting in the city center?", T0, config
    )
    assert short.weight > long.weight
    assert pointing.deictic and pointing.weight > short.weight
    assert long.weight <= config.by_words[3]


async def test_threads_of_another_scope_stay_out(memory: GraphMemory) -> None:
    # An event told in a private chat must not surface in a group's recall, even as the
    # thread a follow-up in the group would pick up.
    await memory.store(node("secret", "amanhã tenho consulta no psiquiatra", T0))
    await memory.store(node("g1", "bom dia grupo", T0 + timedelta(hours=5), scope="group:1"))
    follow = node("g2", "e aí, deu certo?", T0 + timedelta(days=2), scope="group:1")
    await memory.store(follow)
    recall = await memory.recall(
        OWNER,
        follow.content,
        scopes=["group:1"],
        limit=5,
        exclude_ids=[follow.id],
        at=follow.timestamp,
    )
    assert "secret" not in [r.node.id for r in recall.nodes]
    everything = await memory.recall(
        OWNER,
        follow.content,
        scopes=None,
        limit=5,
        exclude_ids=[follow.id],
        at=follow.timestamp,
    )
    assert "secret" in [r.node.id for r in everything.nodes]


async def test_nothing_after_the_message_is_recalled(memory: GraphMemory) -> None:
    await memory.store(node("before", "amanhã tenho prova de cálculo", T0))
    await memory.store(node("after", "a prova de cálculo foi ótima", T0 + timedelta(days=3)))
    follow = node("f", "e a prova?", T0 + timedelta(days=1))
    found = await ranked(memory, follow)
    assert "before" in found and "after" not in found


async def test_the_bots_replies_and_the_persons_questions_rank_below_statements(
    memory: GraphMemory, storage: SQLiteStorage
) -> None:
    await memory.store(node("fact", "sou alérgico a camarão", T0))
    await memory.store(node("ask", "camarão engorda?", T0 + timedelta(days=1)))
    reply = MemoryNode(
        id="bot",
        owner=OWNER,
        content="Camarão é rico em proteína!",
        type=NodeType.AKIRA_RESPONSE,
        timestamp=T0 + timedelta(days=1, minutes=1),
        chat_id="dm-42",
    )
    await memory.store(reply)
    found = await ranked(memory, node("q", "posso comer camarão?", T0 + timedelta(days=5)))
    assert found.index("fact") < found.index("ask")
    assert found.index("fact") < found.index("bot")


async def test_turns_excluded_from_the_results_still_give_context(memory: GraphMemory) -> None:
    # The recall stage excludes the recent turns (the prompt shows them): they are still
    # read as context, and still not returned.
    await memory.store(node("old", "a prova de cálculo do semestre passado foi um desastre", T0))
    await chatter(memory, T0 + timedelta(days=1), timedelta(days=1))
    at = T0 + timedelta(days=30)
    turn = node("turn", "amanhã tenho prova de cálculo de novo", at)
    await memory.store(turn)
    message = node("msg", "e se eu for mal?", at + timedelta(minutes=2))
    await memory.store(message)
    recall = await memory.recall(
        OWNER,
        message.content,
        scopes=None,
        limit=3,
        exclude_ids=["msg", "turn"],
        at=message.timestamp,
    )
    found = [r.node.id for r in recall.nodes]
    assert "old" in found
    assert "turn" not in found
