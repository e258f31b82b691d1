"""SQLite write functions and row shapes: what a group commit runs on a raw connection,
on the event loop's connection or in the writer process (which unpickles them by name, so
they are module-level functions of this module, importing nothing that opens a database).

Each takes the rows as plain values (tuples, strings, bytes): what crosses to the writer
process pickles fast."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.storage.graph_records import storable_connections
from core.storage.records import (
    EVERY_OWNER,
    NODE_COLUMNS,
    USER_COLUMN_NAMES,
    USER_COLUMNS,
    Connection,
    MemoryNode,
    NodeRow,
    node_params,
)
from core.storage.vector_cache import blob

# Kept importable from here (the row shapes are both backends', in core.storage.records).
__all__ = [
    "EVERY_OWNER",
    "NODE_COLUMNS",
    "USER_COLUMNS",
    "USER_COLUMN_NAMES",
    "NodeRow",
    "node_params",
]

# Stands for no owner: the row a prune at open writes so that readers notice it.
NOBODY = ""
# Rows older than this are deleted when another change is written: a reader that has not
# looked for a whole day (a process that served no message) drops every cache instead.
KEEP_CHANGES_S = 24 * 3600.0
# A reader finding more owners than this at once drops every cache: cheaper than that many
# single drops, and it bounds the rows read on the event loop.
MAX_OWNERS_PER_CATCH_UP = 512


def user_row(row: Any) -> dict[str, Any]:
    """A user's row as a plain dict (column -> value): kept in memory, and picklable."""
    return {name: row[name] for name in USER_COLUMN_NAMES}


INSERT_NODE = (
    f"INSERT OR IGNORE INTO nodes({NODE_COLUMNS}) VALUES ({', '.join('?' * len(NodeRow._fields))})"
)


def insert_node_row(raw: sqlite3.Connection, params: NodeRow) -> bool:
    """Insert a node's row (:func:`node_params`) inside the caller's :meth:`Database.run`
    transaction; False when the node is a duplicate (nothing written). Takes the row,
    not the node: it may cross to the writer process, and a tuple pickles fastest."""
    cur = raw.execute(INSERT_NODE, params)
    return (cur.rowcount or 0) > 0


def swap_profile(raw: sqlite3.Connection, key: str, before: str, after: str) -> bool:
    """Store ``after`` as ``key``'s profile if it is still ``before`` (compare and set:
    the edit was made on the loop, from the row as it was read). False: someone changed
    it meanwhile, or the user is gone."""
    cur = raw.execute(
        "UPDATE users SET profile = ? WHERE key = ? AND profile = ?", (after, key, before)
    )
    return (cur.rowcount or 0) > 0


def set_language(raw: sqlite3.Connection, key: str, language: str) -> None:
    raw.execute("UPDATE users SET language = ? WHERE key = ?", (language, key)).close()


def upsert_user(
    raw: sqlite3.Connection,
    key: str,
    platform: str,
    external_id: str,
    display_name: str | None,
    seen: float,
) -> dict[str, Any]:
    """Create or refresh a user's row; the row as stored (a dict: it may have to cross
    to another process, which a ``sqlite3.Row`` cannot)."""
    raw.execute(
        "INSERT INTO users(key, platform, external_id, display_name, created_at, last_seen_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(key) DO UPDATE SET"
        "  display_name = COALESCE(excluded.display_name, users.display_name),"
        "  last_seen_at = MAX(users.last_seen_at, excluded.last_seen_at)",
        (key, platform, external_id, display_name, seen, seen),
    )
    return user_row(
        raw.execute(f"SELECT {USER_COLUMNS} FROM users WHERE key = ?", (key,)).fetchone()
    )


def set_node_emotion(
    raw: sqlite3.Connection, owner: str, node_id: str, label: str, score: float
) -> None:
    raw.execute(
        "UPDATE nodes SET emotion = ?, emotion_score = ? WHERE owner = ? AND id = ?",
        (label, score, owner, node_id),
    ).close()


@dataclass(frozen=True, slots=True)
class NodeWrite:
    """A node's rows as plain values (tuples, strings, bytes): what crosses to the writer
    process pickles fast. Pickling the node and its connections as dataclasses cost the
    event loop more than the rest of the hand-over."""

    params: NodeRow  # the nodes row (node_params)
    vector: bytes | None
    dim: int
    model: str
    tags_json: str | None  # the distinct tags, one JSON array: one statement
    ntags: int
    # [[target, relation, strength, explanation], ...] as JSON: one statement, one step
    # (with ``executemany`` SQLite steps once a row).
    edges_json: str | None
    entities_json: str | None  # the entity keys, one JSON array

    @classmethod
    def of(
        cls,
        node: MemoryNode,
        vector: np.ndarray | None,
        model: str,
        connections: Sequence[Connection],
        entities: Sequence[str] = (),
    ) -> NodeWrite:
        tags = list(dict.fromkeys(node.tags))
        named = list(dict.fromkeys(entities))
        edges = [
            [c.node_id, c.relation_type, float(c.strength), c.explanation]
            for c in storable_connections(node, connections)
        ]
        return cls(
            params=node_params(node),
            vector=None if vector is None else blob(vector),
            dim=0 if vector is None else int(np.asarray(vector).shape[-1]),
            model=model,
            tags_json=json.dumps(tags) if tags else None,
            ntags=len(tags),
            edges_json=json.dumps(edges) if edges else None,
            entities_json=json.dumps(named) if named else None,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # A plain tuple of builtins instead of dataclass state: the quickest to pickle.
        return (NodeWrite, tuple(getattr(self, name) for name in self.__slots__))


def write_node(raw: sqlite3.Connection, rows: NodeWrite) -> bool:
    """A node with its vector, tag postings and outgoing edges, in the caller's
    transaction; False when it is a duplicate (nothing written). A module function, so
    the write can cross to the writer process."""
    if not insert_node_row(raw, rows.params):
        return False
    _write_beside(raw, rows)
    return True


def write_completion(raw: sqlite3.Connection, rows: NodeWrite) -> bool:
    """What :func:`write_node` writes beside a node, for one stored without it: the
    row's tags, the vector, tag and entity postings and outgoing edges, in the caller's
    transaction; False when the owner has no such node (nothing written)."""
    params = rows.params
    cur = raw.execute(
        "UPDATE nodes SET tags = ? WHERE id = ? AND owner = ?",
        (params.tags, params.id, params.owner),
    )
    if not (cur.rowcount or 0) > 0:
        return False
    _write_beside(raw, rows)
    return True


def _write_beside(raw: sqlite3.Connection, rows: NodeWrite) -> None:
    """The vector, postings and edges of the node ``rows`` describe (its row stored)."""
    node_id, owner, ts = rows.params.id, rows.params.owner, rows.params.ts
    if rows.vector is not None:
        raw.execute(
            "INSERT OR REPLACE INTO graph_embeddings(node_id, owner, model, dim, vector)"
            " VALUES (?, ?, ?, ?, ?)",
            (node_id, owner, rows.model, rows.dim, rows.vector),
        )
    if rows.tags_json is not None:
        raw.execute(
            "INSERT OR IGNORE INTO graph_tags(owner, tag, ts, node_id, ntags)"
            " SELECT ?, value, ?, ?, ? FROM json_each(?)",
            (owner, ts, node_id, rows.ntags, rows.tags_json),
        )
    if rows.entities_json is not None:
        raw.execute(
            "INSERT OR IGNORE INTO graph_entities(owner, entity, ts, node_id, scope)"
            " SELECT ?, value, ?, ?, ? FROM json_each(?)",
            (owner, ts, node_id, rows.params.scope, rows.entities_json),
        )
    if rows.edges_json is not None:
        raw.execute(
            "INSERT OR REPLACE INTO graph_connections"
            "(owner, from_id, to_id, relation_type, strength, explanation)"
            " SELECT ?1, ?2, json_extract(e.value, '$[0]'), json_extract(e.value, '$[1]'),"
            " json_extract(e.value, '$[2]'), json_extract(e.value, '$[3]')"
            " FROM json_each(?3) AS e WHERE EXISTS"
            # The target must be the same owner's node: never an edge across people.
            " (SELECT 1 FROM nodes WHERE id = json_extract(e.value, '$[0]') AND owner = ?1)",
            (owner, node_id, rows.edges_json),
        )


def write_second_vectors(
    raw: sqlite3.Connection, model: str, rows: Sequence[tuple[str, str, int, bytes]]
) -> list[tuple[str, str, float, str]]:
    """Second vectors (node id, owner, dim, float32 bytes) of ``model``, each only for a
    node of that owner, in the caller's transaction. Returns (node id, owner, time, scope)
    of those stored (what a kept matrix appends)."""
    stored: list[tuple[str, str, float, str]] = []
    for node_id, owner, dim, vector in rows:
        place = raw.execute(
            "SELECT ts, scope FROM nodes WHERE id = ? AND +owner = ?", (node_id, owner)
        ).fetchone()
        if place is None:
            continue
        raw.execute(
            "INSERT OR REPLACE INTO graph_second_embeddings(node_id, owner, model, dim, vector)"
            " VALUES (?, ?, ?, ?, ?)",
            (node_id, owner, model, dim, vector),
        )
        stored.append((node_id, owner, float(place[0]), str(place[1])))
    return stored


def write_second_vectors_announced(
    raw: sqlite3.Connection, model: str, rows: Sequence[tuple[str, str, int, bytes]], at: float
) -> list[tuple[str, str, float, str]]:
    stored = write_second_vectors(raw, model, rows)
    for owner in dict.fromkeys(owner for _, owner, _, _ in stored):
        record_change(raw, owner, at)
    return stored


# Recording a change: prune (watermark first, from the rows about to go), then the row.
# Plain statements with no values passed between them, so the same list runs on a raw
# connection (group commits, the writer process) and on aiosqlite's (transactions).
PRUNE = (
    "UPDATE owner_changes_pruned SET seq = (SELECT max(seq) FROM owner_changes WHERE at < ?1)"
    " WHERE (SELECT max(seq) FROM owner_changes WHERE at < ?1) > seq",
    "DELETE FROM owner_changes WHERE at < ?1",
)
# REPLACE: the owner's earlier row goes and a new one takes the next ``seq``: AUTOINCREMENT
# hands out numbers above every one ever committed (deleted rows' too), and SQLite commits
# one writer at a time, so rows become visible in ``seq`` order and "seq > the last seen"
# never skips one.
RECORD = "INSERT OR REPLACE INTO owner_changes(owner, at) VALUES (?, ?)"
SINCE = "SELECT seq, owner FROM owner_changes WHERE seq > ? ORDER BY seq LIMIT ?"


def record_change(raw: sqlite3.Connection, owner: str, at: float) -> None:
    """Record that ``owner``'s data changed, inside the caller's write transaction on a
    raw connection (a :meth:`Database.run` write function)."""
    for statement in PRUNE:
        raw.execute(statement, (at - KEEP_CHANGES_S,))
    raw.execute(RECORD, (owner, at))


WriteFn = Callable[[sqlite3.Connection], bool]


def announced(write: WriteFn, owner: str, *, announce: bool = True) -> WriteFn:
    """``write`` (a :meth:`Database.run` write function that says whether it wrote
    anything) made to record a change of ``owner`` in the same transaction when it did;
    ``write`` itself when not ``announce``. Picklable when ``write`` is (the writer
    process)."""
    if not announce:
        return write
    return functools.partial(write_announced, write=write, owner=owner, at=time.time())


def write_announced(raw: sqlite3.Connection, write: WriteFn, owner: str, at: float) -> bool:
    if not write(raw):
        return False
    record_change(raw, owner, at)
    return True
