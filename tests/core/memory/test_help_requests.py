"""A request for help or a suggestion leans on what the person said about themself
(core.memory.query, session 8 round 2): their first-person stative self-descriptions
become seeds. A real SQLite file and the hashing embedder."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from core.memory.query import (
    QueryConfig,
    asks_for_help,
    describes_self,
    plan_query,
    self_priors,
)
from core.storage import MemoryNode, SQLiteStorage
from tests.core.memory.conftest import CHATTER_PT, memory_with, said

OWNER = "telegram:7"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2019, 5, 6, 9, 0, tzinfo=UTC)


def node(node_id: str, text: str, at: datetime) -> MemoryNode:
    return said(OWNER, node_id, text, at, chat_id="dm-7")


def test_requests_for_help_are_a_closed_class_of_forms() -> None:
    for text in (
        "vou fazer um bolo pro aniversário da minha mãe, me ajuda com a receita?",
        "what should I cook for my book club tonight?",
        "me indica algum filme?",
        "preciso de uma série nova, sugere?",
        "any dinner ideas for tonight?",
        "can you recommend a good book?",
        "vou de ônibus amanhã, sugere um lanchinho pra levar?",  # the verb and its object
        "vou encomendar uns docinhos, o que vc sugere?",  # "vc": você as typed
        "me dá umas dicas pra viagem ser de boa?",
        "pode me montar um roteiro de 3 dias?",
        "qual a melhor forma de ir pra Lisboa?",
        "what kind of place should I book?",  # a wh-phrase, then "should I"
        "can you plan our first couple of days for me?",
        "what's the best way to get there from Dublin?",
        # The modal questions of choosing, the subjunctive of fitting, asking for ideas
        # or a list, and first-person questions of what to pick or how to go about it.
        "should I take the job or wait?",
        "where can we eat near the station?",
        "que curso vc acha q eu devo fazer?",
        "quero algo q eu possa levar na bolsa",
        "somewhere I can go without a car?",
        "me diz uns livros bons pra praia",
        "me da umas ideia de presente",
        "ideias?",
        "party on friday, ideas?",
        "give me a 4 week plan for the exam",
        "vou num rodízio, o q eu peço?",
        "o que eu posso beber lá?",
        "mudança semana que vem, como eu me organizo?",
        "monta uma lista de filmes pra mim?",
        "plan a day out for me and the kids?",
        "three starters on the menu, which one?",
        # Asking what the listener recommends, the best way, advice; how to go about it.
        "chego no Rio sexta, q passeios vc recomenda?",
        "vc me indica um restaurante por lá?",
        "qual o melhor jeito de ir pro sul?",
        "my mate's party is on saturday, any advice?",
        "churrasco domingo, como eu tempero a carne?",
    ):
        assert asks_for_help(text), text
    for text in (
        "minha prima vai me ajudar com o carro dela",  # told, not asked
        "what did I cook last week?",
        "Ficou melhor?",
        "a Ana recomenda uma série nova",  # a third person's suggestion, told
        "can you believe it?",
        "what did you cook yesterday?",
        "can I tell you something?",  # "can I" asks leave, not advice
        "quanto eu ainda devo pro mecânico?",  # "devo" of owing: no infinitive follows
        "how far could I run back in March?",  # a past ability, recalled
        "me fala uma coisa, vc gosta de chuva?",  # one thing asked, not a list
        "I should go to bed",  # no question
        "o que eu comi ontem?",
        "vc recomenda aquele livro pra todo mundo.",  # told, no question
        "como eu falo inglês mal, fico quieto.",  # "como" of a cause, no question
    ):
        assert not asks_for_help(text), text


def test_self_descriptions_are_stative_first_person_statements() -> None:
    for text in (
        "sou intolerante a lactose e vivo esquecendo",
        "I've been vegan since last summer, it's going ok",
        "não como carne de porco, por religião",
        "but I can't stand cilantro",
        "odeio academia, mas amo dançar",
        "I'm more of a tea person anyway",
        "prefiro jogo difícil",
        # What they must live with: conditions, fears, a doctor's orders.
        "alergia desde criança, sempre ando com antialérgico",
        "I have a genuine phobia of planes",
        "só que eu enjoo horrores em estrada",
        "o médico mandou cortar cerveja e carne vermelha",
        "the orthopedist says no stairs for a while",
        # Fears and diagnoses, named by their morphemes and phrases.
        "tenho claustrofobia, elevador nem pensar",
        "eu tenho pavor de altura",
        "crise de enxaqueca de novo",
        "she got diagnosed with coeliac last year",
        # Any health professional by the endings of those nouns, then an order.
        "a dermatologista disse pra evitar sol forte",
        "neurologist says my triggers are red wine and skipping meals",
        "GP upped my inhaler and said no running in the cold",
        "ele proibiu pegar peso",
        # What rules things out, in the determiners of exclusion.
        "nada de fritura depois das 8",
        "so no garlic, no onion, no bread",
        "nothing heavier than a kettle for six weeks",
        # What they or those with them want, and the money there is.
        "Mateo wants the full adrenaline package",
        "quero aprender a cozinhar",
        "to dura esse mês, sobra quase nada",
        "the budget is tight for all of us",
        # Chronic conditions by name, and what one lives with for them.
        "meu pai tem parkinson faz uns anos",
        "my wife has asthma, dust is a nightmare",
        "fiz exame e deu gastrite",
        "tomo remédio pra tireoide todo dia",
        "I'm on blood pressure pills now",
        # What someone with the person cannot or will not do, and terms to keep to.
        "ela não pode comer glúten",
        "he doesn't drink at all",
        "we don't eat beef",
        "I don't own a bike",
        "fine by me as long as it's cheap",
        "a nutri mandou cortar açúcar",
        "told me to avoid dairy for a month",
        # What they or those with them love; what is not for them; what they avoid.
        "a Bia tá viciada em slime",
        "he's obsessed with trains",
        "my mum adores musicals",
        "o q eu gosto é praia vazia",
        "pagode não desce",
        "clubbing is not my thing",
        "to evitando açúcar",
        # What the person cannot bear or handle, a condition by its name, no money.
        "I can't bear loud places",
        "I can't handle spice at all",
        "i have ADHD, can't focus with lyrics on",
        "i know my triggers: red wine, aged cheese",
        "to lisa até quitar o cartão",
    ):
        assert describes_self(text), text
    for text in (
        "to com preguiça de fazer qualquer coisa hoje",  # a passing state
        "I'm cooking for my parents tonight",  # a gerund: what they are doing
        "você sabe como eu sou?",  # a question states nothing
        "fiz um bolo de cenoura ontem",
        "the doctor was late today",  # a doctor, no orders
        "the artist said it was fine",  # an -ist that is no health profession, in English
        "nada demais hoje, só trabalho",  # "nada de" is a determiner; "demais" is not
        "no, I went there yesterday",  # one "no" is an answer, not a list ruled out
        "the site was down all night",  # "-itis" names a condition, "site" does not
        "ele ficou em casa ontem",
        "I don't know yet",  # "don't" with no verb of eating, liking or owning
        "a noite foi longa",  # "-ite" of a condition only on its stems: not "noite"
        "the bus was late, as usual",
        "I can't find my keys",  # not a verb of bearing or handling
    ):
        assert not describes_self(text), text


@pytest.mark.parametrize("self_prior", [0.0, None])  # off, the defaults
async def test_a_request_for_help_finds_what_the_person_said_about_themself(
    storage: SQLiteStorage, self_prior: float | None
) -> None:
    memory = memory_with(storage, self_prior=self_prior)
    await memory.store(node("lactose", "sou intolerante a lactose e vivo esquecendo", T0))
    at = T0 + timedelta(days=1)
    for i, text in enumerate(CHATTER_PT):
        await memory.store(node(f"c{i}", text, at))
        at += timedelta(hours=7)
    # Lines sharing the request's words, none about the person.
    await memory.store(node("mom", "vou passar o domingo na casa da minha mãe", at))
    await memory.store(node("cake", "o bolo da padaria acabou cedo hoje", at + timedelta(hours=1)))
    request = node(
        "q",
        "vou fazer um bolo pro aniversário da minha mãe, me ajuda com a receita?",
        at + timedelta(days=2),
    )
    await memory.store(request)
    recall = await memory.recall(
        OWNER, request.content, scopes=None, limit=3, exclude_ids=["q"], at=request.timestamp
    )
    found = [r.node.id for r in recall.nodes]
    if self_prior is None:
        assert "lactose" in found[:3]
    else:  # off: the lines sharing its words, and nothing about the person
        assert "lactose" not in found


def test_only_the_closest_self_descriptions_are_seeded() -> None:
    """Many self-descriptions in a long history: the closest ``self_most`` of them."""
    rng = np.random.default_rng(7)
    query = rng.standard_normal(16).astype(np.float32)
    query /= np.linalg.norm(query)
    pool = [node(f"s{i}", f"sou fã de coisa número {i}", T0 + timedelta(hours=i)) for i in range(8)]
    pool += [
        node(f"c{i}", text, T0 + timedelta(days=1, hours=i)) for i, text in enumerate(CHATTER_PT)
    ]
    vectors = {}
    for n, item in enumerate(pool):
        noise = rng.standard_normal(16).astype(np.float32)
        vector = (8 - n if n < 8 else 0) * 4.0 * query + 0.1 * noise  # s0 closest, then s1...
        vectors[item.id] = vector / np.linalg.norm(vector)
    config = replace(QueryConfig(), self_most=3)
    plan = plan_query("me indica alguma coisa pra fazer?", T0 + timedelta(days=3), config)
    seeds = self_priors(plan, query, pool, vectors, config=config)
    assert sorted(seeds) == ["s0", "s1", "s2"]
    assert all(0 < score <= config.self_prior for score in seeds.values())
    # Not a request for help: nothing.
    told = plan_query("fui ao cinema ontem", T0 + timedelta(days=3), config)
    assert self_priors(told, query, pool, vectors, config=config) == {}
