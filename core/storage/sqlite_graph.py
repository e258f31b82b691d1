"""The memory graph's storage: embeddings, connections, tag postings and full-text search.

Schema versions 10-19. Every query filters by owner here, in the storage layer:

- ``graph_embeddings``: one vector per node with its model name and dimension. Vectors of
  two models are never mixed: :meth:`SQLiteGraphStore.check_model` raises
  :class:`EmbeddingModelMismatch` when the database holds vectors of another model (the
  fix is to configure that model again, or to re-embed explicitly with
  ``GraphMemory.reembed()``, which replaces every vector).
- ``graph_connections``: typed, weighted edges between two nodes of the same owner.
- ``graph_tags``: tag postings (owner, tag, time) so shared-tag candidates come from an
  index, not from a scan of the person's history.
- ``nodes_fts``: FTS5 over node content with ``unicode61 remove_diacritics 2`` ("cabeca"
  finds "cabeça") under the porter stemmer ("research" finds "researching"; on
  Portuguese it mostly strips plurals), external content kept in sync by triggers on
  ``nodes``. Each row also
  indexes one token made of the owner's key (``o`` + hex), and every search ANDs it in:
  FTS5 then walks only that person's postings, so a search costs the same whether the
  database holds one person or ten thousand.

Vector search runs in numpy over a per-owner float32 matrix cached in memory (faster than
sqlite-vec at chat scale: ~1.3 ms over 20k x 384), appended to on insert and bounded by
an LRU over owners.
"""

from __future__ import annotations

import re
import sqlite3
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from core.embeddings.hashing import fold
from core.storage.base import OwnedData
from core.storage.database import Database, Migration, StorageError
from core.storage.records import Connection, MemoryNode, from_ts, to_ts
from core.storage.sqlite_nodes import NODE_COLUMNS, SQLiteNodeStore, insert_node, node_from_row

MIGRATIONS = [
    Migration(
        10,
        "memory graph: embeddings, connections, tag postings",
        """
        CREATE TABLE graph_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE graph_embeddings (
            node_id TEXT PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX graph_embeddings_owner ON graph_embeddings(owner);
        CREATE TABLE graph_connections (
            owner TEXT NOT NULL,
            from_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            to_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            relation_type TEXT NOT NULL,
            strength REAL NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (owner, from_id, to_id, relation_type)
        ) WITHOUT ROWID;
        CREATE INDEX graph_connections_from ON graph_connections(from_id);
        CREATE INDEX graph_connections_to ON graph_connections(to_id);
        CREATE TABLE graph_tags (
            owner TEXT NOT NULL,
            tag TEXT NOT NULL,
            ts REAL NOT NULL,
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            ntags INTEGER NOT NULL,
            PRIMARY KEY (owner, tag, ts, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX graph_tags_node ON graph_tags(node_id);
        """,
    ),
    Migration(
        11,
        "memory graph: full-text search over nodes",
        """
        CREATE VIEW graph_fts_source AS
            SELECT rowid AS node_rowid, 'o' || hex(owner) AS otok, content FROM nodes;
        CREATE VIRTUAL TABLE nodes_fts USING fts5(
            otok, content,
            content = 'graph_fts_source', content_rowid = 'node_rowid',
            tokenize = "porter unicode61 remove_diacritics 2"
        );
        CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
            INSERT INTO nodes_fts(rowid, otok, content)
            VALUES (new.rowid, 'o' || hex(new.owner), new.content);
        END;
        CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, otok, content)
            VALUES ('delete', old.rowid, 'o' || hex(old.owner), old.content);
        END;
        CREATE TRIGGER nodes_fts_update AFTER UPDATE OF owner, content ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, otok, content)
            VALUES ('delete', old.rowid, 'o' || hex(old.owner), old.content);
            INSERT INTO nodes_fts(rowid, otok, content)
            VALUES (new.rowid, 'o' || hex(new.owner), new.content);
        END;
        INSERT INTO nodes_fts(nodes_fts) VALUES ('rebuild');
        """,
    ),
]

_FTS_WORD = re.compile(r"\w+", re.UNICODE)
MAX_FTS_TERMS = 24  # a pasted essay must not become a 500-term OR query
FTS_WINDOW = 2000  # latest matching rows ranked by bm25 per full-text search


class EmbeddingModelMismatch(StorageError):
    """The database holds vectors of another embedding model than the configured one."""


@dataclass(frozen=True, slots=True)
class Edge:
    """A stored connection seen from the graph (both ends known)."""

    from_id: str
    to_id: str
    relation_type: str
    strength: float
    explanation: str = ""

    def other(self, node_id: str) -> str:
        return self.to_id if node_id == self.from_id else self.from_id


def owner_token(owner: str) -> str:
    """The FTS token that stands for an owner (matches SQL ``'o' || hex(owner)``)."""
    return "o" + owner.encode("utf-8").hex()


def fts_query(text: str, stop_words: Iterable[str] = ()) -> str | None:
    """A safe FTS5 expression for free text: folded words, quoted, ORed (bm25 ranks the
    rows that match more and rarer words first). None when nothing is left to match."""
    stop = set(stop_words)
    words: dict[str, None] = {}
    for word in _FTS_WORD.findall(fold(text)):
        if word not in stop and len(word) > 1:
            words.setdefault(word, None)
    if not words and stop:  # a query made only of stop words still searches them
        return fts_query(text)
    if not words:
        return None
    terms = list(words)[:MAX_FTS_TERMS]
    return " OR ".join(f'"{w}"' for w in terms)


class GraphStore(OwnedData):
    """What the memory graph needs from storage. Every method filters by ``owner``."""

    section = "connections"

    @abstractmethod
    async def check_model(self, model: str, dim: int) -> None:
        """Raise EmbeddingModelMismatch when stored vectors come from another model."""

    @abstractmethod
    async def add_node(
        self,
        node: MemoryNode,
        *,
        vector: np.ndarray | None,
        model: str,
        connections: Sequence[Connection] = (),
    ) -> bool:
        """Node, vector, tag postings and outgoing connections in one transaction;
        False (and nothing written) when the node is a duplicate."""

    @abstractmethod
    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        """The owner's most recent node (of ``node_type``, if given) at or before ``at``."""

    @abstractmethod
    async def previous_in_chat(
        self, owner: str, chat_id: str, *, at: datetime, since: datetime, limit: int = 1
    ) -> list[MemoryNode]: ...

    @abstractmethod
    async def tag_candidates(
        self, owner: str, tags: Sequence[str], *, per_tag: int = 50
    ) -> dict[str, tuple[int, int]]:
        """Recent nodes sharing tags: node id -> (tags in common, its tag count)."""

    @abstractmethod
    async def vector_search(
        self,
        owner: str,
        vector: np.ndarray,
        *,
        k: int,
        scopes: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        at: datetime | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (node id, cosine) of the owner's nodes."""

    @abstractmethod
    async def text_search(
        self,
        owner: str,
        query: str,
        *,
        k: int,
        scopes: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        at: datetime | None = None,
        stop_words: Iterable[str] = (),
    ) -> list[tuple[str, float]]:
        """Top-k (node id, relevance > 0) by full-text search, best first."""

    @abstractmethod
    async def edges(self, owner: str, node_ids: Sequence[str]) -> list[Edge]:
        """Every connection touching one of ``node_ids`` (either direction)."""

    @abstractmethod
    async def get_nodes(self, owner: str, node_ids: Sequence[str]) -> dict[str, MemoryNode]:
        """The owner's nodes among ``node_ids`` (others are left out)."""

    @abstractmethod
    async def vectors(self, owner: str, node_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    async def node_count_with_vectors(self, owner: str) -> int: ...


class _OwnerVectors:
    """One owner's vectors in a growable float32 matrix (append is amortised O(1))."""

    __slots__ = ("dim", "ids", "index", "matrix", "n", "scope_codes", "scopes", "ts")

    def __init__(self, dim: int, capacity: int = 64) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.matrix = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self.ts = np.zeros(max(capacity, 1), dtype=np.float64)
        self.scope_codes = np.zeros(max(capacity, 1), dtype=np.int32)
        self.scopes: dict[str, int] = {}
        self.n = 0

    def append(self, node_id: str, vector: np.ndarray, ts: float, scope: str) -> None:
        if node_id in self.index:
            return
        if self.n == len(self.matrix):
            grow = max(64, len(self.matrix))
            self.matrix = np.concatenate([self.matrix, np.zeros((grow, self.dim), np.float32)])
            self.ts = np.concatenate([self.ts, np.zeros(grow, np.float64)])
            self.scope_codes = np.concatenate([self.scope_codes, np.zeros(grow, np.int32)])
        code = self.scopes.setdefault(scope, len(self.scopes))
        self.matrix[self.n] = vector
        self.ts[self.n] = ts
        self.scope_codes[self.n] = code
        self.ids.append(node_id)
        self.index[node_id] = self.n
        self.n += 1

    def search(
        self,
        vector: np.ndarray,
        k: int,
        scopes: Sequence[str] | None,
        exclude: Iterable[str],
        at: float | None,
    ) -> list[tuple[str, float]]:
        if self.n == 0 or k <= 0:
            return []
        sims = self.matrix[: self.n] @ vector
        if scopes is not None:
            codes = [self.scopes[s] for s in scopes if s in self.scopes]
            if not codes:
                return []
            sims[~np.isin(self.scope_codes[: self.n], codes)] = -np.inf
        if at is not None:
            sims[self.ts[: self.n] > at] = -np.inf
        for node_id in exclude:
            i = self.index.get(node_id)
            if i is not None:
                sims[i] = -np.inf
        k = min(k, self.n)
        top = np.argpartition(-sims, k - 1)[:k] if k < self.n else np.arange(self.n)
        top = top[np.argsort(-sims[top])]
        return [(self.ids[i], float(sims[i])) for i in top if np.isfinite(sims[i])]

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes


class SQLiteGraphStore(GraphStore):
    def __init__(
        self, db: Database, nodes: SQLiteNodeStore, *, max_cached_rows: int = 400_000
    ) -> None:
        self.db = db
        self.nodes = nodes
        # LRU of owners' matrices, bounded by rows (400k x 384 float32 ~ 600 MB worst case;
        # a typical chat user has a few thousand rows). The newest owner always stays.
        self.max_cached_rows = max_cached_rows
        self._cache: OrderedDict[str, _OwnerVectors] = OrderedDict()
        self._cached_rows = 0
        self._model: tuple[str, int] | None = None

    # -- model -------------------------------------------------------------------------

    async def check_model(self, model: str, dim: int) -> None:
        if self._model == (model, dim):
            return
        row = await self.db.fetchone(
            "SELECT model, dim FROM graph_embeddings WHERE model != ? OR dim != ? LIMIT 1",
            (model, dim),
        )
        if row is not None:
            raise EmbeddingModelMismatch(
                f"the memory database holds vectors of embedding model {row['model']!r} "
                f"(dim {row['dim']}), but {model!r} (dim {dim}) is configured. Configure "
                f"{row['model']!r} again (AKIRA_EMBEDDING__BACKEND / AKIRA_EMBEDDING__MODEL), "
                "or re-embed every stored node with the new model (GraphMemory.reembed)."
            )
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO graph_meta(key, value) VALUES ('embedding_model', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (f"{model}:{dim}",),
            )
        self._model = (model, dim)

    async def replace_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, first: bool
    ) -> None:
        """Re-embedding: with ``first`` every vector of another model is dropped, then
        ``rows`` (node id, owner, vector) are written. The cache starts over."""
        async with self.db.transaction() as conn:
            if first:
                await conn.execute("DELETE FROM graph_embeddings WHERE model != ?", (model,))
            await conn.executemany(
                "INSERT OR REPLACE INTO graph_embeddings(node_id, owner, model, dim, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                [(nid, owner, model, len(v), _blob(v)) for nid, owner, v in rows],
            )
        self._drop()
        self._model = None

    async def nodes_without_vector(self, model: str, limit: int) -> list[tuple[str, str, str]]:
        """(id, owner, content) of nodes with no vector of ``model`` (re-embedding)."""
        rows = await self.db.fetchall(
            "SELECT n.id, n.owner, n.content FROM nodes n"
            " LEFT JOIN graph_embeddings e ON e.node_id = n.id AND e.model = ?"
            " WHERE e.node_id IS NULL ORDER BY n.rowid LIMIT ?",
            (model, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    # -- writes ------------------------------------------------------------------------

    async def add_node(
        self,
        node: MemoryNode,
        *,
        vector: np.ndarray | None,
        model: str,
        connections: Sequence[Connection] = (),
    ) -> bool:
        def write(raw: sqlite3.Connection) -> bool:
            if not insert_node(raw, node):
                return False
            _write_graph_rows(raw, node, vector, model, connections)
            return True

        # Node, vector, tags and edges in one transaction AND one round trip to the
        # database thread: the write lock is held for a single hop per message.
        if not await self.db.run(write):
            return False
        if vector is not None:
            cached = self._cache.get(node.owner)
            if cached is not None:
                before = cached.n
                cached.append(node.id, _as_vector(vector), to_ts(node.timestamp), node.scope)
                self._cached_rows += cached.n - before
                self._cache.move_to_end(node.owner)
                self._evict()
        return True

    # -- reads -------------------------------------------------------------------------

    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        sql = "SELECT id, ts FROM nodes WHERE owner = ? AND ts <= ? AND id != ?"
        params: list[Any] = [owner, to_ts(at), exclude or ""]
        if node_type is not None:
            sql += " AND type = ?"
            params.append(node_type)
        row = await self.db.fetchone(sql + " ORDER BY ts DESC, rowid DESC LIMIT 1", params)
        if row is None:
            return None
        return row["id"], from_ts(row["ts"])

    async def previous_in_chat(
        self, owner: str, chat_id: str, *, at: datetime, since: datetime, limit: int = 1
    ) -> list[MemoryNode]:
        """The owner's latest nodes of one chat in ``[since, at]``, oldest first."""
        rows = await self.db.fetchall(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? AND ts <= ? AND ts >= ?"
            " AND chat_id = ? ORDER BY ts DESC, rowid DESC LIMIT ?",
            (owner, to_ts(at), to_ts(since), chat_id, limit),
        )
        return [node_from_row(r) for r in reversed(rows)]

    async def tag_candidates(
        self, owner: str, tags: Sequence[str], *, per_tag: int = 50
    ) -> dict[str, tuple[int, int]]:
        unique = list(dict.fromkeys(tags))

        def read(raw: sqlite3.Connection) -> dict[str, tuple[int, int]]:
            found: dict[str, tuple[int, int]] = {}
            for tag in unique:
                # Only the latest ``per_tag`` postings of each tag: a common tag ("health")
                # must not make a message's cost grow with the person's whole history.
                rows = raw.execute(
                    "SELECT node_id, ntags FROM graph_tags WHERE owner = ? AND tag = ?"
                    " ORDER BY ts DESC LIMIT ?",
                    (owner, tag, per_tag),
                ).fetchall()
                for row in rows:
                    common, ntags = found.get(row[0], (0, int(row[1])))
                    found[row[0]] = (common + 1, ntags)
            return found

        # Every tag's postings in one round trip to the database thread.
        return await self.db.run(read, write=False) if unique else {}

    async def _owner_vectors(self, owner: str) -> _OwnerVectors | None:
        cached = self._cache.get(owner)
        if cached is not None:
            self._cache.move_to_end(owner)
            return cached
        rows = await self.db.fetchall(
            "SELECT e.node_id, e.vector, e.dim, n.ts, n.scope FROM graph_embeddings e"
            " JOIN nodes n ON n.id = e.node_id"
            " WHERE e.owner = ? AND n.owner = ? ORDER BY n.ts, n.rowid",
            (owner, owner),
        )
        if not rows:
            return None
        dim = int(rows[0]["dim"])
        vectors = _OwnerVectors(dim, capacity=len(rows) + 64)
        for row in rows:
            if int(row["dim"]) != dim:
                raise EmbeddingModelMismatch(
                    f"vectors of two sizes stored for one owner ({dim}, {row['dim']})"
                )
            vectors.append(
                row["node_id"],
                np.frombuffer(row["vector"], dtype=np.float32),
                row["ts"],
                row["scope"],
            )
        self._cache[owner] = vectors
        self._cached_rows += vectors.n
        self._evict()
        return vectors

    def _evict(self) -> None:
        while self._cached_rows > self.max_cached_rows and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_rows -= dropped.n

    def _drop(self, owner: str | None = None) -> None:
        if owner is None:
            self._cache.clear()
            self._cached_rows = 0
        elif (dropped := self._cache.pop(owner, None)) is not None:
            self._cached_rows -= dropped.n

    def cache_info(self) -> dict[str, int]:
        return {
            "owners": len(self._cache),
            "rows": sum(v.n for v in self._cache.values()),
            "bytes": sum(v.nbytes for v in self._cache.values()),
        }

    async def vector_search(
        self,
        owner: str,
        vector: np.ndarray,
        *,
        k: int,
        scopes: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        at: datetime | None = None,
    ) -> list[tuple[str, float]]:
        vectors = await self._owner_vectors(owner)
        if vectors is None:
            return []
        query = _as_vector(vector)
        if query.shape[0] != vectors.dim:
            raise EmbeddingModelMismatch(
                f"query vector has {query.shape[0]} dimensions, stored vectors {vectors.dim}"
            )
        return vectors.search(query, k, scopes, exclude, to_ts(at) if at else None)

    async def text_search(
        self,
        owner: str,
        query: str,
        *,
        k: int,
        scopes: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        at: datetime | None = None,
        stop_words: Iterable[str] = (),
    ) -> list[tuple[str, float]]:
        expression = fts_query(query, stop_words)
        if expression is None or k <= 0:
            return []
        if scopes is not None and not scopes:
            return []
        excluded = set(exclude)
        # bm25 is computed for the owner's latest ``FTS_WINDOW`` matching rows only (FTS5
        # walks the doclist newest first and stops): a common word costs the same at 1k
        # or 100k messages, and chat memory favours the recent anyway.
        sql = (
            "SELECT n.id, f.relevance FROM ("
            "  SELECT rowid AS rid, -bm25(nodes_fts, 0.0, 1.0) AS relevance FROM nodes_fts"
            "  WHERE nodes_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            ") AS f JOIN nodes n ON n.rowid = f.rid WHERE n.owner = ?"
        )
        params: list[Any] = [
            f"otok : {owner_token(owner)} AND content : ({expression})",
            FTS_WINDOW,
            owner,
        ]
        if scopes is not None:
            sql += f" AND n.scope IN ({', '.join('?' * len(scopes))})"
            params.extend(scopes)
        if at is not None:
            sql += " AND n.ts <= ?"
            params.append(to_ts(at))
        sql += " ORDER BY f.relevance DESC LIMIT ?"
        params.append(k + len(excluded))
        rows = await self.db.fetchall(sql, params)
        return [(r[0], float(r[1])) for r in rows if r[0] not in excluded][:k]

    async def edges(self, owner: str, node_ids: Sequence[str]) -> list[Edge]:
        if not node_ids:
            return []
        edges: dict[tuple[str, str, str], Edge] = {}
        ids = list(dict.fromkeys(node_ids))
        for start in range(0, len(ids), 400):
            chunk = ids[start : start + 400]
            marks = ", ".join("?" * len(chunk))
            rows = await self.db.fetchall(
                "SELECT from_id, to_id, relation_type, strength, explanation FROM graph_connections"
                f" WHERE owner = ? AND from_id IN ({marks})"
                " UNION ALL "
                "SELECT from_id, to_id, relation_type, strength, explanation FROM graph_connections"
                # "+owner": look rows up by to_id's index, then check the owner (the
                # planner would otherwise scan every edge of the owner).
                f" WHERE +owner = ? AND to_id IN ({marks})",
                (owner, *chunk, owner, *chunk),
            )
            for r in rows:
                edges[(r[0], r[1], r[2])] = Edge(r[0], r[1], r[2], float(r[3]), r[4])
        return list(edges.values())

    async def get_nodes(self, owner: str, node_ids: Sequence[str]) -> dict[str, MemoryNode]:
        """Nodes by id, the owner's only. Looked up by primary key, then the owner is
        checked ("+owner" keeps SQLite from scanning the owner's whole history)."""
        found: dict[str, MemoryNode] = {}
        ids = list(dict.fromkeys(node_ids))
        for start in range(0, len(ids), 400):
            chunk = ids[start : start + 400]
            rows = await self.db.fetchall(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE id IN ({', '.join('?' * len(chunk))})"
                " AND +owner = ?",
                (*chunk, owner),
            )
            for row in rows:
                found[row["id"]] = node_from_row(row)
        return found

    async def connections_of(self, owner: str, node_id: str) -> list[Connection]:
        """Outgoing connections of one node, strongest first."""
        rows = await self.db.fetchall(
            "SELECT to_id, relation_type, strength, explanation FROM graph_connections"
            " WHERE owner = ? AND from_id = ? ORDER BY strength DESC",
            (owner, node_id),
        )
        return [Connection(r[0], r[1], float(r[2]), r[3]) for r in rows]

    async def vectors(self, owner: str, node_ids: Sequence[str]) -> dict[str, np.ndarray]:
        cached = self._cache.get(owner)
        out: dict[str, np.ndarray] = {}
        missing = []
        for node_id in node_ids:
            i = cached.index.get(node_id) if cached is not None else None
            if i is not None and cached is not None:
                out[node_id] = cached.matrix[i]
            else:
                missing.append(node_id)
        for start in range(0, len(missing), 400):
            chunk = missing[start : start + 400]
            rows = await self.db.fetchall(
                f"SELECT node_id, vector FROM graph_embeddings WHERE owner = ? AND node_id IN ({', '.join('?' * len(chunk))})",
                (owner, *chunk),
            )
            for r in rows:
                out[r[0]] = np.frombuffer(r[1], dtype=np.float32)
        return out

    async def node_count_with_vectors(self, owner: str) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) FROM graph_embeddings WHERE owner = ?", (owner,)
        )
        return int(row[0]) if row else 0

    # -- export / forget ---------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        rows = await self.db.fetchall(
            "SELECT from_id, to_id, relation_type, strength, explanation FROM graph_connections"
            " WHERE owner = ? ORDER BY from_id, to_id, relation_type",
            (owner,),
        )
        return [
            {
                "from": r[0],
                "to": r[1],
                "relation_type": r[2],
                "strength": round(float(r[3]), 4),
                "explanation": r[4],
            }
            for r in rows
        ]

    async def delete_owner(self, owner: str) -> int:
        removed = 0
        async with self.db.transaction() as conn:
            for table in ("graph_connections", "graph_tags", "graph_embeddings"):
                cur = await conn.execute(f"DELETE FROM {table} WHERE owner = ?", (owner,))
                removed += cur.rowcount or 0
        self._drop(owner)
        return removed


def _write_graph_rows(
    raw: sqlite3.Connection,
    node: MemoryNode,
    vector: np.ndarray | None,
    model: str,
    connections: Sequence[Connection],
) -> None:
    """A stored node's vector, tag postings and outgoing edges (database thread, inside
    the caller's transaction)."""
    ts = to_ts(node.timestamp)
    if vector is not None:
        raw.execute(
            "INSERT OR REPLACE INTO graph_embeddings(node_id, owner, model, dim, vector)"
            " VALUES (?, ?, ?, ?, ?)",
            (node.id, node.owner, model, int(np.asarray(vector).shape[-1]), _blob(vector)),
        )
    tags = list(dict.fromkeys(node.tags))
    if tags:
        raw.executemany(
            "INSERT OR IGNORE INTO graph_tags(owner, tag, ts, node_id, ntags) VALUES (?, ?, ?, ?, ?)",
            [(node.owner, tag, ts, node.id, len(tags)) for tag in tags],
        )
    edges = [
        (
            node.owner,
            node.id,
            c.node_id,
            c.relation_type,
            float(c.strength),
            c.explanation,
            c.node_id,
            node.owner,
        )
        for c in connections
        if c.node_id != node.id
    ]
    if edges:
        raw.executemany(
            "INSERT OR REPLACE INTO graph_connections"
            "(owner, from_id, to_id, relation_type, strength, explanation)"
            " SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS"
            # The target must be the same owner's node: never an edge across people.
            " (SELECT 1 FROM nodes WHERE id = ? AND owner = ?)",
            edges,
        )


def _as_vector(vector: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(-1))


def _blob(vector: np.ndarray) -> bytes:
    return _as_vector(vector).tobytes()
