"""Entities (core.memory.entities): what a message names, in Portuguese and English; the
``same_entity`` edges and postings written with a node; a question reaching a message
through an entity, through the real engine (hashing embedder, real SQLite file); and
nothing of another person or of a private chat coming back through an entity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.embeddings import HashingEmbedder
from core.llm import ScriptedProvider
from core.memory.connections import ConnectionConfig
from core.memory.entities import extract_entities
from core.memory.graph import GraphConfig, GraphMemory
from core.memory.search import SearchConfig
from core.storage import MemoryNode, NodeType, SQLiteStorage
from core.types import ChatKind, ChatRef, IncomingMessage, RecordingResponder, UserRef
from tests.core.memory.conftest import recalled
from tests.core.memory.test_recall_conversation import CHATTER, T0

OWNER, OTHER = "telegram:42", "telegram:7"


# -- extraction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names", "relations"),
    [
        ("a Júlia (minha irmã) jura que é falta de água", ["julia"], ["rel:sister"]),
        ("mandei currículo pra duas startups de Floripa", ["floripa"], []),
        ("fomos pro Rio de Janeiro com meu cachorro", ["rio de janeiro"], ["rel:dog"]),
        ("o Pedro é meu chefe novo", ["pedro"], ["rel:boss"]),
        ("We flew to New York with my little sister", ["new york"], ["rel:sister"]),
        ("What are Melanie's pets' names?", ["melanie"], []),
        ("I joined the LGBTQ support group with my mom", ["lgbtq"], ["rel:mother"]),
        ("Caroline: I went to the park on Monday in May", ["caroline"], []),
        # Days, months and function words are not names; a sentence start is not either.
        ("Ontem fui ao cinema. Depois jantei na Segunda Avenida", ["avenida"], []),
        ("TO MUITO FELIZ HOJE GENTE", [], []),
        # An ex: the role noun, and the statement of a breakup that makes one.
        ("às vezes ainda sinto falta do meu ex", [], ["rel:ex"]),
        ("my ex-wife called last night", [], ["rel:ex"]),
        ("terminei com o Leo depois de 5 anos", ["leo"], ["rel:ex"]),
        ("meu namorado terminou comigo por mensagem", [], ["rel:partner", "rel:ex"]),
        ("we broke up in the spring", [], ["rel:ex"]),
        ("she broke up with me over text", [], ["rel:ex"]),
        ("terminei com o relatório, finalmente", [], []),  # no person: a report
        ("I broke up the fight at the bar", [], []),
        ("ok valeu", [], []),
    ],
)
def test_names_and_relations_in_portuguese_and_english(
    text: str, names: list[str], relations: list[str]
) -> None:
    found = extract_entities(text)
    assert list(found.names) == names
    assert list(found.relations) == relations


def test_a_capital_at_a_sentence_start_is_only_tentative() -> None:
    found = extract_entities("Júlia vai casar em outubro. Nossa, que rápido!")
    assert found.names == ()
    assert "julia" in found.tentative
    assert "nossa" not in found.tentative  # a function word, even capitalised


# -- edges and postings --------------------------------------------------------------------


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    store = SQLiteStorage(tmp_path / "akira.db")
    async with store:
        for owner in (OWNER, OTHER):
            await store.users.ensure(owner)
        yield store


def node(
    node_id: str, text: str, at: datetime, *, owner: str = OWNER, scope: str = "dm"
) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=text,
        type=NodeType.USER_MESSAGE,
        timestamp=at,
        chat_id="dm-42" if scope == "dm" else scope,
        chat_kind="dm" if scope == "dm" else "group",
        scope=scope,
    )


async def fill(memory: GraphMemory, at: datetime, *, owner: str = OWNER, prefix: str = "c") -> None:
    for i, text in enumerate(CHATTER):
        await memory.store(node(f"{prefix}{i}", text, at + timedelta(hours=3 * i), owner=owner))


async def test_a_tentative_name_known_before_is_stored_and_linked(storage: SQLiteStorage) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    await memory.store(node("j1", "a Júlia (minha irmã) chegou de viagem", T0))
    await fill(memory, T0 + timedelta(days=1))
    await memory.store(node("j2", "Júlia marcou a data: 12 de outubro", T0 + timedelta(days=9)))
    await memory.store(node("w1", "Wow, que dia", T0 + timedelta(days=10)))
    edges = await storage.graph.connections_of(OWNER, "j2")
    linked = [c for c in edges if c.relation_type == "same_entity"]
    assert [c.node_id for c in linked] == ["j1"]
    assert "julia" in linked[0].explanation
    named = await storage.graph.entity_mentions(OWNER, ["julia", "wow", "rel:sister"])
    assert named == {"julia": ["j2", "j1"], "rel:sister": ["j1"]}  # "Wow" was never a name


def without_entities(storage: SQLiteStorage) -> GraphMemory:
    """The same stored graph read without the entities' help: no boost, no entity seeds,
    no same_entity edges walked."""
    base = GraphConfig()
    return GraphMemory(
        storage,
        HashingEmbedder(),
        config=replace(
            base,
            search=replace(
                base.search,
                entity_boost=0.0,
                entity_seed=0.0,
                entity_path=0.0,
                relation_weights=(*base.search.relation_weights, ("same_entity", 0.0)),
            ),
        ),
    )


async def test_a_question_reaches_a_message_only_through_an_entity(
    storage: SQLiteStorage,
) -> None:
    """ "When is my sister's wedding?": the wedding message says neither "sister" nor
    "wedding"; it names Júlia, whom an older message calls "minha irmã"."""
    on = GraphMemory(storage, HashingEmbedder())
    await on.store(node("s1", "minha irmã Júlia chegou de viagem ontem", T0))
    await fill(on, T0 + timedelta(days=1))
    await on.store(
        node("s2", "a Júlia marcou a data: 12 de outubro em Paraty", T0 + timedelta(days=6))
    )
    await fill(on, T0 + timedelta(days=7), prefix="d")
    question = node("q", "quando é o casamento da minha irmã?", T0 + timedelta(days=20))
    await on.store(question)
    assert "s2" in await recalled(on, question)
    # Without the entity's help it does not get there: the test can fail.
    assert "s2" not in await recalled(without_entities(storage), question)


async def test_missing_an_ex_reaches_the_breakup(storage: SQLiteStorage) -> None:
    """ "às vezes ainda sinto falta do meu ex": the breakup line shares no word with it;
    the role the breakup gives (``rel:ex``) joins them."""
    on = GraphMemory(storage, HashingEmbedder())
    await on.store(node("breakup", "terminei com o Leo depois de 5 anos", T0))
    await fill(on, T0 + timedelta(days=1))
    await fill(on, T0 + timedelta(days=8), prefix="d")
    question = node("q", "às vezes ainda sinto falta do meu ex, normal?", T0 + timedelta(days=20))
    await on.store(question)
    assert "breakup" in await recalled(on, question)
    assert "breakup" not in await recalled(without_entities(storage), question)


async def test_entities_never_cross_people_or_scopes(storage: SQLiteStorage) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    # Another person's Júlia, and the owner's private one.
    await memory.store(node("o1", "a Júlia me demitiu hoje", T0, owner=OTHER))
    await memory.store(node("p1", "a Júlia (minha irmã) está grávida, segredo", T0))
    await fill(memory, T0 + timedelta(days=1))
    group = node("g1", "a Júlia vem pro churrasco?", T0 + timedelta(days=5), scope="group-1")
    await memory.store(group)
    # The group message names Júlia: linked to the private one, as any edge may be...
    assert any(
        c.relation_type == "same_entity" and c.node_id == "p1"
        for c in await storage.graph.connections_of(OWNER, "g1")
    )
    # ...but a recall in the group never walks into the private chat.
    for question in ("e a Júlia?", "como está a Júlia, minha irmã?"):
        recall = await memory.recall(
            OWNER, question, scopes=["group-1"], limit=10, at=T0 + timedelta(days=6)
        )
        assert "p1" not in [r.node.id for r in recall.nodes]
        assert all(r.node.scope == "group-1" for r in recall.nodes)
    # The other person's Júlia is never the owner's.
    recall = await memory.recall(
        OWNER, "e a Júlia?", scopes=None, limit=20, at=T0 + timedelta(days=6)
    )
    assert "o1" not in [r.node.id for r in recall.nodes]
    assert await storage.graph.entity_mentions(OTHER, ["julia"]) == {"julia": ["o1"]}
    assert not any(c.node_id == "o1" for c in await storage.graph.connections_of(OWNER, "p1"))


async def test_an_entity_named_everywhere_makes_no_edges(storage: SQLiteStorage) -> None:
    """A hub (a speaker's own name, "my mom" for years) tells no message apart: once it
    has ``entity_common`` earlier mentions it is still stored, but links nothing."""
    config = GraphConfig(connections=ConnectionConfig(entity_common=3))
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    for i in range(5):
        at = T0 + timedelta(days=i)
        await memory.store(node(f"m{i}", f"falei com a Marta sobre {CHATTER[i]}", at))
    linked = {
        node_id: {
            c.node_id
            for c in await storage.graph.connections_of(OWNER, node_id)
            if c.relation_type == "same_entity"
        }
        for node_id in ("m1", "m2", "m3", "m4")
    }
    assert linked == {"m1": {"m0"}, "m2": {"m1", "m0"}, "m3": set(), "m4": set()}
    named = await storage.graph.entity_mentions(OWNER, ["marta"])
    assert named == {"marta": ["m4", "m3", "m2", "m1", "m0"]}


async def test_entities_off_write_no_postings(storage: SQLiteStorage) -> None:
    config = GraphConfig(connections=ConnectionConfig(entities=False), search=SearchConfig())
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    await memory.store(node("j1", "a Júlia (minha irmã) chegou", T0))
    assert await storage.graph.entity_mentions(OWNER, ["julia"]) == {}


# -- through the real engine ---------------------------------------------------------------


def message(text: str, at: datetime, message_id: str, *, group: bool = False) -> IncomingMessage:
    kind = ChatKind.GROUP if group else ChatKind.DM
    chat = ChatRef(
        "telegram", "group-1" if group else "dm-42", kind, scope="group-1" if group else None
    )
    return IncomingMessage(
        platform="telegram",
        chat=chat,
        author=UserRef("telegram", "42", display_name="Ana"),
        text=text,
        message_id=message_id,
        sent_at=at,
    )


async def test_the_engine_recalls_through_an_entity_and_keeps_private_chats_private(
    tmp_path: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        llm={"provider": "scripted"},
        embedding={"backend": "hashing"},
        memory={"history_turns": 0},
    )
    provider = ScriptedProvider(["ok"])
    engine = build_engine(settings, llm=provider)
    async with engine:
        turns = [
            ("minha irmã Júlia chegou de viagem ontem", T0, False),
            ("a Júlia marcou a data: 12 de outubro em Paraty", T0 + timedelta(days=6), False),
            *((text, T0 + timedelta(days=7, hours=3 * i), False) for i, text in enumerate(CHATTER)),
            ("quando é o casamento da minha irmã?", T0 + timedelta(days=20), False),
            ("alguém conhece a Júlia?", T0 + timedelta(days=20, minutes=5), True),
        ]
        for i, (text, at, group) in enumerate(turns):
            await engine.handle(message(text, at, str(i), group=group), RecordingResponder())
    dm_prompt, group_prompt = provider.prompts[-2], provider.prompts[-1]
    assert any("12 de outubro em Paraty" in m.content for m in dm_prompt)
    # In the group, the private messages about Júlia stay out.
    assert not any("Paraty" in m.content or "minha irmã Júlia" in m.content for m in group_prompt)
