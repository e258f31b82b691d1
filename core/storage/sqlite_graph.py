"""The memory graph's storage: embeddings, connections, tag postings and full-text search.

Schema versions 10-19 (core.storage.sqlite_schema). Every query filters by owner here, in the storage layer:

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

Vector search runs in numpy over a per-owner float32 matrix cached in memory
(core.storage.vector_cache), appended to on insert and bounded by an LRU over owners.
The write functions are in core.storage.sqlite_rows (the writer process loads them).
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from core.storage.api import GraphStore
from core.storage.database import Database
from core.storage.graph_records import (
    EDGE_COLUMNS,
    Edge,
    EmbeddingModelMismatch,
    NodePlace,
    edges_export,
)
from core.storage.latest_nodes import chat_rows, latest_rows, node_from_kept
from core.storage.loading import LoadGuard
from core.storage.owner_changes import EVERY_OWNER, announced, record_change_in
from core.storage.owner_words import MAX_QUERY_WORDS, query_terms
from core.storage.records import (
    Connection,
    MemoryNode,
    count_shared_tags,
    from_ts,
    node_from_row,
    to_ts,
)
from core.storage.sqlite_nodes import SQLiteNodeStore
from core.storage.sqlite_rows import (
    NODE_COLUMNS,
    NodeWrite,
    storable_connections,
    write_completion,
    write_node,
    write_second_vectors,
    write_second_vectors_announced,
)
from core.storage.sqlite_schema import GRAPH_MIGRATIONS as MIGRATIONS
from core.storage.vector_cache import (
    EXACT_SEARCH_MAX_ROWS,
    RESCORE_FACTOR,
    RESCORE_MIN,
    RESCORE_SHARE,
    OwnerVectors,
    SecondVectors,
    as_vector,
    blob,
    second_matrix,
)

# Kept importable from here (they moved to their own modules).
_OwnerVectors = OwnerVectors
__all__ = [
    "EXACT_SEARCH_MAX_ROWS",
    "MIGRATIONS",
    "RESCORE_FACTOR",
    "RESCORE_MIN",
    "RESCORE_SHARE",
    "Edge",
    "EmbeddingModelMismatch",
    "GraphStore",
    "NodePlace",
    "SQLiteGraphStore",
]

MAX_COUNTED_OWNERS = 100_000  # owners whose node count is kept in memory

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


# The full-text window's nodes, looked up by rowid. CROSS JOIN makes SQLite walk the
# rowids first: left to itself it may read the owner's index instead, visiting every
# row of the person's history on each search.
WINDOW_ROWS_SQL = (
    "SELECT json_group_array(json_array(n.rowid, n.id, n.ts, n.scope, n.ts <= ?))"
    " FROM json_each(?) AS w CROSS JOIN nodes AS n ON n.rowid = w.value"
    " WHERE n.owner = ?"
)


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


class SQLiteGraphStore(GraphStore):
    def __init__(
        self, db: Database, nodes: SQLiteNodeStore, *, max_cached_rows: int = 400_000
    ) -> None:
        self.db = db
        self.nodes = nodes
        # LRU of owners' matrices, bounded by rows (400k x 384 float32 ~ 600 MB worst case;
        # a typical chat user has a few thousand rows). The newest owner always stays.
        self.max_cached_rows = max_cached_rows
        self._cache: OrderedDict[str, OwnerVectors] = OrderedDict()
        self._cached_rows = 0
        self._model: tuple[str, int] | None = None
        self._documents: OrderedDict[str, int] = OrderedDict()
        # A node stored while its owner's cache was loading may be missing from what the
        # load read: such a load is used once, not kept.
        self._loads = LoadGuard()
        self._second = SecondVectors(max_cached_rows)
        self._second_loads = LoadGuard()

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
                [(nid, owner, model, len(v), blob(v)) for nid, owner, v in rows],
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
        entities: Sequence[str] = (),
    ) -> bool:
        """See :meth:`GraphStore.add_node`. ``announce``: record the change for the
        other processes sharing the database, in the same transaction (see
        core.storage.owner_changes), so they drop what they keep of the owner: for nodes
        that do not come from the process serving the person (imports). A new message of
        the person served is not announced: only that process keeps that person's
        caches, and they are kept up to date here."""
        # Node, vector, tags and edges in one transaction AND one round trip to the
        # database thread: the write lock is held for a single hop per message.
        rows = NodeWrite.of(node, vector, model, connections, entities)
        stored = await self.db.run(
            announced(functools.partial(write_node, rows=rows), node.owner, announce=announce)
        )
        if not stored:
            return False
        self.nodes.stored(node)
        self._loads.wrote(node.owner)
        if node.owner in self._documents:
            self._documents[node.owner] += 1
        self._keep(node, vector, connections)
        return True

    async def complete_node(
        self,
        node: MemoryNode,
        *,
        vector: np.ndarray,
        model: str,
        connections: Sequence[Connection] = (),
        announce: bool = False,
        entities: Sequence[str] = (),
    ) -> bool:
        """See :meth:`GraphStore.complete_node`; ``announce`` as :meth:`add_node`'s. The
        kept matrix takes the vector and edges as :meth:`add_node` would have."""
        rows = NodeWrite.of(node, vector, model, connections, entities)
        completed = await self.db.run(
            announced(functools.partial(write_completion, rows=rows), node.owner, announce=announce)
        )
        if not completed:
            return False
        self.nodes.retagged(node.owner, node.id, rows.params.tags)
        self._loads.wrote(node.owner)
        self._keep(node, vector, connections)
        return True

    def _keep(
        self, node: MemoryNode, vector: np.ndarray | None, connections: Sequence[Connection]
    ) -> None:
        """The owner's kept matrix after ``node`` was stored with ``vector`` and
        ``connections`` (or given them later, :meth:`complete_node`)."""
        cached = self._cache.get(node.owner)
        if cached is None:
            return
        edges = storable_connections(node, connections)
        if vector is None:
            # The matrix holds the nodes with a vector, and their edges: a node without
            # either leaves it as it is (its vector may come later, complete_node).
            if edges:
                self._drop(node.owner)
            return
        before = cached.rows
        cached.add_node(node, vector, edges)
        self._cached_rows += cached.rows - before
        self._cache.move_to_end(node.owner)
        self._evict()

    # -- reads -------------------------------------------------------------------------

    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        until, skip = to_ts(at), exclude or ""
        kept = await self.nodes.latest_matching(owner, 1, latest_rows(at, exclude, node_type))
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
        kept = await self.nodes.latest_matching(
            owner, limit, chat_rows(chat_id, at, since), since=to_ts(since)
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
                count_shared_tags(
                    found, json.loads(raw.execute(sql, (owner, per_tag, *chunk)).fetchone()[0])
                )
            return found

        # Bounded by ``per_tag`` rows a tag: a lookup.
        return await self.db.run(read, write=False, lookup=True) if unique else {}

    async def _entity_mentions(
        self,
        owner: str,
        entities: list[str],
        per_entity: int,
        scopes: list[str] | None,
        until: float,
    ) -> dict[str, list[str]]:
        def read(raw: sqlite3.Connection) -> dict[str, list[str]]:
            # The latest ``per_entity`` postings of each entity: one index range each.
            found: dict[str, list[str]] = {}
            scope_filter = (
                f" AND scope IN ({','.join('?' * len(scopes))})" if scopes is not None else ""
            )
            for entity in entities:
                rows = raw.execute(
                    "SELECT node_id FROM graph_entities WHERE owner = ? AND entity = ?"
                    f" AND ts <= ?{scope_filter} ORDER BY ts DESC LIMIT ?",
                    (owner, entity, until, *(scopes or ()), per_entity),
                ).fetchall()
                if rows:
                    found[entity] = [r[0] for r in rows]
            return found

        return await self.db.run(read, write=False, lookup=True)

    async def _owner_vectors(self, owner: str) -> OwnerVectors | None:
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
        vectors = OwnerVectors(dim, capacity=len(rows) + 64)
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

    # -- second vectors ----------------------------------------------------------------

    async def add_second_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, announce: bool = False
    ) -> int:
        if not rows:
            return 0
        given = {(nid, owner): as_vector(v) for nid, owner, v in rows}  # the last one wins
        values = [(nid, owner, int(v.shape[0]), blob(v)) for (nid, owner), v in given.items()]
        write = (
            functools.partial(
                write_second_vectors_announced, model=model, rows=values, at=time.time()
            )
            if announce
            else functools.partial(write_second_vectors, model=model, rows=values)
        )
        stored = await self.db.run(write)
        owners: dict[str, list[tuple[str, np.ndarray, float, str]]] = {}
        for node_id, owner, ts, scope in stored:
            owners.setdefault(owner, []).append((node_id, given[(node_id, owner)], ts, scope))
        for owner, written in owners.items():
            self._second_loads.wrote(owner)
            self._second.append(owner, model, written)
        return len(stored)

    async def _second_vectors(self, owner: str, model: str) -> OwnerVectors | None:
        kept = self._second.get(owner, model)
        if kept is not None:
            return kept

        def read(raw: sqlite3.Connection) -> list[Any]:
            return raw.execute(
                "SELECT e.node_id, e.vector, e.dim, n.ts, n.scope FROM graph_second_embeddings e"
                " JOIN nodes n ON n.id = e.node_id"
                " WHERE e.owner = ? AND e.model = ? AND n.owner = ? ORDER BY n.ts, n.rowid",
                (owner, model, owner),
            ).fetchall()

        rows, raced = await self._second_loads.load(owner, self.db.run(read, write=False))
        vectors = second_matrix(
            [(i, np.frombuffer(v, dtype=np.float32), d, ts, sc) for i, v, d, ts, sc in rows]
        )
        if vectors is not None and not raced:
            self._second.keep(owner, model, vectors)
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
        self._second.drop(owner)
        self._second_loads.wrote(owner)
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
                raw.execute(WINDOW_ROWS_SQL, (until, json.dumps(rowids), owner)).fetchone()[0]
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
            f"SELECT {EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = ? ORDER BY from_id, to_id, relation_type",
            (owner,),
        )
        return edges_export(rows)

    async def delete_owner(self, owner: str) -> int:
        removed = 0
        async with self.db.transaction() as conn:
            for table in (
                "graph_connections",
                "graph_tags",
                "graph_entities",
                "graph_embeddings",
                "graph_second_embeddings",
            ):
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
