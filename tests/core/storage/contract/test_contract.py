"""The storage contract: the same tests on every backend (SQLite file, PostgreSQL).
What a caller may rely on whatever the backend: owner isolation, duplicates refused,
order, export and forget-me, the memory rules, changes seen by other processes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from core.storage import EVERY_OWNER, Connection, EmbeddingModelMismatch, Storage
from core.storage.memory_records import Source, StoreOutcome
from core.storage.records import MemoryNode, NodeType
from tests.core.storage.contract.conftest import Opener

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
A, B = "telegram:1", "telegram:2"
MODEL = "test-model"


def node(
    node_id: str,
    owner: str = A,
    content: str | None = None,
    *,
    minutes: float = 0,
    chat_id: str = "c1",
    scope: str = "dm",
    tags: list[str] | None = None,
    source_id: str | None = None,
    message_id: str | None = None,
    kind: NodeType = NodeType.USER_MESSAGE,
) -> MemoryNode:
    return MemoryNode(
        id=node_id,
        owner=owner,
        content=f"turn {node_id}" if content is None else content,
        type=kind,
        timestamp=T0 + timedelta(minutes=minutes),
        chat_id=chat_id,
        scope=scope,
        tags=tags or [],
        source_id=source_id,
        platform_message_id=message_id,
    )


def unit(seed: int, dim: int = 8) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


# -- users ---------------------------------------------------------------------------------


async def test_users_profile_changes_and_language(storage: Storage) -> None:
    user = await storage.users.ensure(A, display_name="Ana", seen_at=T0)
    assert (user.platform, user.external_id, user.display_name) == ("telegram", "1", "Ana")
    await storage.users.update_profile(A, mood="feliz")
    assert await storage.users.change_profile(A, "count", lambda v: (v or 0) + 1) == 1
    assert await storage.users.change_profile(A, "count", lambda v: (v or 0) + 1) == 2
    await storage.users.set_language(A, "en")
    await storage.users.settle()
    got = await storage.users.get(A)
    assert got is not None
    assert got.profile == {"mood": "feliz", "count": 2}
    assert got.language == "en"
    assert (await storage.users.get(B)).profile == {}  # type: ignore[union-attr]
    assert await storage.users.get("telegram:404") is None
    assert await storage.users.count() == 3


# -- nodes ---------------------------------------------------------------------------------


async def test_nodes_are_kept_per_owner_in_order(storage: Storage) -> None:
    for i in range(5):
        assert await storage.nodes.add(node(f"a{i}", minutes=i, scope="dm" if i % 2 else "g1"))
    await storage.nodes.add(node("b0", B, "someone else's"))
    recent = await storage.nodes.recent(A, limit=3)
    assert [n.id for n in recent] == ["a2", "a3", "a4"]  # latest, oldest first
    assert [n.id for n in await storage.nodes.recent(A, scopes=["dm"])] == ["a1", "a3"]
    assert await storage.nodes.recent(A, scopes=[]) == []
    before = await storage.nodes.recent(A, before=T0 + timedelta(minutes=2))
    assert [n.id for n in before] == ["a0", "a1"]
    assert await storage.nodes.get(A, "b0") is None  # another owner's node
    assert [n.id for n in await storage.nodes.get_many(A, ["a3", "b0", "a1"])] == ["a3", "a1"]
    assert await storage.nodes.count(A) == 5
    assert await storage.nodes.count() == 6


async def test_duplicates_are_refused_and_sources_known(storage: Storage) -> None:
    assert await storage.nodes.add(node("x1", source_id="imp-1"))
    assert not await storage.nodes.add(node("x2", source_id="imp-1"))  # same owner + source
    assert await storage.nodes.add(node("x3", B, source_id="imp-1"))  # another owner's
    assert await storage.nodes.known_sources(A, ["imp-1", "imp-2"]) == {"imp-1"}
    assert await storage.nodes.known_sources(B, ["imp-1"]) == {"imp-1"}


async def test_emotion_and_platform_message(storage: Storage) -> None:
    await storage.nodes.add(node("m1", message_id="99"))
    await storage.nodes.set_emotion(A, "m1", "feliz", 0.9)
    await storage.nodes.settle()
    found = await storage.nodes.by_platform_message(A, "99")
    assert found is not None and found.id == "m1"
    assert (found.emotion, found.emotion_score) == ("feliz", pytest.approx(0.9))
    assert await storage.nodes.by_platform_message(B, "99") is None


# -- graph ---------------------------------------------------------------------------------


async def test_graph_vectors_edges_and_isolation(storage: Storage) -> None:
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    assert await graph.add_node(node("g1", tags=["music"]), vector=unit(1), model=MODEL)
    assert await graph.add_node(
        node("g2", minutes=1, tags=["music", "violin"]),
        vector=unit(2),
        model=MODEL,
        connections=[Connection("g1", "follow_up", 0.8, "next turn")],
    )
    assert await graph.add_node(node("h1", B, minutes=2), vector=unit(3), model=MODEL)
    # An edge to another owner's node is never stored.
    assert await graph.add_node(
        node("g3", minutes=3),
        vector=unit(4),
        model=MODEL,
        connections=[Connection("h1", "similar", 0.9), Connection("g2", "similar", 0.5)],
    )
    assert not await graph.add_node(node("g3", minutes=3), vector=unit(4), model=MODEL)
    hits = await graph.vector_search(A, unit(2), k=10)
    assert hits[0][0] == "g2" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert {h for h, _ in hits} == {"g1", "g2", "g3"}
    excluded = await graph.vector_search(A, unit(2), k=10, exclude=["g2"])
    assert "g2" not in {h for h, _ in excluded} and len(excluded) == 2
    assert await graph.vector_search(B, unit(2), k=10) == [
        ("h1", pytest.approx(float(unit(3) @ unit(2)), abs=1e-5))
    ]
    edges = await graph.edges(A, ["g2"])
    assert {(e.from_id, e.to_id, e.relation_type) for e in edges} == {
        ("g2", "g1", "follow_up"),
        ("g3", "g2", "similar"),
    }
    assert [c.node_id for c in await graph.connections_of(A, "g3")] == ["g2"]
    edges, places = await graph.neighbours(A, ["g1"])
    assert places["g2"].scope == "dm"
    assert await graph.edges(B, ["g2"]) == []
    assert await graph.tag_candidates(A, ["music", "violin"]) == {"g1": (1, 1), "g2": (2, 2)}
    assert await graph.tag_candidates(B, ["music"]) == {}
    assert await graph.tags_and_entities(A, ["music", "violin", "music"], ["nobody"]) == (
        {"g1": (1, 1), "g2": (2, 2)},
        {},
    )
    assert await graph.tags_and_entities(A, ["violin"], [], per_tag=1) == ({"g2": (1, 2)}, {})
    latest = await graph.latest_node(A, at=T0 + timedelta(minutes=2))
    assert latest is not None and latest[0] == "g2"
    prev = await graph.previous_in_chat(A, "c1", at=T0 + timedelta(minutes=3), since=T0, limit=2)
    assert [n.id for n in prev] == ["g2", "g3"]
    assert set(await graph.get_nodes(A, ["g1", "h1"])) == {"g1"}
    assert await graph.node_count_with_vectors(A) == 3
    with pytest.raises(EmbeddingModelMismatch):
        await graph.check_model("another-model", 8)


async def test_second_vectors_per_owner_model_scope_and_time_and_forgotten(
    storage: Storage,
) -> None:
    """A second encoder's vector a node: stored only for the owner's own nodes, searched
    per owner and model (another model's never mixed in), by scope and time, and gone
    with the person."""
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    for node_id, owner, minutes, scope in (
        ("s1", A, 0, "dm"),
        ("s2", A, 1, "group-1"),
        ("s3", A, 2, "dm"),
        ("s4", B, 3, "dm"),
        ("s5", A, 4, "dm"),  # no second vector: old data
    ):
        assert await graph.add_node(
            node(node_id, owner, minutes=minutes, scope=scope, chat_id=scope),
            vector=unit(minutes),
            model=MODEL,
        )
    # Nothing yet: an empty list, not an error.
    assert await graph.second_search(A, "use", unit(10, 12), k=5) == []
    stored = await graph.add_second_vectors(
        "use",
        [
            ("s1", A, unit(10, 12)),
            ("s2", A, unit(11, 12)),
            ("s3", A, unit(12, 12)),
            ("s4", B, unit(13, 12)),
            ("s4", A, unit(14, 12)),  # another person's node: left out
            ("nope", A, unit(15, 12)),  # no such node: left out
        ],
    )
    assert stored == 4
    hits = await graph.second_search(A, "use", unit(11, 12), k=5)
    assert hits[0][0] == "s2" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert {h for h, _ in hits} == {"s1", "s2", "s3"}
    assert [h for h, _ in await graph.second_search(B, "use", unit(11, 12), k=5)] == ["s4"]
    assert await graph.second_search(A, "other", unit(11, 12), k=5) == []
    # A query of another dimension finds nothing (the first vectors' 8, say).
    assert await graph.second_search(A, "use", unit(11), k=5) == []
    in_dm = await graph.second_search(A, "use", unit(11, 12), k=5, scopes=["dm"])
    assert {h for h, _ in in_dm} == {"s1", "s3"}
    early = await graph.second_search(A, "use", unit(12, 12), k=5, at=T0 + timedelta(minutes=1))
    assert {h for h, _ in early} == {"s1", "s2"}
    excluded = await graph.second_search(A, "use", unit(11, 12), k=5, exclude=["s2"])
    assert {h for h, _ in excluded} == {"s1", "s3"}
    # Bounded to the newest rows (by time): the best match s1 is older than the last two.
    newest = await graph.second_search(A, "use", unit(10, 12), k=5, newest=2)
    assert {h for h, _ in newest} == {"s2", "s3"}
    # Written after the first search (the kept matrix grows), and read back by id.
    assert await graph.add_second_vectors("use", [("s5", A, unit(16, 12))]) == 1
    hits = await graph.second_search(A, "use", unit(16, 12), k=1)
    assert hits[0][0] == "s5"
    found = await graph.second_vectors(A, "use", ["s1", "s4", "s5", "nope"])
    assert set(found) == {"s1", "s5"}
    assert np.allclose(found["s1"], unit(10, 12), atol=1e-6)
    # A second model of its own, beside: never mixed in.
    assert await graph.add_second_vectors("other", [("s1", A, unit(20, 4))]) == 1
    assert [h for h, _ in await graph.second_search(A, "other", unit(20, 4), k=5)] == ["s1"]
    assert len(await graph.second_search(A, "use", unit(11, 12), k=9)) == 4
    await storage.forget_owner(A)
    assert await graph.second_search(A, "use", unit(11, 12), k=5) == []
    assert await graph.second_vectors(A, "use", ["s1"]) == {}
    assert [h for h, _ in await graph.second_search(B, "use", unit(11, 12), k=5)] == ["s4"]


async def test_second_vectors_from_another_process_are_found(
    opener: Opener, storage: Storage
) -> None:
    """An import in another process stores second vectors (announced): this process's
    kept matrix of the person is dropped and read again."""
    await storage.graph.check_model(MODEL, 8)
    await storage.graph.add_node(node("q1"), vector=unit(1), model=MODEL)
    await storage.graph.add_second_vectors("use", [("q1", A, unit(30, 12))])
    assert [h for h, _ in await storage.graph.second_search(A, "use", unit(31, 12), k=5)] == ["q1"]
    other = opener()
    async with other:
        await other.graph.add_node(
            node("q2", minutes=1), vector=unit(2), model=MODEL, announce=True
        )
        await other.graph.add_second_vectors("use", [("q2", A, unit(31, 12))], announce=True)
    await eventually_changed(storage)
    hits = await storage.graph.second_search(A, "use", unit(31, 12), k=5)
    assert hits[0][0] == "q2" and len(hits) == 2


async def test_entity_postings_by_owner_scope_and_time_and_forgotten(storage: Storage) -> None:
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    for node_id, owner, minutes, scope, named in (
        ("e1", A, 0, "dm", ["julia", "rel:sister"]),
        ("e2", A, 1, "group-1", ["julia"]),
        ("e3", A, 2, "dm", ["julia", "floripa"]),
        ("e4", B, 3, "dm", ["julia"]),
    ):
        stored = await graph.add_node(
            node(node_id, owner, minutes=minutes, scope=scope, chat_id=scope),
            vector=unit(minutes),
            model=MODEL,
            entities=named,
        )
        assert stored
    # A duplicate writes nothing, its entities included.
    assert not await graph.add_node(node("e3", minutes=2), vector=None, model=MODEL, entities=["x"])
    assert await graph.entity_mentions(A, ["julia", "rel:sister", "nobody"]) == {
        "julia": ["e3", "e2", "e1"],
        "rel:sister": ["e1"],
    }
    assert await graph.entity_mentions(A, ["julia"], per_entity=2) == {"julia": ["e3", "e2"]}
    # Another scope's mentions stay out; so do later ones.
    assert await graph.entity_mentions(A, ["julia"], scopes=["dm"]) == {"julia": ["e3", "e1"]}
    assert await graph.entity_mentions(A, ["julia"], scopes=[]) == {}
    before = T0 + timedelta(minutes=1)
    assert await graph.entity_mentions(A, ["julia"], at=before) == {"julia": ["e2", "e1"]}
    assert await graph.entity_mentions(B, ["julia", "floripa"]) == {"julia": ["e4"]}
    # Asked together with tag postings, the same answers (one statement on PostgreSQL).
    assert await graph.tags_and_entities(
        A, ["nothing"], ["julia", "julia", "nobody", "rel:sister"], per_entity=2, at=before
    ) == ({}, {"julia": ["e2", "e1"], "rel:sister": ["e1"]})
    assert await graph.tags_and_entities(A, [], []) == ({}, {})
    assert await graph.tags_and_entities(A, [], ["julia"], per_entity=0) == ({}, {})
    # A forgotten person's mentions go, and only theirs.
    await storage.forget_owner(A)
    assert await graph.entity_mentions(A, ["julia", "rel:sister"]) == {}
    assert await graph.entity_mentions(B, ["julia"]) == {"julia": ["e4"]}


async def test_entity_mentions_while_serving_the_person(opener: Opener, storage: Storage) -> None:
    """Recall asks while serving the person (PostgreSQL answers from the postings it
    keeps of them): the same answers by scope, time and count, this process's new
    mentions and another process's included."""
    graph = storage.graph
    await graph.check_model(MODEL, 8)
    for node_id, minutes, scope in (("e1", 0, "dm"), ("e2", 1, "group-1"), ("e3", 2, "dm")):
        await graph.add_node(
            node(node_id, minutes=minutes, scope=scope, chat_id=scope),
            vector=unit(minutes),
            model=MODEL,
            entities=["julia"],
        )
    before = T0 + timedelta(minutes=1)
    async with storage.serving(A):
        assert await graph.entity_mentions(A, ["julia", "nobody"]) == {"julia": ["e3", "e2", "e1"]}
        assert await graph.entity_mentions(A, ["julia"], scopes=["dm"]) == {"julia": ["e3", "e1"]}
        assert await graph.entity_mentions(A, ["julia"], scopes=["dm"], per_entity=1) == {
            "julia": ["e3"]
        }
        assert await graph.entity_mentions(A, ["julia"], scopes=["dm"], at=before) == {
            "julia": ["e1"]
        }
        assert await graph.entity_mentions(A, ["julia"], scopes=["elsewhere"]) == {}
        await graph.add_node(
            node("e5", minutes=3, scope="group-1", chat_id="group-1"),
            vector=unit(3),
            model=MODEL,
            entities=["julia", "floripa"],
        )
        assert await graph.entity_mentions(A, ["julia", "floripa"], scopes=["group-1"]) == {
            "julia": ["e5", "e2"],
            "floripa": ["e5"],
        }
    other = opener()
    async with other, other.serving(A):
        await other.graph.add_node(
            node("e6", minutes=4), vector=unit(4), model=MODEL, entities=["julia"]
        )
    async with storage.serving(A):
        assert await graph.entity_mentions(A, ["julia"], scopes=["dm"], per_entity=2) == {
            "julia": ["e6", "e3"]
        }


async def test_full_text_folds_accents_and_stays_with_its_owner(storage: Storage) -> None:
    graph = storage.graph
    await graph.add_node(
        node("t1", content="Dor de cabeça depois do café"), vector=None, model=MODEL
    )
    await graph.add_node(
        node("t2", content="I was researching violins", minutes=1), vector=None, model=MODEL
    )
    await graph.add_node(node("t3", B, content="minha cabeça"), vector=None, model=MODEL)
    assert [h for h, _ in await graph.text_search(A, "cabeca", k=5)] == ["t1"]
    assert [h for h, _ in await graph.text_search(A, "CAFÉ", k=5)] == ["t1"]
    assert [h for h, _ in await graph.text_search(A, "violin", k=5)] == ["t2"]
    assert [h for h, _ in await graph.text_search(B, "cabeça", k=5)] == ["t3"]
    assert await graph.text_search(A, "cabeca", k=5, exclude=["t1"]) == []
    assert await graph.text_search(A, "cabeca", k=5, scopes=["group"]) == []
    assert all(score > 0 for _, score in await graph.text_search(A, "cabeca café", k=5))


# -- structured memories -------------------------------------------------------------------


async def test_memory_rules_hold(storage: Storage) -> None:
    memories = storage.memories
    stated, outcome = await memories.upsert(A, "identity", "Name", "Ana", at=T0)
    assert outcome is StoreOutcome.CREATED and stated.verified and stated.key == "name"
    kept, outcome = await memories.upsert(A, "identity", "name", "Bob", source=Source.AGENT)
    assert outcome is StoreOutcome.KEPT and kept.content == "Ana"
    _, outcome = await memories.upsert(A, "identity", "name", "Ana", at=T0)
    assert outcome is StoreOutcome.UNCHANGED
    updated, outcome = await memories.upsert(
        A, "identity", "name", "Ana Maria", tags=["Nome"], at=T0 + timedelta(days=1)
    )
    assert outcome is StoreOutcome.UPDATED and updated.version == 2 and updated.id == stated.id
    history = await memories.history(A, stated.id)
    assert [(v.version, v.content, v.change) for v in history] == [(1, "Ana", "update")]
    proposal, _ = await memories.upsert(A, "preference", "comida", "pão de queijo", source="agent")
    assert not proposal.verified
    verified = await memories.verify(A, proposal.id, verified_by=A)
    assert verified is not None and verified.verified and verified.confidence == 1.0
    assert await memories.verify(B, proposal.id, verified_by=B) is None  # not B's
    found = await memories.search(A, "pao", at=T0)
    assert [m.key for m in found] == ["comida"]
    assert await memories.search(B, "pao") == []
    assert [m.key for m in await memories.by_tag(A, "nome")] == ["name"]
    counts = await memories.counts(A)
    assert (counts.total, counts.verified) == (2, 2)
    assert await memories.owner_of(proposal.id) == A
    assert await memories.delete(A, proposal.id)
    assert not await memories.delete(A, proposal.id)
    assert [m.key for m in await memories.entries(A)] == ["name"]


async def test_memories_expire_by_the_message_time(storage: Storage) -> None:
    memories = storage.memories
    await memories.upsert(
        A, "context", "trip", "in Lisbon", expires_at=T0 + timedelta(days=2), at=T0
    )
    await memories.upsert(A, "fact", "pet", "a cat", at=T0)
    assert {m.key for m in await memories.entries(A, at=T0 + timedelta(days=1))} == {"trip", "pet"}
    assert {m.key for m in await memories.entries(A, at=T0 + timedelta(days=3))} == {"pet"}
    expiring = await memories.expiring(A, within_days=3, at=T0)
    assert [m.key for m in expiring] == ["trip"]
    assert (await memories.counts(A, at=T0 + timedelta(days=3))).expired == 1


async def test_what_memories_commands_use_behaves_alike(storage: Storage) -> None:
    """/memories search, #tag, expiring, confirm and edit, on each backend."""
    memories = storage.memories
    await memories.upsert(A, "preference", "food", "pizza margherita", tags=["food"], at=T0)
    await memories.upsert(A, "preference", "drink", "café", tags=["Food", "hot"], at=T0)
    guess, _ = await memories.upsert(A, "fact", "pet", "has a dog", source="agent", at=T0)
    await memories.upsert(B, "preference", "food", "pizza", tags=["food"], at=T0)
    assert [m.key for m in await memories.search(A, "pizza", tags=["food"])] == ["food"]
    assert {m.key for m in await memories.search(A, "", tags=["#FOOD"])} == {"food", "drink"}
    assert [m.key for m in await memories.search(A, "CAFE food", tags=["hot"])] == ["drink"]
    assert await memories.search(A, "", tags=[]) == []
    verified = await memories.verify(A, guess.id, verified_by=A, at=T0)
    assert verified is not None and (verified.verified, verified.source) == (True, Source.AGENT)
    edited = await memories.update(
        A, guess.id, priority="high", expires_at=T0 + timedelta(days=3), at=T0
    )
    assert edited is not None and (edited.priority.value, edited.content) == ("high", "has a dog")
    assert [m.key for m in await memories.expiring(A, within_days=7, at=T0)] == ["pet"]
    cleared = await memories.update(A, guess.id, clear_expiry=True, at=T0)
    assert cleared is not None and cleared.expires_at is None
    assert await memories.expiring(A, within_days=7, at=T0) == []
    history = await memories.history(A, guess.id)
    assert [v.change for v in history] == ["verify", "update", "update"]
    # NUL, which PostgreSQL text cannot hold, is dropped on every backend alike.
    odd, _ = await memories.upsert(A, "note", "odd", "a\x00b", at=T0)
    assert (await memories.get(A, odd.id)).content == "ab"  # type: ignore[union-attr]


# -- export and forget ---------------------------------------------------------------------


async def fill(storage: Storage, owner: str) -> None:
    await storage.graph.check_model(MODEL, 8)
    await storage.graph.add_node(node(f"{owner}-1", owner, "olá"), vector=unit(1), model=MODEL)
    await storage.graph.add_node(
        node(f"{owner}-2", owner, "tudo bem?", minutes=1),
        vector=unit(2),
        model=MODEL,
        connections=[Connection(f"{owner}-1", "follow_up", 0.7)],
    )
    await storage.memories.upsert(owner, "fact", "city", "Recife", at=T0)
    await storage.users.update_profile(owner, emotion={"state": "feliz"})


async def test_export_holds_everything_of_one_person_only(storage: Storage) -> None:
    await fill(storage, A)
    await fill(storage, B)
    export = await storage.export_owner(A)
    assert export["user"] == A
    assert export["profile"]["profile"] == {"emotion": {"state": "feliz"}}
    assert [m["id"] for m in export["messages"]] == [f"{A}-1", f"{A}-2"]
    assert export["connections"] == [
        {
            "from": f"{A}-2",
            "to": f"{A}-1",
            "relation_type": "follow_up",
            "strength": 0.7,
            "explanation": "",
        }
    ]
    assert [m["key"] for m in export["memories"]] == ["city"]
    assert B not in str(export)


async def test_forget_erases_one_person_and_nothing_else(storage: Storage) -> None:
    await fill(storage, A)
    await fill(storage, B)
    removed = await storage.forget_owner(A)
    assert removed["messages"] == 2 and removed["profile"] == 1 and removed["memories"] >= 1
    export = await storage.export_owner(A)
    assert export["profile"] is None
    assert export["messages"] == export["connections"] == export["memories"] == []
    assert await storage.graph.vector_search(A, unit(1), k=5) == []
    assert await storage.graph.text_search(A, "olá", k=5) == []
    assert await storage.users.get(A) is None
    assert len((await storage.export_owner(B))["messages"]) == 2  # B keeps everything
    assert await storage.graph.vector_search(B, unit(1), k=1) != []


async def test_another_process_sees_a_forget_at_once(opener: Opener, storage: Storage) -> None:
    """A second storage on the same database (another bot process): what it finds after
    the first forgets a person, and what its catch-up reports."""
    await fill(storage, A)
    other = opener()
    async with other:
        await other.catch_up()
        assert await other.graph.vector_search(A, unit(1), k=5) != []  # cached now
        assert await other.catch_up() == []
        await storage.forget_owner(A)
        await storage.memories.upsert(B, "fact", "x", "y")  # not announced: no change
        changed = await eventually_changed(other)
        assert A in changed or EVERY_OWNER in changed
        assert await other.graph.vector_search(A, unit(1), k=5) == []
        assert await other.nodes.recent(A) == []
        assert (await other.export_owner(A))["messages"] == []


async def eventually_changed(storage: Storage) -> list[str]:
    """Notifications travel asynchronously: a change committed is seen within moments."""
    import asyncio

    for _ in range(100):
        if changed := await storage.catch_up():
            return changed
        await asyncio.sleep(0.02)
    return []


async def test_a_new_node_from_another_process_is_found(opener: Opener, storage: Storage) -> None:
    """Another process stored a node of the person (an import: announced): this one's
    search and history see it after its catch-up. (On PostgreSQL even an unannounced
    one is seen: tests/core/storage/postgres.)"""
    await storage.graph.check_model(MODEL, 8)
    await storage.graph.add_node(node("p1"), vector=unit(1), model=MODEL)
    assert [h for h, _ in await storage.graph.vector_search(A, unit(5), k=5)] == ["p1"]
    other = opener()
    async with other:
        await other.graph.add_node(
            node("p2", minutes=1), vector=unit(5), model=MODEL, announce=True
        )
    await eventually_changed(storage)
    hits = await storage.graph.vector_search(A, unit(5), k=5)
    assert hits[0][0] == "p2"
    assert [n.id for n in await storage.nodes.recent(A)] == ["p1", "p2"]


async def test_concurrent_profile_changes_from_two_processes_lose_nothing(
    opener: Opener, storage: Storage
) -> None:
    import asyncio

    other = opener()
    async with other:

        async def bump(store: Storage) -> None:
            await store.users.change_profile(A, "count", lambda v: (v or 0) + 1)

        await asyncio.gather(*(bump(storage if i % 2 else other) for i in range(20)))
        await storage.users.settle()
        await other.users.settle()
    storage.drop_cached(A)
    user = await storage.users.get(A)
    assert user is not None and user.profile["count"] == 20


async def test_background_writes_while_serving_are_stored_for_the_next_holder(
    opener: Opener, storage: Storage
) -> None:
    """Writes made with wait=False while a person is served (on PostgreSQL they ride on
    the release of the person's lock) are stored for whoever opens the database next,
    also when another process changed the profile meanwhile; a read before the release
    sees them."""

    async def stored() -> tuple[dict[str, object], str | None, str | None]:
        async with opener() as later:
            user = await later.users.get(A)
            found = await later.nodes.get(A, "w1")
            assert user is not None and found is not None
            return user.profile, user.language, found.emotion

    await storage.nodes.add(node("w1"))
    async with opener() as other:
        async with storage.serving(A, sent_at=T0):
            await storage.users.ensure(A, seen_at=T0)
            assert await storage.users.change_profile(A, "mood", lambda _: "calma", wait=False)
            await storage.nodes.set_emotion(A, "w1", "feliz", 0.8, wait=False)
            await storage.users.set_language(A, "en", wait=False)
            # An import elsewhere changes the profile before the release.
            await other.users.change_profile(A, "pet", lambda _: "Thor", announce=True)
    await storage.users.settle()
    await storage.nodes.settle()
    assert await stored() == ({"mood": "calma", "pet": "Thor"}, "en", "feliz")
    async with storage.serving(A, sent_at=T0 + timedelta(minutes=1)):
        await storage.users.change_profile(A, "mood", lambda _: "alegre", wait=False)
        await storage.nodes.set_emotion(A, "w1", "triste", 0.5, wait=False)
        seen = await storage.users.get(A)  # before the release: its own writes
        assert seen is not None and seen.profile["mood"] == "alegre"
        kept = await storage.nodes.get(A, "w1")
        assert kept is not None and kept.emotion == "triste"
    await storage.users.settle()
    await storage.nodes.settle()
    assert await stored() == ({"mood": "alegre", "pet": "Thor"}, "en", "triste")
