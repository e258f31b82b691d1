"""Full-text search over each person's own words (core.storage.owner_words, schema 12)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from core.storage import SQLiteStorage
from core.storage.database import Database
from core.storage.owner_words import owner_key, owner_word, owner_words, query_terms
from core.storage.records import to_ts
from tests.core.storage.conftest import T0, turn

ANA, BIA = "telegram:1", "discord:2"
OWNERS = (ANA, BIA)


async def found(storage: SQLiteStorage, owner: str, query: str) -> list[str]:
    return [node_id for node_id, _ in await storage.graph.text_search(owner, query, k=10)]


def test_an_owner_key_is_fixed_length_consonants_and_tells_owners_apart() -> None:
    keys = {owner_key(f"telegram:{n}") for n in range(2000)}
    assert len(keys) == 2000
    for key in keys:
        # No vowels and no w/x/y: the stemmer must see the word after it as standing alone.
        assert len(key) == 15 and not set(key) & set("aeiouwxy")
    assert owner_key(ANA) == owner_key(ANA)


def test_a_nodes_words_are_folded_each_once_joined_to_its_owner() -> None:
    key = owner_key(ANA)
    assert owner_words(ANA, "Cabeça, CABEÇA e snake_case 2024!") == " ".join(
        owner_word(key, w) for w in ("cabeca", "e", "snake", "case", "2024")
    )
    assert owner_word(key, "cabeca") == key + "cabeca"
    assert owner_words(ANA, "") == "" and owner_words(None, "x") == ""


async def test_query_terms_are_plain_words_whatever_the_text(storage: SQLiteStorage) -> None:
    """FTS syntax in a query is only words; each term is one quoted token; hostile text
    runs as a query without an error."""
    key = owner_key(ANA)
    assert query_terms(ANA, 'a "quoted" OR NEAR(x) * col:umn') == [
        f'"{owner_word(key, w)}"' for w in ("quoted", "or", "near", "col", "umn")
    ]
    assert query_terms(ANA, "?!") == []
    assert query_terms(ANA, " ".join(f"w{n}" for n in range(100)))[-1] == f'"{key}w23"'
    # Stop words go, unless nothing else is left.
    assert query_terms(ANA, "o que é gato", stop_words={"que", "isso"}) == [f'"{key}gato"']
    assert query_terms(ANA, "que isso", stop_words={"que", "isso"}) == [
        f'"{key}que"',
        f'"{key}isso"',
    ]
    await storage.graph.add_node(turn("n1", ANA, "nada"), vector=None, model="test")
    for hostile in ('"; DROP TABLE nodes; --', "NEAR(a b)", "^*:", "\x00\ud800", "ü" * 5000):
        assert await found(storage, ANA, hostile) == []


async def test_a_person_finds_only_their_own_turns(storage: SQLiteStorage) -> None:
    await storage.graph.add_node(turn("a1", ANA, "Tenho dor de cabeça"), vector=None, model="test")
    await storage.graph.add_node(turn("b1", BIA, "Minha cabeça dói"), vector=None, model="test")
    assert await found(storage, ANA, "cabeca") == ["a1"]
    assert await found(storage, BIA, "CABEÇA") == ["b1"]
    assert await found(storage, "telegram:3", "cabeça") == []


async def test_words_match_by_their_stem_as_before(storage: SQLiteStorage) -> None:
    """Schema 11's index stemmed plain words; the owner's key before a word must not change
    what the stemmer does to it."""
    pairs = [
        ("I am researching compilers", "research"),
        ("the connections failed", "connection"),
        ("she was hoping for rain", "hope"),
        ("generalization of rules", "generalizations"),
        ("comprei duas casas", "casa"),
        ("a rate limit", "rated"),
        # Under three letters the stemmer leaves a word alone: "as" is not "a".
        ("as time goes", "as"),
        ("is it", "is"),
    ]
    for n, (text, _) in enumerate(pairs):
        await storage.graph.add_node(turn(f"s{n}", ANA, text, minutes=n), vector=None, model="test")
    for n, (_, query) in enumerate(pairs):
        assert await found(storage, ANA, query) == [f"s{n}"], query
    # The same as SQLite's own porter stemmer on the bare words.
    plain = sqlite3.connect(":memory:")
    plain.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter ascii')")
    for n, (text, _) in enumerate(pairs):
        plain.execute("INSERT INTO t(rowid, x) VALUES (?, ?)", (n, text))
    for n, (_, query) in enumerate(pairs):
        assert [r[0] for r in plain.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,))] == [n]


async def test_forgetting_a_person_removes_their_words(storage: SQLiteStorage) -> None:
    await storage.graph.add_node(turn("a1", ANA, "Tenho dor de cabeça"), vector=None, model="test")
    await storage.graph.add_node(turn("b1", BIA, "Tenho dor de cabeça"), vector=None, model="test")
    await storage.forget_owner(ANA)
    rows = await storage.db.fetchall(
        "SELECT count(*) FROM nodes_words WHERE nodes_words MATCH ?",
        (" OR ".join(query_terms(ANA, "tenho dor cabeça") + query_terms(BIA, "cabeça")),),
    )
    assert rows[0][0] == 1  # BIA's turn alone
    await storage.db.run(
        lambda raw: raw.execute("INSERT INTO nodes_words(nodes_words) VALUES ('integrity-check')"),
    )


async def test_a_database_from_schema_11_is_indexed_again_on_open(tmp_path: Path) -> None:
    path = tmp_path / "akira.db"
    storage = SQLiteStorage(path)
    earlier = [m for m in storage._migrations if m.version != 12]
    db = Database(path)
    await db.open(earlier)
    async with db.transaction() as conn:
        for owner, node_id, text in ((ANA, "a1", "Fui ao médico"), (BIA, "b1", "médico bom")):
            await conn.execute(
                "INSERT INTO users(key, platform, external_id, created_at, last_seen_at)"
                " VALUES (?, 'x', ?, 0, 0)",
                (owner, owner),
            )
            await conn.execute(
                "INSERT INTO nodes(id, owner, type, content, ts) VALUES (?, ?, 'user_message', ?, ?)",
                (node_id, owner, text, to_ts(T0)),
            )
    await db.close()
    async with storage:
        assert await found(storage, ANA, "medico") == ["a1"]
        assert await found(storage, BIA, "médicos") == ["b1"]
        tables = await storage.db.fetchall(
            "SELECT name FROM sqlite_master WHERE name LIKE 'nodes_fts%'"
        )
        assert tables == []


async def test_the_window_is_read_by_rowid_not_by_walking_the_owners_history(
    storage: SQLiteStorage,
) -> None:
    """The full-text window's nodes are looked up by rowid: reading the owner's index
    instead visits every node of their history on each search. The plan is SQLite's
    own, on the real schema, with the owner's index there."""
    from core.storage.sqlite_graph import WINDOW_ROWS_SQL

    for n in range(50):
        await storage.graph.add_node(turn(f"n{n}", ANA, f"gato {n}"), vector=None, model="test")
    assert [node for node, _ in await storage.graph.text_search(ANA, "gato", k=3)]
    with sqlite3.connect(storage.path) as raw:
        raw.execute("ANALYZE")
        plan = [
            str(row[3])
            for row in raw.execute(f"EXPLAIN QUERY PLAN {WINDOW_ROWS_SQL}", (0, "[]", ANA))
        ]
    nodes_steps = [step for step in plan if "VIRTUAL TABLE" not in step]
    assert nodes_steps == ["SEARCH n USING INTEGER PRIMARY KEY (rowid=?)"], plan
