"""The memory graph on a real SQLite file with the hashing embedder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.embeddings import HashingEmbedder
from core.memory.connections import similarity_threshold
from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage
from core.storage.owner_words import query_terms
from core.storage.sqlite_graph import EmbeddingModelMismatch

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
OWNER = "telegram:42"

# Earlier, unrelated history so that recall has to choose (limit 3 of 14 nodes).
DISTRACTORS = [
    "Comprei um violão novo ontem",
    "Meu time ganhou o campeonato de futebol",
    "Estou aprendendo a programar em Python",
    "Fui ao cinema ver um filme de terror",
    "Minha irmã vai casar em junho",
    "Adoro cozinhar lasanha no domingo",
    "O trânsito hoje estava horrível",
    "Quero viajar para o Japão nas férias",
    "Meu gato derrubou o vaso da sala",
    "Comecei a ler um livro de ficção científica",
    "Choveu o dia inteiro aqui",
]


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    store = SQLiteStorage(tmp_path / "akira.db")
    async with store:
        for owner in (OWNER, "telegram:7", "discord:9"):
            await store.users.ensure(owner)
        yield store


@pytest.fixture
def memory(storage: SQLiteStorage) -> GraphMemory:
    return GraphMemory(storage, HashingEmbedder())


def node(
    node_id: str,
    content: str,
    at: datetime,
    *,
    owner: str = OWNER,
    scope: str = "dm",
    chat_id: str = "dm-42",
    message_id: str | None = None,
    reply_to: str | None = None,
    kind: NodeType = NodeType.USER_MESSAGE,
) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=content,
        type=kind,
        timestamp=at,
        chat_id=chat_id,
        scope=scope,
        chat_kind="dm" if scope == "dm" else "group",
        platform_message_id=message_id,
        reply_to=reply_to,
    )


async def store_distractors(memory: GraphMemory, owner: str = OWNER) -> None:
    for i, text in enumerate(DISTRACTORS):
        # One a day, weeks before the scenario: no follow-up links into it.
        await memory.store(node(f"d{i}-{owner}", text, T0 - timedelta(days=60 - i), owner=owner))


async def test_headache_followed_up_thirty_days_later(memory: GraphMemory) -> None:
    await store_distractors(memory)
    first = node("n1", "Tenho dor de cabeça", T0)
    second = node("n2", "Tomo remédio?", T0 + timedelta(minutes=5))
    third = node("n3", "Ficou melhor?", T0 + timedelta(days=30))
    for n in (first, second, third):
        assert await memory.store(n)

    recall = await memory.recall(
        OWNER, third.content, scopes=None, limit=3, exclude_ids=[third.id], at=third.timestamp
    )
    found = {r.node.id: r for r in recall.nodes}
    assert "n1" in found and "n2" in found
    assert third.id not in found
    # The path: "Ficou melhor?" resumes the last conversation, the headache and the
    # question that followed it up, linked both ways by their follow-up edge.
    assert found["n1"].reason == "via follow_up from n2" or found["n1"].reason == "direct match"
    assert found["n2"].via_relation in (None, "resumes", "follow_up")


async def test_tags_of_the_seed_messages(memory: GraphMemory) -> None:
    headache = node("n1", "Tenho dor de cabeça", T0)
    await memory.store(headache)
    assert {"health", "pain"} <= set(headache.tags)
    assert "cabeca" in headache.tags  # folded
    assert 2 <= len(headache.tags) <= 5
    assert not {"tenho", "de"} & set(headache.tags)


async def test_social_anxiety_found_from_a_later_message(memory: GraphMemory) -> None:
    await store_distractors(memory)
    anxiety = node("a1", "Tenho ansiedade social", T0)
    await memory.store(anxiety)
    later = node("a2", "Fico nervoso em grupos", T0 + timedelta(days=3))
    await memory.store(later)
    shared = [c for c in later.connections if c.relation_type == "shared_tags"]
    assert [c.node_id for c in shared] == ["a1"]
    assert shared[0].strength == pytest.approx(2 / 4)  # mental_health + social of 4 tags

    results = await memory.search_with_connections(
        "Fico nervoso em grupos", OWNER, limit=3, exclude_ids=["a2"]
    )
    assert results[0].node.id == "a1"


async def test_full_text_search_folds_accents(memory: GraphMemory, storage: SQLiteStorage) -> None:
    await memory.store(node("n1", "Tenho dor de cabeça", T0))
    await memory.store(node("n2", "Comprei pão", T0 + timedelta(hours=5)))
    hits = await storage.graph.text_search(OWNER, "cabeca", k=5)
    assert [h[0] for h in hits] == ["n1"]
    hits = await storage.graph.text_search(OWNER, "PAO", k=5)
    assert [h[0] for h in hits] == ["n2"]
    # Another owner's rows never match, even on the same word.
    assert await storage.graph.text_search("telegram:7", "cabeça", k=5) == []


async def test_each_kind_of_connection_with_its_strength(memory: GraphMemory) -> None:
    await memory.store(node("m1", "Tenho dor de cabeça forte", T0, message_id="100"))
    reply = node(
        "m2",
        "Sinto muito, tome água",
        T0 + timedelta(minutes=1),
        reply_to="100",
        kind=NodeType.AKIRA_RESPONSE,
    )
    await memory.store(reply)
    kinds = {(c.relation_type, c.node_id): c.strength for c in reply.connections}
    assert kinds[("reply_to", "m1")] == 0.9
    assert kinds[("follow_up", "m1")] == 0.95

    # Three hours later: no follow-up, the previous node is linked as resumed instead.
    later = node("m3", "Ainda tenho dor de cabeça forte hoje", T0 + timedelta(hours=3))
    await memory.store(later)
    kinds = {(c.relation_type, c.node_id): c.strength for c in later.connections}
    assert ("follow_up", "m2") not in kinds
    assert kinds[("resumes", "m2")] == 0.5
    # Shared tags: common / max(len): m1 has health, pain, cabeca, forte, dor.
    m1 = await memory.storage.nodes.get(OWNER, "m1")
    assert m1 is not None
    common = len(set(m1.tags) & set(later.tags))
    assert kinds[("shared_tags", "m1")] == pytest.approx(
        round(common / max(len(m1.tags), len(later.tags)), 4)
    )
    # Similar: the cosine, above the model's calibrated threshold.
    assert kinds[("similar", "m1")] >= similarity_threshold("hashing-256")
    # Stored and exported as connections of the owner.
    exported = await memory.storage.export_owner(OWNER)
    assert {
        "from": "m2",
        "to": "m1",
        "relation_type": "reply_to",
        "strength": 0.9,
        "explanation": "answers message 100",
    } in exported["connections"]


async def test_unrelated_message_gets_no_similar_or_tag_links(memory: GraphMemory) -> None:
    await memory.store(node("x1", "Tenho dor de cabeça", T0))
    other = node("x2", "Meu gato derrubou o vaso", T0 + timedelta(days=2))
    await memory.store(other)
    assert {c.relation_type for c in other.connections} == {"resumes"}


async def test_search_reasons_say_direct_or_via(memory: GraphMemory) -> None:
    await store_distractors(memory)
    await memory.store(node("b1", "Minha avó está no hospital", T0))
    await memory.store(node("b2", "Ela caiu da escada ontem à noite", T0 + timedelta(minutes=2)))
    results = await memory.search_with_connections("avó hospital", OWNER, depth=2, limit=5)
    by_id = {r.node.id: r for r in results}
    assert by_id["b1"].reason == "direct match" and by_id["b1"].depth == 0
    assert by_id["b1"].score > by_id["b2"].score
    # b2 shares no word with the query: it comes through its follow-up edge.
    assert by_id["b2"].reason in ("via follow_up from b1", "direct match")
    via_only = await memory.search_with_connections("avó hospital", OWNER, depth=2, limit=20)
    assert any(r.reason.startswith("via ") and r.via_node_id and r.depth >= 1 for r in via_only)
    for r in via_only:
        if r.reason.startswith("via "):
            assert r.reason == f"via {r.via_relation} from {r.via_node_id}"
    # depth 0: seeds only.
    seeds = await memory.search_with_connections("avó hospital", OWNER, depth=0, limit=20)
    assert all(r.reason == "direct match" for r in seeds)


async def test_get_context_walks_the_neighbourhood(memory: GraphMemory) -> None:
    await memory.store(node("c1", "Tenho dor de cabeça", T0))
    await memory.store(node("c2", "Tomo remédio?", T0 + timedelta(minutes=5)))
    await memory.store(node("c3", "Vou dormir cedo", T0 + timedelta(minutes=10)))
    context = await memory.get_context("c1", OWNER, depth=2)
    assert [r.node.id for r in context][:2] == ["c1", "c2"]
    assert context[1].reason == "via follow_up from c1"
    assert any(r.node.id == "c3" and r.depth == 2 for r in context)
    assert await memory.get_context("c1", "telegram:7", depth=2) == []


async def test_group_reply_never_uses_private_nodes(memory: GraphMemory) -> None:
    await memory.store(node("p1", "Segredo: tenho dívidas enormes no banco", T0))
    await memory.store(
        node(
            "g1",
            "No grupo: falei das dívidas do clube",
            T0 + timedelta(minutes=1),
            scope="guild-1",
            chat_id="g",
        )
    )
    # The group message follows up on the private one (same person, 1 min later)...
    results = await memory.search_with_connections(
        "dívidas banco", OWNER, scopes=["guild-1"], limit=10
    )
    assert [r.node.id for r in results] == ["g1"]
    recall = await memory.recall(OWNER, "dívidas", scopes=["guild-1"], limit=10)
    assert {r.node.scope for r in recall.nodes} == {"guild-1"}
    assert await memory.recall(OWNER, "dívidas", scopes=[], limit=10) == type(recall)()
    everything = await memory.recall(OWNER, "dívidas banco", scopes=None, limit=10)
    assert {r.node.id for r in everything.nodes} == {"p1", "g1"}


async def test_no_result_ever_belongs_to_another_user(memory: GraphMemory) -> None:
    await memory.store(node("u1", "Tenho dor de cabeça", T0, owner="telegram:7"))
    await memory.store(node("u2", "Tenho dor de cabeça", T0, owner=OWNER))
    results = await memory.search_with_connections("dor de cabeça", OWNER, limit=10)
    assert [r.node.id for r in results] == ["u2"]
    assert all(c.node_id != "u1" for c in (await memory.storage.nodes.get(OWNER, "u2") and []))


async def test_exclude_ids_and_time_bound(memory: GraphMemory) -> None:
    await memory.store(node("e1", "Tenho dor de cabeça", T0))
    await memory.store(node("e2", "Dor de cabeça de novo", T0 + timedelta(days=1)))
    res = await memory.recall(OWNER, "dor de cabeça", scopes=None, exclude_ids=["e1"])
    assert [r.node.id for r in res.nodes] == ["e2"]
    res = await memory.recall(OWNER, "dor de cabeça", scopes=None, at=T0 + timedelta(hours=1))
    assert [r.node.id for r in res.nodes] == ["e1"]


async def test_duplicates_are_stored_once(memory: GraphMemory, storage: SQLiteStorage) -> None:
    first = node("s1", "Oi, tudo bem?", T0)
    first.source_id = "telegram:1:5"
    dup = node("s2", "Oi, tudo bem?", T0)
    dup.source_id = "telegram:1:5"
    assert await memory.store(first) is True
    assert await memory.store(dup) is False
    assert await storage.graph.node_count_with_vectors(OWNER) == 1
    assert [r.node.id for r in await memory.search_with_connections("tudo bem", OWNER)] == ["s1"]


async def test_store_many_matches_store(memory: GraphMemory, storage: SQLiteStorage) -> None:
    nodes = [node(f"k{i}", text, T0 + timedelta(minutes=i)) for i, text in enumerate(DISTRACTORS)]
    assert await memory.store_many(nodes) == [True] * len(nodes)
    assert await storage.graph.node_count_with_vectors(OWNER) == len(DISTRACTORS)
    assert nodes[3].connections and nodes[3].connections[0].relation_type == "follow_up"
    assert nodes[3].connections[0].node_id == "k2"
    results = await memory.search_with_connections("gato vaso", OWNER, limit=1)
    assert results[0].node.id == "k8"


async def test_vectors_are_stored_once_with_model_and_dim(
    memory: GraphMemory, storage: SQLiteStorage
) -> None:
    await memory.store(node("v1", "Tenho dor de cabeça", T0))
    row = await storage.db.fetchone(
        "SELECT owner, model, dim, vector FROM graph_embeddings WHERE node_id = 'v1'"
    )
    assert row is not None
    assert (row["owner"], row["model"], row["dim"]) == (OWNER, "hashing-256", 256)
    vector = np.frombuffer(row["vector"], dtype=np.float32)
    expected = HashingEmbedder().embed_passage("Tenho dor de cabeça")
    assert np.allclose(vector, expected, atol=1e-6)


async def test_refuses_to_mix_embedding_models(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    async with SQLiteStorage(path) as storage:
        await storage.users.ensure(OWNER)
        await GraphMemory(storage, HashingEmbedder(256)).store(
            node("z1", "Tenho dor de cabeça", T0)
        )
    async with SQLiteStorage(path) as storage:
        other = GraphMemory(storage, HashingEmbedder(128))
        with pytest.raises(EmbeddingModelMismatch, match=r"hashing-256.*hashing-128"):
            await other.store(node("z2", "Tomo remédio?", T0 + timedelta(minutes=1)))
        with pytest.raises(EmbeddingModelMismatch):
            await other.recall(OWNER, "dor", scopes=None)
        assert await storage.nodes.count(OWNER) == 1
        # The explicit way out: re-embed everything with the new model.
        assert await other.reembed() == 1
        row = await storage.db.fetchone(
            "SELECT model, dim FROM graph_embeddings WHERE node_id = 'z1'"
        )
        assert row is not None and (row[0], row[1]) == ("hashing-128", 128)
        assert await other.store(node("z2", "Tomo remédio?", T0 + timedelta(minutes=1)))
        found = await other.search_with_connections("cabeça", OWNER)
        assert found[0].node.id == "z1"


async def test_forget_me_removes_graph_rows(memory: GraphMemory, storage: SQLiteStorage) -> None:
    await memory.store(node("f1", "Tenho dor de cabeça", T0))
    await memory.store(node("f2", "Tomo remédio?", T0 + timedelta(minutes=5)))
    await memory.store(node("o1", "Tenho dor de cabeça", T0, owner="telegram:7"))
    await memory.search_with_connections("dor", OWNER)  # warm the vector cache
    removed = await storage.forget_owner(OWNER)
    assert removed["connections"] > 0
    for table in ("graph_embeddings", "graph_connections", "graph_tags"):
        row = await storage.db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE owner = ?", (OWNER,))
        assert row is not None and row[0] == 0, table
    assert await storage.graph.text_search(OWNER, "cabeça", k=5) == []
    assert await memory.search_with_connections("dor de cabeça", OWNER) == []
    # The other person keeps everything.
    assert [
        r.node.id for r in await memory.search_with_connections("dor de cabeça", "telegram:7")
    ] == ["o1"]
    for owner, expected in ((OWNER, 0), ("telegram:7", 1)):
        fts = await storage.db.fetchone(
            "SELECT COUNT(*) FROM nodes_words WHERE nodes_words MATCH ?",
            (query_terms(owner, "cabeça")[0],),
        )
        assert fts is not None and fts[0] == expected, owner


async def test_vector_cache_stays_within_its_bound(storage: SQLiteStorage) -> None:
    storage.graph.max_cached_rows = 5
    memory = GraphMemory(storage, HashingEmbedder())
    for owner in (OWNER, "telegram:7", "discord:9"):
        for i, word in enumerate(("azul", "verde", "amarelo")):
            await memory.store(
                node(f"{owner}-{i}", f"mensagem {word}", T0 + timedelta(hours=i), owner=owner)
            )
        await memory.search_with_connections("mensagem", owner)
    info = storage.graph.cache_info()
    assert info["rows"] <= 5 and info["owners"] == 1
    # An evicted owner is reloaded from the database, results unchanged.
    found = await memory.search_with_connections("amarelo", OWNER, limit=1)
    assert found[0].node.id == f"{OWNER}-2"


def _edge_set(edges: list[Any]) -> set[tuple[str, str, str, float, str]]:
    return {(e.from_id, e.to_id, e.relation_type, e.strength, e.explanation) for e in edges}


async def test_walk_from_the_cache_matches_the_database(
    memory: GraphMemory, storage: SQLiteStorage
) -> None:
    """The recall walk reads edges and places from the owner's cache; they must be the
    ones SQLite holds, including edges added after the cache was loaded."""
    await store_distractors(memory)
    graph = storage.graph
    await memory.search_with_connections("violão", OWNER)  # loads the owner's cache
    assert graph.cache_info()["edges"] > 0
    texts = ["Tenho ansiedade social", "Fico nervoso em grupos", "Comprei outro violão"]
    for i, text in enumerate(texts):  # stored while cached: appended to the cache
        at = T0 + timedelta(minutes=10 * i)
        await memory.store(node(f"n{i}", text, at, scope="dm" if i else "server-1"))
    await memory.store(node("o1", "Fico nervoso em grupos", T0, owner="telegram:7"))
    ids = [f"d{i}-{OWNER}" for i in range(0, 11, 3)] + ["n0", "n1", "n2", "o1"]
    cached_edges, cached_places = await graph.neighbours(OWNER, ids)
    graph._drop()  # the same question to SQLite
    sql_edges, sql_places = await graph.neighbours(OWNER, ids)
    assert _edge_set(cached_edges) == _edge_set(sql_edges)
    assert any(e.from_id == "n2" for e in sql_edges)  # the later nodes are in it
    assert cached_places == sql_places
    assert "o1" not in sql_places and all(e.from_id != "o1" for e in sql_edges)


async def test_node_stored_while_the_cache_loads_is_not_lost(
    memory: GraphMemory, storage: SQLiteStorage
) -> None:
    """The cache load reads a snapshot; a node committed before the load returns must
    not be missing from the cache afterwards."""
    graph = storage.graph
    await memory.store(node("a1", "Tenho dor de cabeça", T0))
    graph._drop()
    database_run = storage.db.run
    read_done, go_on = asyncio.Event(), asyncio.Event()

    async def run_held_after_reading(fn: Any, *, write: bool = True, lookup: bool = False) -> Any:
        result = await database_run(fn, write=write, lookup=lookup)
        if not write and not lookup and not read_done.is_set():  # the cache load
            read_done.set()
            await go_on.wait()
        return result

    storage.db.run = run_held_after_reading  # type: ignore[method-assign]
    try:
        search = asyncio.create_task(
            graph.vector_search(OWNER, np.ones(memory.embedder.dim, np.float32), k=5)
        )
        await read_done.wait()  # the load has read its snapshot and waits
        await memory.store(node("a2", "Tomo remédio para dor de cabeça?", T0 + timedelta(1)))
        go_on.set()
        await search
    finally:
        storage.db.run = database_run  # type: ignore[method-assign]
    found = await memory.search_with_connections("remédio", OWNER)
    assert "a2" in [r.node.id for r in found]
    edges, _ = await graph.neighbours(OWNER, ["a2"])
    assert any(e.from_id == "a2" and e.to_id == "a1" for e in edges)


async def test_full_text_search_time_bound_is_exact(
    memory: GraphMemory, storage: SQLiteStorage
) -> None:
    """A node said at the very moment asked about is in; one a microsecond later is not
    (the time is compared on the stored value, not on a printed one)."""
    at = datetime(2024, 3, 1, 9, 0, 0, 123457, tzinfo=UTC)
    await memory.store(node("t1", "Meu violino antigo", at))
    await memory.store(node("t2", "Meu violino novo", at + timedelta(microseconds=1)))
    found = await storage.graph.text_search(OWNER, "violino", k=5, at=at)
    assert [node_id for node_id, _ in found] == ["t1"]
    later = await storage.graph.text_search(OWNER, "violino", k=5)
    assert {node_id for node_id, _ in later} == {"t1", "t2"}


@pytest.mark.parametrize("store", ["store", "store_many"])
async def test_a_reply_is_embedded_alone_and_a_message_with_its_earlier_turn(
    storage: SQLiteStorage, store: str
) -> None:
    """A reply's stored vector is its own text's passage (the message it answers is a
    node of its own); a person's message keeps the turn before it as context."""
    embedder = HashingEmbedder()
    memory = GraphMemory(storage, embedder)
    turns = [
        node("q", "Minha irmã Ana chega de Lisboa na semana que vem", T0),
        node(
            "a",
            "Que legal! Vocês vão passear juntas?",
            T0 + timedelta(seconds=5),
            kind=NodeType.AKIRA_RESPONSE,
        ),
        node("r", "Sim, vamos ao museu", T0 + timedelta(seconds=30)),
    ]
    if store == "store":
        for turn in turns:
            assert await memory.store(turn)
    else:
        assert await memory.store_many(turns) == [True, True, True]
    stored = await memory.graph.vectors(OWNER, ["q", "a", "r"])
    alone = embedder.embed_passages([t.content for t in turns])
    with_earlier = embedder.embed_passages([f"{turns[1].content}\n{turns[2].content}"])[0]
    np.testing.assert_allclose(stored["a"], alone[1], atol=1e-6)
    np.testing.assert_allclose(stored["r"], with_earlier, atol=1e-6)
    assert not np.allclose(stored["r"], alone[2], atol=1e-3)
