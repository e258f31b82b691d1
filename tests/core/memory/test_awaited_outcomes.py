"""A line awaiting an outcome (an application, an exam, a wait for an answer) stays an open
matter until its news comes, and news of an outcome points back to it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.memory.query import QueryConfig, awaits_outcome, plan_query
from core.storage import SQLiteStorage
from tests.core.memory.conftest import ranked
from tests.core.memory.test_recall_conversation import CHATTER, OWNER, T0, node

OWNERS = [OWNER]  # users in the storage fixture (conftest)


@pytest.mark.parametrize(
    "text",
    [
        "me inscrevi no concurso do hospital, prova em abril",
        "agr é esperar o resultado, sai em junho",
        "dei entrada no financiamento pela caixa",
        "e to procurando ape pra alugar, o dono vai vender",
        "a Cris tem entrevista na quinta numa escola",
        "applied for permanent residency, they say 3 to 6 months",
        "we applied for a nursery place, waiting list is massive",
        "got an interview for head of year 6 on the 12th, bricking it",
        "auditioning for the jazz programme in October",
        "I won't hear about the interview till May",
        "sent off my application to the British school",
    ],
)
def test_what_awaits_an_outcome(text: str) -> None:
    assert awaits_outcome(text)


@pytest.mark.parametrize(
    "text",
    [
        # The outcome itself closes the matter.
        "saiu a nota da prova de cálculo: 5,5. passei raspando",
        "the exam results came: 71%, best of the school",
        # A question opens nothing; a need or a plan awaits no answer from anyone.
        "a prova é amanhã?",
        "the old boat needs a new outboard before the season",
        "vou pintar a sala no sábado",
        "que calor hoje, o ventilador não dá conta",
    ],
)
def test_what_awaits_nothing(text: str) -> None:
    assert not awaits_outcome(text)


@pytest.mark.parametrize(
    "text",
    [
        "PASSEI!!!!! acabei de ver meu nome na lista",
        "APROVARAM!!!! vou ter minha casinha",
        "contrataram ela!!! começa segunda",
        "peguei as chaves ontem!!!",
        "they rang at lunch and it's mine!!",
        "got the letter this morning. I'm in.",
        "theirs came through!! they land on 3 June",
        "they said yes!! installation in August",
        "e aí, deu certo?",
        "any news?",
    ],
)
def test_news_of_an_outcome_points_back(text: str) -> None:
    config = QueryConfig()
    plan = plan_query(text, T0, config)
    assert plan.news
    plain = plan_query(text, T0, replace(config, news_bonus=0.0))
    assert plan.weight > plain.weight or plain.weight == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "how many kids have I got in my class this year?",
        "he won't eat anything green, what do I cook?",
        "me indica um passeio aqui em sp?",
        "choveu o dia inteiro, fiquei organizando o guarda-roupa",
    ],
)
def test_other_messages_are_no_news(text: str) -> None:
    assert not plan_query(text, T0).news


async def test_news_months_later_finds_the_application(storage: SQLiteStorage) -> None:
    # The application is undated and 80 days old when its news comes: past the window of
    # an ordinary thread (QueryConfig.thread_days), and sharing no word with the news.
    async def news_ranks(config: QueryConfig) -> list[str]:
        memory = GraphMemory(storage, HashingEmbedder(), config=GraphConfig(query=config))
        return await ranked(memory, news, limit=3)

    memory = GraphMemory(storage, HashingEmbedder())
    await memory.store(node("applied", "applied for permanent residency, so much paperwork", T0))
    at = T0 + timedelta(days=20)
    for i, text in enumerate(CHATTER):
        await memory.store(node(f"c{i}", text, at))
        at += timedelta(days=5)
    news = node("news", "email this morning... I'm officially staying!!!", T0 + timedelta(days=80))
    await memory.store(news)
    assert (news.timestamp - T0).days > QueryConfig().thread_days
    assert (await news_ranks(QueryConfig()))[0] == "applied"
    # Without the awaited outcome read, the line is no thread any more.
    off = QueryConfig(awaiting=0.0, awaiting_news=0.0, news_bonus=0.0)
    assert "applied" not in await news_ranks(off)
