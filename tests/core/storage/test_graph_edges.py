"""Edges of the memory graph (``graph_connections``, schemas 13 and 14): written only
between two nodes of one person, found from either end, and gone with either node."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from core.storage import SQLiteStorage
from core.storage.database import Database
from core.storage.records import Connection, to_ts
from tests.core.storage.conftest import T0, turn

ANA, BIA = "telegram:1", "discord:2"
OWNERS = (ANA, BIA)


async def edges(storage: SQLiteStorage) -> set[tuple[str, str, str]]:
    rows = await storage.db.fetchall("SELECT owner, from_id, to_id FROM graph_connections")
    return {(r[0], r[1], r[2]) for r in rows}


async def test_an_edge_is_written_only_to_a_node_of_the_same_person(
    storage: SQLiteStorage,
) -> None:
    await storage.graph.add_node(turn("a1", ANA), vector=None, model="test")
    await storage.graph.add_node(turn("b1", BIA), vector=None, model="test")
    await storage.graph.add_node(
        turn("a2", ANA, minutes=1),
        vector=None,
        model="test",
        connections=[
            Connection("a1", "follow_up", 0.9, "1 min later"),
            Connection("b1", "similar", 0.9, "another person's node"),
            Connection("nowhere", "similar", 0.9, "no such node"),
        ],
    )
    assert await edges(storage) == {(ANA, "a2", "a1")}


async def test_a_nodes_incoming_edges_are_found_through_the_owners_index(
    storage: SQLiteStorage,
) -> None:
    for owner, prefix in ((ANA, "a"), (BIA, "b")):
        await storage.graph.add_node(turn(f"{prefix}1", owner), vector=None, model="test")
        for minutes in (1, 2):
            await storage.graph.add_node(
                turn(f"{prefix}{minutes + 1}", owner, minutes=minutes),
                vector=None,
                model="test",
                connections=[Connection(f"{prefix}1", "similar", 0.8, "")],
            )
    found = await storage.graph.edges(ANA, ["a1"])
    assert {(e.from_id, e.to_id) for e in found} == {("a2", "a1"), ("a3", "a1")}
    [(_, _, _, plan)] = await storage.db.fetchall(
        "EXPLAIN QUERY PLAN SELECT from_id FROM graph_connections WHERE owner = ? AND to_id = ?",
        (ANA, "a1"),
    )
    assert "graph_connections_to (owner=? AND to_id=?)" in plan


async def test_deleting_a_node_removes_its_edges_both_ways_and_no_others(
    storage: SQLiteStorage,
) -> None:
    await storage.graph.add_node(turn("a1", ANA), vector=None, model="test")
    await storage.graph.add_node(
        turn("a2", ANA, minutes=1),
        vector=None,
        model="test",
        connections=[Connection("a1", "follow_up", 0.9, "")],
    )
    await storage.graph.add_node(
        turn("a3", ANA, minutes=2),
        vector=None,
        model="test",
        connections=[Connection("a2", "follow_up", 0.9, ""), Connection("a1", "similar", 0.7, "")],
    )
    assert await edges(storage) == {(ANA, "a2", "a1"), (ANA, "a3", "a2"), (ANA, "a3", "a1")}
    await storage.db.run(lambda raw: raw.execute("DELETE FROM nodes WHERE id = 'a2'"))
    assert await edges(storage) == {(ANA, "a3", "a1")}
    await storage.users.delete_owner(ANA)  # the person: every node goes, by cascade
    assert await edges(storage) == set()


async def test_a_database_from_schema_12_keeps_its_edges_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "akira.db"
    storage = SQLiteStorage(path)
    db = Database(path)
    await db.open([m for m in storage._migrations if m.version < 13])
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO users(key, platform, external_id, created_at, last_seen_at)"
            " VALUES (?, 'telegram', '1', 0, 0)",
            (ANA,),
        )
        for minutes, node_id in enumerate(("a1", "a2", "a3")):
            await conn.execute(
                "INSERT INTO nodes(id, owner, type, content, ts)"
                " VALUES (?, ?, 'user_message', 'oi', ?)",
                (node_id, ANA, to_ts(T0 + timedelta(minutes=minutes))),
            )
        await conn.executemany(
            "INSERT INTO graph_connections(owner, from_id, to_id, relation_type, strength,"
            " explanation) VALUES (?, ?, ?, 'follow_up', 0.95, 'x')",
            [(ANA, "a2", "a1"), (ANA, "a3", "a2")],
        )
    await db.close()
    async with storage:
        assert await edges(storage) == {(ANA, "a2", "a1"), (ANA, "a3", "a2")}
        [(explanation, strength)] = await storage.db.fetchall(
            "SELECT explanation, strength FROM graph_connections WHERE from_id = 'a2'"
        )
        assert (explanation, strength) == ("x", 0.95)
        assert await storage.db.fetchall("PRAGMA foreign_key_list(graph_connections)") == []
        indexes = {r[1] for r in await storage.db.fetchall("PRAGMA index_list(graph_connections)")}
        assert "graph_connections_to" in indexes and "graph_connections_from" not in indexes
        # Schema 14: incoming edges indexed by owner, then target.
        columns = await storage.db.fetchall("PRAGMA index_info(graph_connections_to)")
        assert [r[2] for r in columns] == ["owner", "to_id"]
        await storage.db.run(lambda raw: raw.execute("DELETE FROM nodes WHERE id = 'a1'"))
        assert await edges(storage) == {(ANA, "a3", "a2")}
