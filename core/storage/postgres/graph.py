"""The memory graph in PostgreSQL: vectors, typed edges, tag postings, full-text search.

Every query filters by owner. Vectors are pgvector's ``vector`` (schema 80). A person
this process does not serve is searched in PostgreSQL (pgvector's ``<#>``, exact, through
the owner's index). A person it serves (it was granted their lock,
core.storage.postgres.locks) is searched in numpy over the matrix it keeps of them
(core.storage.vector_cache, as with SQLite): their recall walk reads the same kept edges,
and a message searches their vectors two or three times, each a round trip otherwise.
The matrix is brought up to date before each search by one indexed query for the
owner's nodes stored since (``seq`` above the last one seen), none while their node
version says nothing was written: another process may have served the person
meanwhile. Changes that are not new nodes (forgetting, re-embedding) come as owner
changes (``NOTIFY``) and drop the owner's matrix. Full-text search is PostgreSQL's own
(``tsvector``, Portuguese and English stems, accents removed; see
core.storage.postgres.schema)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from core.storage.api import GraphStore
from core.storage.graph_records import (
    EDGE_COLUMNS,
    Edge,
    EmbeddingModelMismatch,
    NodePlace,
    edges_export,
    storable_connections,
)
from core.storage.latest_nodes import chat_rows, latest_rows, node_from_kept
from core.storage.owner_words import search_words
from core.storage.postgres.changes import CHANNEL, notify
from core.storage.postgres.database import ConnectionPool, PgDatabase, affected
from core.storage.postgres.nodes import (
    BUMP_VERSION,
    INSERT_NODE,
    NODE_COLUMNS,
    PgNodeStore,
    node_args,
)
from core.storage.postgres.postings import WHOLE_ROWS, KeptPostings, OwnerPostings
from core.storage.records import (
    EVERY_OWNER,
    Connection,
    MemoryNode,
    count_shared_tags,
    from_ts,
    node_from_row,
    node_params,
    to_ts,
)
from core.storage.vector_cache import OwnerVectors, SecondVectors, as_vector, second_matrix

_EDGE_COLUMNS = EDGE_COLUMNS


def _beside_node(
    *,
    vector: str,
    dim: str,
    model: str,
    tags: str,
    edges: tuple[str, str, str, str],
    entities: str,
    ts: str,
    scope: str,
    announce: str,
    channel: str,
    only_with_vector: bool,
) -> str:
    """The statements that write what is stored beside a node (the CTE ``node`` gives
    it): its vector, tag and entity postings, edges, the change announced and the
    owner's node version bumped; each argument names the parameter or column that holds
    it. ``$1`` is the node's id and ``$2`` its owner in both statements."""
    with_vector = f" WHERE {vector}::vector IS NOT NULL" if only_with_vector else ""
    targets, relations, strengths, explanations = edges
    return f"""vector AS (
    INSERT INTO graph_embeddings(node_id, owner, model, dim, vector)
    SELECT $1, $2, {model}, {dim}, {vector} FROM node{with_vector}
    ON CONFLICT (node_id) DO UPDATE SET
        model = EXCLUDED.model, dim = EXCLUDED.dim, vector = EXCLUDED.vector
),
tags AS (
    INSERT INTO graph_tags(owner, tag, ts, node_id, ntags)
    SELECT $2, t, {ts}, $1, cardinality({tags}::text[]) FROM node, unnest({tags}::text[]) AS t
    ON CONFLICT DO NOTHING
),
entities AS (
    INSERT INTO graph_entities(owner, entity, ts, node_id, scope)
    SELECT $2, e, {ts}, $1, {scope} FROM node, unnest({entities}::text[]) AS e
    ON CONFLICT DO NOTHING
),
edges AS (
    -- The target must be the same owner's node: never an edge across people. Each
    -- target's owner by its primary key (a subplan): a semi-join's generic plan read
    -- every node of the owner's instead, growing with their history.
    INSERT INTO graph_connections(owner, from_id, to_id, relation_type, strength, explanation)
    SELECT $2, $1, e.to_id, e.relation, e.strength, e.explanation
    FROM node, unnest({targets}::text[], {relations}::text[], {strengths}::float8[],
        {explanations}::text[]) AS e(to_id, relation, strength, explanation)
    WHERE (SELECT n.owner FROM nodes n WHERE n.id = e.to_id) = $2
    ON CONFLICT (owner, from_id, to_id, relation_type) DO UPDATE SET
        strength = EXCLUDED.strength, explanation = EXCLUDED.explanation
),
announced AS (SELECT pg_notify({channel}, $2) FROM node WHERE {announce}),
bumped AS ({BUMP_VERSION.format(changed="node")})
SELECT seq, (SELECT node_version FROM bumped) FROM node, (SELECT count(*) FROM announced) AS a
"""


# $1-$14 the node (core.storage.postgres.nodes.node_args), $15 the vector or NULL,
# $16 its dimension, $17 model, $18 tags, $19-$22 edges (targets, relations, strengths,
# explanations), $23 whether to announce the change, $24 the channel, $25 entities.
ADD_NODE = f"""
WITH node AS ({INSERT_NODE}),
{
    _beside_node(
        vector="$15",
        dim="$16",
        model="$17",
        tags="$18",
        edges=("$19", "$20", "$21", "$22"),
        entities="$25",
        ts="$5",
        scope="$8",
        announce="$23",
        channel="$24",
        only_with_vector=True,
    )
}"""
# What ADD_NODE writes beside a node, for one stored without it ($1 its id, $2 owner):
# the row's tags ($5, JSON as node_args gives them), $3 the vector, $4 its dimension,
# $6 model, $7 tags, $8-$11 edges, $12 entities, $13 whether to announce, $14 the
# channel. Nothing when the owner has no such node (forgotten meanwhile).
COMPLETE_NODE = f"""
WITH node AS (
    UPDATE nodes SET tags = $5 WHERE id = $1 AND owner = $2 RETURNING ts, scope, seq
),
{
    _beside_node(
        vector="$3",
        dim="$4",
        model="$6",
        tags="$7",
        edges=("$8", "$9", "$10", "$11"),
        entities="$12",
        ts="node.ts",
        scope="node.scope",
        announce="$13",
        channel="$14",
        only_with_vector=False,
    )
}"""
# The latest $3 postings of each tag of $2 (kind 0, with the node's tag count) and the
# latest $6 of each entity of $4 at or before $5 (kind 1, by the entity's place in $4).
_TAGS_AND_ENTITIES = """
SELECT 0 AS kind, 0::bigint AS i, p.node_id, p.ntags, 0::float8 AS ts
FROM unnest($2::text[]) AS q(tag)
CROSS JOIN LATERAL (SELECT node_id, ntags FROM graph_tags
    WHERE owner = $1 AND tag = q.tag ORDER BY ts DESC LIMIT $3) AS p
UNION ALL
SELECT 1, q.i, p.node_id, 0, p.ts
FROM unnest($4::text[]) WITH ORDINALITY AS q(entity, i)
CROSS JOIN LATERAL (SELECT node_id, ts FROM graph_entities
    WHERE owner = $1 AND entity = q.entity AND ts <= $5 ORDER BY ts DESC LIMIT $6) AS p
ORDER BY kind, i, ts DESC
"""
# The same for the postings kept of a person served (core.storage.postgres.postings):
# every entity's latest $6 whatever their time and scope, each with its time and scope,
# and the person's node version in the same snapshot (kind 2).
_POSTINGS = """
SELECT 0 AS kind, q.i, p.node_id, p.ntags, p.ts, '' AS scope
FROM unnest($2::text[]) WITH ORDINALITY AS q(tag, i)
CROSS JOIN LATERAL (SELECT node_id, ntags, ts FROM graph_tags
    WHERE owner = $1 AND tag = q.tag ORDER BY ts DESC LIMIT $3) AS p
UNION ALL
SELECT 1, q.i, p.node_id, 0, p.ts, p.scope
FROM unnest($4::text[]) WITH ORDINALITY AS q(entity, i)
CROSS JOIN LATERAL (SELECT node_id, ts, scope FROM graph_entities
    WHERE owner = $1 AND entity = q.entity ORDER BY ts DESC LIMIT $5) AS p
UNION ALL
SELECT 2, node_version, NULL, 0, 0, '' FROM users WHERE key = $1
"""
# Every posting of a person, at most $2 of each kind, with their node version (kind 2).
_WHOLE_POSTINGS = """
(SELECT 0 AS kind, tag AS key, node_id, ntags, ts, '' AS scope FROM graph_tags
    WHERE owner = $1 LIMIT $2)
UNION ALL
(SELECT 1, entity, node_id, 0, ts, scope FROM graph_entities WHERE owner = $1 LIMIT $2)
UNION ALL
SELECT 2, node_version::text, NULL, 0, 0, '' FROM users WHERE key = $1
"""
# A person's nodes stored after seq $2, each with its vector and outgoing edges (edges
# are written with their source node, never later): the recall walk then reads them
# from memory, as with SQLite. The row comparison walks the (owner, seq) index from the
# last one seen (usually none new: one index probe; a join over every vector of the
# owner would grow with their history).
_NEW_VECTORS = (
    "SELECT n.id AS node_id, e.vector, e.dim, n.ts, n.scope, n.seq,"
    " (SELECT json_agg(json_build_array(c.to_id, c.relation_type, c.strength,"
    "  c.explanation)) FROM graph_connections c"
    "  WHERE c.owner = $1 AND c.from_id = n.id) AS edges"
    " FROM nodes n LEFT JOIN LATERAL (SELECT vector, dim FROM graph_embeddings"
    "  WHERE node_id = n.id AND owner = $1) AS e ON true"
    " WHERE (n.owner, n.seq) > ($1, $2) AND n.owner = $1"
)
# A person served again after another process wrote to their nodes, in one statement
# (one snapshot, their node version with it): their latest $3 nodes (part 0, as the node
# store reads them, core.storage.postgres.nodes), their nodes after seq $2 with vectors
# and edges (part 1, as _NEW_VECTORS) and every posting, at most $4 of each kind (parts
# 2 and 3, as _WHOLE_POSTINGS). Columns: part, version, the node's columns and seq,
# vector, dim, edges, the posting's tag or entity, the node's tag count.
_CATCH_UP = f"""
SELECT 0 AS part, v.version, n.*, NULL::vector AS vector, NULL::int AS dim,
    NULL::text AS edges, NULL::text AS key, NULL::int AS ntags
FROM (SELECT (SELECT node_version FROM users WHERE key = $1) AS version) AS v
LEFT JOIN LATERAL (SELECT {NODE_COLUMNS}, seq FROM nodes
    WHERE owner = $1 ORDER BY ts DESC, seq DESC LIMIT $3) AS n ON true
UNION ALL
SELECT 1, NULL, x.node_id, NULL, NULL, NULL, x.ts, NULL, NULL, x.scope, NULL, NULL, NULL,
    NULL, NULL, NULL, x.seq, x.vector, x.dim, x.edges::text, NULL, NULL
FROM ({_NEW_VECTORS}) AS x
UNION ALL
(SELECT 2, NULL, node_id, NULL, NULL, NULL, ts, NULL, NULL, '', NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, tag, ntags FROM graph_tags WHERE owner = $1 LIMIT $4)
UNION ALL
(SELECT 3, NULL, node_id, NULL, NULL, NULL, ts, NULL, NULL, scope, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, entity, 0 FROM graph_entities WHERE owner = $1 LIMIT $4)
ORDER BY part, ts DESC, seq DESC
"""
NO_NEW_SEQ = 2**62  # _CATCH_UP's $2 when the person's vectors are not asked for
FTS_WINDOW = 500  # latest matching nodes of the owner ranked per full-text search
# Postings kept of each tag and entity of a person served: as many as a new node's
# connections read (core.memory.connections: tag_per_tag, entity_common); a caller
# asking for more is answered by PostgreSQL.
KEPT_PER_TAG = 50
# Recall asks for an entity's latest 200 mentions in the message's scopes
# (core.memory.search.SearchConfig.entity_postings): kept that deep, a person's message
# finds them here too (fewer in those scopes than asked: PostgreSQL answers).
KEPT_PER_ENTITY = 200
FOUND_OWNERS = 256  # people whose vectors found by PostgreSQL's searches are remembered
FOUND_PER_OWNER = 512  # vectors remembered per person, the latest search's first


def _tsquery(query: str, stop_words: Iterable[str]) -> str | None:
    """``a | b | c`` from the query's words (:func:`search_words`: letters and digits
    only, so nothing of the text is read as query syntax)."""
    return " | ".join(search_words(query, stop_words)) or None


class _Cached:
    """An owner's matrix and edges, the newest ``seq`` they hold, and the owner's node
    version they are current at (None: unknown)."""

    __slots__ = ("seq", "unwalkable", "vectors", "version")

    def __init__(self, vectors: OwnerVectors | None, seq: int) -> None:
        self.vectors = vectors
        self.seq = seq
        self.version: int | None = None
        self.unwalkable = False  # a node without a vector was seen before the matrix

    @property
    def rows(self) -> int:
        return self.vectors.rows if self.vectors is not None else 0


class PgGraphStore(GraphStore):
    def __init__(
        self,
        db: PgDatabase,
        *,
        max_cached_rows: int = 400_000,
        nodes: PgNodeStore | None = None,
    ) -> None:
        self.db = db
        # The node store keeping the latest nodes of the people being served.
        self.nodes = nodes if nodes is not None else PgNodeStore(db)
        self.nodes.moved_without_node.append(self._moved_without_node)
        self.max_cached_rows = max_cached_rows
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cached_rows = 0
        self._model: tuple[str, int] | None = None
        # The vectors PostgreSQL's searches returned lately, per owner: recall asks for
        # the found nodes' vectors next (centring), a round trip otherwise. A stored
        # vector never changes (re-embedding and forgetting drop these).
        self._found: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        # Second vectors of the people searched lately (core.storage.vector_cache): a
        # person is served by one process at a time, which writes them through here; a
        # change from elsewhere (an import, forgetting) comes as an owner change. One
        # written by another process that served the person meanwhile is missed until
        # the matrix is dropped: that node is then found by the other lists only.
        self._second = SecondVectors(max_cached_rows)
        # The latest tag and entity postings of the people being served (each node
        # stored asks for them: core.storage.postgres.postings).
        self._postings = KeptPostings()
        # A person's latest nodes read again bring what is kept here of them with them.
        self.nodes.read_latest = self._catch_up
        # Nodes this process stored without a vector or edges, by owner, until their
        # complete_node: the matrix need not give up walks for them.
        self._without_vector: dict[str, set[str]] = {}

    # -- model -------------------------------------------------------------------------

    async def check_model(self, model: str, dim: int) -> None:
        if self._model == (model, dim):
            return
        row = await self.db.fetchrow(
            "SELECT model, dim FROM graph_embeddings WHERE model <> $1 OR dim <> $2 LIMIT 1",
            model,
            dim,
        )
        if row is not None:
            raise EmbeddingModelMismatch(
                f"the memory database holds vectors of embedding model {row['model']!r} "
                f"(dim {row['dim']}), but {model!r} (dim {dim}) is configured. Configure "
                f"{row['model']!r} again (AKIRA_EMBEDDING__BACKEND / AKIRA_EMBEDDING__MODEL), "
                "or re-embed every stored node with the new model (GraphMemory.reembed)."
            )
        await self.db.execute(
            "INSERT INTO graph_meta(key, value) VALUES ('embedding_model', $1)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            f"{model}:{dim}",
        )
        self._model = (model, dim)

    async def replace_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, first: bool
    ) -> None:
        async with self.db.transaction() as conn:
            if first:
                await conn.execute("DELETE FROM graph_embeddings WHERE model <> $1", model)
            if rows:
                # Only a node of that owner gets one (no foreign key says so: schema 82).
                await conn.executemany(
                    "INSERT INTO graph_embeddings(node_id, owner, model, dim, vector)"
                    " SELECT $1, $2, $3, $4, $5 FROM nodes WHERE id = $1 AND owner = $2"
                    " ON CONFLICT (node_id) DO UPDATE SET"
                    " owner = EXCLUDED.owner, model = EXCLUDED.model, dim = EXCLUDED.dim,"
                    " vector = EXCLUDED.vector",
                    [(nid, owner, model, len(v), as_vector(v)) for nid, owner, v in rows],
                )
            changed = [EVERY_OWNER] if first else [owner for _, owner, _ in rows]
            await notify(conn, *changed)
        self.drop_cached(None)
        self._model = None

    async def nodes_without_vector(self, model: str, limit: int) -> list[tuple[str, str, str]]:
        rows = await self.db.fetch(
            "SELECT n.id, n.owner, n.content FROM nodes n"
            " LEFT JOIN graph_embeddings e ON e.node_id = n.id AND e.model = $1"
            " WHERE e.node_id IS NULL ORDER BY n.seq LIMIT $2",
            model,
            limit,
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
        owner = node.owner
        tags = list(dict.fromkeys(node.tags))
        edges = storable_connections(node, connections)
        if vector is None and not edges:
            # Its vector and edges may follow (complete_node): until they do, the kept
            # matrix holds all it can of the owner, and stays walkable.
            self._without_vector.setdefault(owner, set()).add(node.id)
        # One statement (atomic on its own, one round trip): the node, then from what
        # it inserted (nothing for a duplicate) its vector, tag postings and edges.
        row = await self.db.fetchrow(
            ADD_NODE,
            *node_args(node),
            None if vector is None else as_vector(vector),
            0 if vector is None else int(np.asarray(vector).shape[-1]),
            model,
            tags,
            [c.node_id for c in edges],
            [c.relation_type for c in edges],
            [float(c.strength) for c in edges],
            [c.explanation for c in edges],
            announce,
            CHANNEL,
            list(dict.fromkeys(entities)),
        )
        if row is None:
            return False
        seq, version = int(row[0]), row[1]
        self.nodes.stored(node, version)
        self._postings.stored(version, node, tags, list(dict.fromkeys(entities)))
        cached = self._cache.get(owner)
        # The next node in order: the only write since the version the cache is at (or,
        # without a version, the next seq). Otherwise the next search reads what it misses.
        by_version = cached is not None and version is not None and cached.version == version - 1
        follows = cached is not None and (
            by_version or (cached.version is None and cached.seq == seq - 1)
        )
        if cached is not None and not follows:
            cached.version = None  # the next search reads what it misses
        elif cached is not None and vector is None:
            cached.seq = max(cached.seq, seq)
            cached.version = version if by_version else None
            if edges:
                if cached.vectors is not None:
                    cached.vectors.walkable = False
                else:
                    cached.unwalkable = True
        elif cached is not None and vector is not None:
            if cached.vectors is None:
                cached.vectors = OwnerVectors(int(np.asarray(vector).shape[-1]))
            before = cached.rows
            cached.vectors.add_node(node, vector, edges)
            cached.seq = max(cached.seq, seq)
            cached.version = version if by_version else None
            self._cached_rows += cached.rows - before
            self._evict()
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
        """See :meth:`GraphStore.complete_node`: one statement, as :meth:`add_node`. The
        kept matrix takes the vector and edges when it is current at the version just
        before (it reads new nodes by ``seq``, which would not see them); otherwise it
        is read again."""
        owner = node.owner
        pending = self._without_vector.get(owner)
        if pending is not None:
            pending.discard(node.id)
            if not pending:
                del self._without_vector[owner]
        tags = list(dict.fromkeys(node.tags))
        edges = storable_connections(node, connections)
        named = list(dict.fromkeys(entities))
        tags_json = node_params(node).tags
        row = await self.db.fetchrow(
            COMPLETE_NODE,
            node.id,
            owner,
            as_vector(vector),
            int(np.asarray(vector).shape[-1]),
            tags_json,
            model,
            tags,
            [c.node_id for c in edges],
            [c.relation_type for c in edges],
            [float(c.strength) for c in edges],
            [c.explanation for c in edges],
            named,
            announce,
            CHANNEL,
        )
        if row is None:
            return False
        version = row[1]
        self.nodes.retagged(owner, node.id, tags_json, version)
        self._postings.stored(version, node, tags, named)
        cached = self._cache.get(owner)
        if cached is None:
            return True
        if version is None or cached.version != version - 1:
            self._cache.pop(owner)
            self._cached_rows -= cached.rows
            return True
        if cached.vectors is None:
            cached.vectors = OwnerVectors(int(np.asarray(vector).shape[-1]))
            cached.vectors.walkable = not cached.unwalkable
        before = cached.rows
        cached.vectors.add_node(node, vector, edges)
        cached.version = version
        self._cached_rows += cached.rows - before
        self._evict()
        return True

    # -- reads -------------------------------------------------------------------------

    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        kept = await self.nodes.latest_matching(owner, 1, latest_rows(at, exclude, node_type))
        if kept is not None:
            return (kept[0].id, from_ts(kept[0].ts)) if kept else None
        sql = "SELECT id, ts FROM nodes WHERE owner = $1 AND ts <= $2 AND id <> $3"
        args: list[Any] = [owner, to_ts(at), exclude or ""]
        if node_type is not None:
            args.append(node_type)
            sql += " AND type = $4"
        row = await self.db.fetchrow(sql + " ORDER BY ts DESC, seq DESC LIMIT 1", *args)
        return (row["id"], from_ts(row["ts"])) if row is not None else None

    async def previous_in_chat(
        self, owner: str, chat_id: str, *, at: datetime, since: datetime, limit: int = 1
    ) -> list[MemoryNode]:
        kept = await self.nodes.latest_matching(
            owner, limit, chat_rows(chat_id, at, since), since=to_ts(since)
        )
        if kept is not None:
            return [node_from_kept(row) for row in reversed(kept)]
        rows = await self.db.fetch(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE owner = $1 AND chat_id = $2"
            " AND ts <= $3 AND ts >= $4 ORDER BY ts DESC, seq DESC LIMIT $5",
            owner,
            chat_id,
            to_ts(at),
            to_ts(since),
            max(0, limit),
        )
        return [node_from_row(r) for r in reversed(rows)]

    async def tag_candidates(
        self, owner: str, tags: Sequence[str], *, per_tag: int = 50
    ) -> dict[str, tuple[int, int]]:
        unique = list(dict.fromkeys(tags))
        if not unique:
            return {}
        # Only the latest ``per_tag`` postings of each tag, all tags in one statement.
        rows = await self.db.fetch(
            "SELECT p.node_id, p.ntags FROM unnest($2::text[]) AS q(tag)"
            " CROSS JOIN LATERAL (SELECT node_id, ntags FROM graph_tags"
            "  WHERE owner = $1 AND tag = q.tag ORDER BY ts DESC LIMIT $3) AS p",
            owner,
            unique,
            per_tag,
        )
        return count_shared_tags({}, rows)

    async def tags_and_entities(
        self,
        owner: str,
        tags: Sequence[str],
        entities: Sequence[str],
        *,
        per_tag: int = 50,
        per_entity: int = 50,
        at: datetime | None = None,
    ) -> tuple[dict[str, tuple[int, int]], dict[str, list[str]]]:
        tag_list = list(dict.fromkeys(tags))
        entity_list = list(dict.fromkeys(entities)) if per_entity > 0 else []
        if not tag_list and not entity_list:
            return {}, {}
        if owner in self.db.serving and per_tag <= KEPT_PER_TAG and per_entity <= KEPT_PER_ENTITY:
            found = await self._kept_postings(owner, tag_list, entity_list, per_tag, per_entity, at)
            if found is not None:
                return found
        # Both questions in one statement (one round trip, one snapshot): each tag's and
        # each entity's latest postings, as tag_candidates and _entity_mentions read them.
        rows = await self.db.fetch(
            _TAGS_AND_ENTITIES,
            owner,
            tag_list,
            per_tag,
            entity_list,
            to_ts(at) if at is not None else math.inf,
            per_entity,
        )
        mentions: dict[str, list[str]] = {}
        for kind, i, node_id, _ntags, _ts in rows:
            if kind == 1:
                mentions.setdefault(entity_list[i - 1], []).append(node_id)
        tagged = ((node_id, ntags) for kind, _i, node_id, ntags, _ts in rows if kind == 0)
        return count_shared_tags({}, tagged), mentions

    async def _kept_postings(
        self,
        owner: str,
        tags: list[str],
        entities: list[str],
        per_tag: int,
        per_entity: int,
        at: datetime | None,
    ) -> tuple[dict[str, tuple[int, int]], dict[str, list[str]]] | None:
        """:meth:`tags_and_entities` from the postings kept of a person this process
        serves, what is not kept yet read and kept; None when the kept postings cannot
        tell (an entity asked about before the latest kept of it)."""
        kept = await self._kept(owner, tags, entities)
        if kept is None:
            return None
        until = to_ts(at) if at is not None else math.inf
        mentions = kept.mentions(entities, per_entity, until)
        if mentions is None:
            return None
        return kept.candidates(tags, per_tag), mentions

    async def _kept(self, owner: str, tags: list[str], entities: list[str]) -> OwnerPostings | None:
        """The postings kept of a person this process serves, with ``tags`` and
        ``entities`` among them (what is not kept yet is read and kept); None when
        they cannot be kept (no user row, or another write landed since)."""
        kept = self._postings.get(owner, self.db.serving.get(owner))
        if kept is None:
            kept = await self._whole_postings(owner)
            if kept is not None and kept.version == self.db.serving.get(owner):
                self._postings.keep(owner, kept)
        complete = kept is not None and kept.complete
        missing_tags = [t for t in tags if not complete and (kept is None or t not in kept.tags)]
        missing_entities = [
            e for e in entities if not complete and (kept is None or e not in kept.entities)
        ]
        if missing_tags or missing_entities:
            rows = await self.db.fetch(
                _POSTINGS,
                owner,
                missing_tags,
                KEPT_PER_TAG,
                missing_entities,
                KEPT_PER_ENTITY,
            )
            versions = [int(i) for kind, i, *_ in rows if kind == 2]
            if not versions:
                return None  # no user row: nothing is kept of them
            version = versions[0]
            if kept is not None and kept.version != version:
                # Another write landed since (a reply stored after the lock was let go):
                # what is kept is behind, and PostgreSQL answers this once.
                self._postings.drop(owner)
                return None
            if kept is None:
                kept = OwnerPostings(version, KEPT_PER_TAG, KEPT_PER_ENTITY)
            for tag in missing_tags:
                kept.tags[tag] = []
            for entity in missing_entities:
                kept.entities[entity] = []
            for kind, i, node_id, ntags, ts, scope in rows:
                if kind == 0:
                    kept.tags[missing_tags[i - 1]].append((float(ts), node_id, int(ntags)))
                elif kind == 1:
                    kept.entities[missing_entities[i - 1]].append((float(ts), node_id, scope))
            for tag in missing_tags:
                kept.tags[tag].sort()
            for entity in missing_entities:
                kept.entities[entity].sort()
            if version == self.db.serving.get(owner):
                self._postings.keep(owner, kept)
        return kept  # None: nothing asked (nothing missing) and nothing kept

    async def _whole_postings(self, owner: str) -> OwnerPostings | None:
        """Every posting of a person who has few (None: more than WHOLE_ROWS of a kind,
        or no user row)."""
        rows = await self.db.fetch(_WHOLE_POSTINGS, owner, WHOLE_ROWS + 1)
        versions = [int(key) for kind, key, *_ in rows if kind == 2]
        return _whole(rows, versions[0]) if versions else None

    async def _entity_mentions(
        self,
        owner: str,
        entities: list[str],
        per_entity: int,
        scopes: list[str] | None,
        until: float,
    ) -> dict[str, list[str]]:
        if owner in self.db.serving:
            # Recall's question while serving the person: from what is kept.
            kept = await self._kept(owner, [], entities)
            answer = kept.mentions(entities, per_entity, until, scopes) if kept else None
            if answer is not None:
                return answer
        # The latest ``per_entity`` postings of each entity, all entities in one statement.
        rows = await self.db.fetch(
            "SELECT q.entity, p.node_id FROM unnest($2::text[]) WITH ORDINALITY AS q(entity, i)"
            " CROSS JOIN LATERAL (SELECT node_id, ts FROM graph_entities"
            "  WHERE owner = $1 AND entity = q.entity AND ts <= $3"
            "  AND ($4::text[] IS NULL OR scope = ANY($4::text[]))"
            "  ORDER BY ts DESC LIMIT $5) AS p ORDER BY q.i, p.ts DESC",
            owner,
            entities,
            until,
            scopes,
            per_entity,
        )
        found: dict[str, list[str]] = {}
        for entity, node_id in rows:
            found.setdefault(entity, []).append(node_id)
        return found

    async def _catch_up(self, owner: str, limit: int) -> list[tuple[Any, ...]]:
        """The node store reads a served person's latest ``limit`` nodes again (this
        process has not seen their current version): what is kept here of them is
        behind too, and their new vectors and their postings come in the same statement
        instead of one each (a person's next message often reaches another process).
        Returns the node store's rows: version, the node's columns, seq."""
        current = self.db.serving.get(owner)
        cached = self._cache.get(owner)
        if cached is None:
            cached = _Cached(None, 0)  # all their vectors (their first search would read)
        vectors = cached.version is None or cached.version != current
        postings = self._postings.get(owner, current) is None
        rows = await self.db.fetch(
            _CATCH_UP,
            owner,
            cached.seq if vectors else NO_NEW_SEQ,
            limit,
            WHOLE_ROWS + 1 if postings else 0,
        )
        latest: list[tuple[Any, ...]] = []
        new: list[tuple[Any, ...]] = []
        posted: list[tuple[Any, ...]] = []
        for row in rows:
            part = row[0]
            if part == 0:
                latest.append(tuple(row[1:17]))
            elif part == 1:
                new.append((row[2], row[17], row[18], row[6], row[9], row[16], row[19]))
            else:
                posted.append((part - 2, row[20], row[2], row[21], row[6], row[9]))
        version = latest[0][0]
        if vectors:
            new.sort(key=lambda r: r[5])
            self._take_vectors(owner, cached, None if version is None else int(version), new)
        if postings and version is not None:
            kept = _whole(posted, int(version))
            if kept is not None and kept.version == self.db.serving.get(owner):
                self._postings.keep(owner, kept)
        return latest

    async def _owner_vectors(self, owner: str) -> OwnerVectors | None:
        cached = self._cache.get(owner)
        if cached is None:
            cached = _Cached(None, 0)
        else:
            self._cache.move_to_end(owner)
        if cached.version is not None and cached.version == self.db.serving.get(owner):
            return cached.vectors  # nobody wrote the owner's nodes since: no query
        # The owner's new nodes, with their node version (the same snapshot).
        found = await self.db.fetch(
            "SELECT v.version, x.* FROM (SELECT (SELECT node_version FROM users"
            f" WHERE key = $1) AS version) AS v LEFT JOIN LATERAL ({_NEW_VECTORS}) AS x"
            " ON true ORDER BY x.seq",
            owner,
            cached.seq,
        )
        version = found[0]["version"] if found else None
        rows = [tuple(row)[1:] for row in found if row["node_id"] is not None]
        return self._take_vectors(owner, cached, version, rows)

    def _take_vectors(
        self,
        owner: str,
        cached: _Cached,
        version: int | None,
        rows: Sequence[Sequence[Any]],
    ) -> OwnerVectors | None:
        """What is kept of ``owner``'s vectors brought up to their node version
        ``version`` by ``rows`` (their nodes after ``cached.seq`` in order: node id,
        vector, dim, ts, scope, seq, outgoing edges as JSON)."""
        if owner in self._cache or rows:
            cached.version = None if version is None else int(version)
        if rows:
            before = cached.rows
            for node_id, vector, dim, ts, scope, _seq, edges in rows:
                if vector is None:
                    if node_id in self._without_vector.get(owner, ()):
                        continue  # its vector and edges come with complete_node
                    # A node the matrix cannot hold: walks ask PostgreSQL from now on.
                    if cached.vectors is not None:
                        cached.vectors.walkable = False
                    else:
                        cached.unwalkable = True
                    continue
                if cached.vectors is None:
                    cached.vectors = OwnerVectors(int(dim), capacity=len(rows) + 64)
                    cached.vectors.walkable = not cached.unwalkable
                vectors = cached.vectors
                if int(dim) != vectors.dim:
                    raise EmbeddingModelMismatch(
                        f"vectors of two sizes stored for one owner ({vectors.dim}, {dim})"
                    )
                vectors.append(node_id, vector, ts, scope)
                for to_id, relation, strength, explanation in json.loads(edges or "[]"):
                    if to_id not in vectors.index:
                        vectors.walkable = False
                    vectors.add_edge(Edge(node_id, to_id, relation, float(strength), explanation))
            cached.seq = max(cached.seq, int(rows[-1][5]))
            if owner not in self._cache:
                self._cache[owner] = cached
            self._cached_rows += cached.rows - before
            self._evict()
        return cached.vectors

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
        """In the kept matrix for a person this process serves; in PostgreSQL with
        pgvector for anyone else (an admin tool, a CLI search, a person another process
        serves): the same results, ties aside (see the module's docstring)."""
        if owner in self.db.serving:
            return await super().vector_search(
                owner, vector, k=k, scopes=scopes, exclude=exclude, at=at, newest=newest
            )
        return await self.search_in_server(
            owner, vector, k=k, scopes=scopes, exclude=exclude, at=at, newest=newest
        )

    async def search_in_server(
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
        """:meth:`vector_search` in PostgreSQL: the owner's vectors by inner product
        (``<#>``; the cosine of unit vectors, as numpy's search computes), exact: a person
        holds a few hundred vectors, read through the owner's index (docs/storage.md)."""
        if k <= 0 or (newest is not None and newest <= 0) or (scopes is not None and not scopes):
            return []
        query = as_vector(vector)
        args: list[Any] = [owner, query]
        # The owner's vectors, with each node's time, scope and order; with ``newest``,
        # the latest that many (as the kept matrix's last rows), filtered after.
        candidates = (
            "SELECT e.node_id, e.vector, n.ts, n.scope, n.seq FROM nodes n"
            " JOIN graph_embeddings e ON e.node_id = n.id AND e.owner = $1 WHERE n.owner = $1"
        )
        if newest is not None:
            args.append(newest)
            candidates += f" ORDER BY n.seq DESC LIMIT ${len(args)}"
        where = ["true"]
        if scopes is not None:
            args.append(list(scopes))
            where.append(f"c.scope = ANY(${len(args)}::text[])")
        if at is not None:
            args.append(to_ts(at))
            where.append(f"c.ts <= ${len(args)}")
        excluded = list(dict.fromkeys(exclude))
        if excluded:
            args.append(excluded)
            where.append(f"NOT (c.node_id = ANY(${len(args)}::text[]))")
        args.append(k)
        sql = (
            f"SELECT c.node_id, -(c.vector <#> $2), c.vector FROM ({candidates}) AS c"
            f" WHERE {' AND '.join(where)} ORDER BY c.vector <#> $2, c.seq LIMIT ${len(args)}"
        )
        try:
            rows = await self.db.fetch(sql, *args)
        except asyncpg.DataError as exc:
            if "dimensions" not in str(exc):
                raise
            raise EmbeddingModelMismatch(
                f"query vector has {query.shape[0]} dimensions, unlike the stored vectors"
            ) from None
        if rows:
            found = self._found.pop(owner, {})
            if len(found) + len(rows) > FOUND_PER_OWNER:
                found = {}
            found.update((r[0], r[2]) for r in rows)
            self._found[owner] = found
            if len(self._found) > FOUND_OWNERS:
                self._found.popitem(last=False)
        return [(r[0], float(r[1])) for r in rows]

    # -- second vectors ----------------------------------------------------------------

    async def add_second_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, announce: bool = False
    ) -> int:
        if not rows:
            return 0
        # One row a (node, owner): a statement may not update one row twice.
        given = {(nid, owner): as_vector(v) for nid, owner, v in rows}
        keys = list(given)
        async with self.db.transaction() as conn:
            # Only a node of that owner gets one: never a vector across people.
            stored = await conn.fetch(
                "INSERT INTO graph_second_embeddings(node_id, owner, model, dim, vector)"
                " SELECT n.id, n.owner, $1, r.dim, r.vector::vector FROM"
                " unnest($2::text[], $3::text[], $4::int[], $5::text[]) AS r(id, owner, dim, vector)"
                " JOIN nodes n ON n.id = r.id AND n.owner = r.owner"
                " ON CONFLICT (node_id, model) DO UPDATE SET dim = EXCLUDED.dim,"
                " vector = EXCLUDED.vector"
                " RETURNING node_id, owner, (SELECT ts FROM nodes WHERE id = node_id),"
                " (SELECT scope FROM nodes WHERE id = node_id)",
                model,
                [nid for nid, _ in keys],
                [owner for _, owner in keys],
                [int(given[key].shape[0]) for key in keys],
                [_vector_text(given[key]) for key in keys],
            )
            owners = list(dict.fromkeys(r[1] for r in stored))
            if announce and owners:
                await notify(conn, *owners)
        written: dict[str, list[tuple[str, np.ndarray, float, str]]] = {}
        for node_id, owner, ts, scope in stored:
            written.setdefault(owner, []).append(
                (node_id, given[(node_id, owner)], float(ts), scope)
            )
        for owner, found in written.items():
            self._second.append(owner, model, found)
        return len(stored)

    async def _second_vectors(self, owner: str, model: str) -> OwnerVectors | None:
        kept = self._second.get(owner, model)
        if kept is not None:
            return kept
        rows = await self.db.fetch(
            "SELECT e.node_id, e.vector, e.dim, n.ts, n.scope FROM graph_second_embeddings e"
            " JOIN nodes n ON n.id = e.node_id AND n.owner = $1"
            " WHERE e.owner = $1 AND e.model = $2 ORDER BY n.ts, n.seq",
            owner,
            model,
        )
        vectors = second_matrix([tuple(row) for row in rows])
        if vectors is not None:
            self._second.keep(owner, model, vectors)
        return vectors

    def _moved_without_node(self, owner: str, version: int) -> None:
        self._postings.moved(owner, version)
        cached = self._cache.get(owner)
        if cached is not None and cached.version == version - 1:
            cached.version = version  # an emotion read: the vectors and edges are the same

    def _evict(self) -> None:
        while self._cached_rows > self.max_cached_rows and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_rows -= dropped.rows

    def drop_cached(self, owner: str | None) -> None:
        self._second.drop(owner)
        self._postings.drop(owner)
        if owner is None:
            self._cache.clear()
            self._cached_rows = 0
            self._found.clear()
            return
        self._found.pop(owner, None)
        if (dropped := self._cache.pop(owner, None)) is not None:
            self._cached_rows -= dropped.rows

    def cache_info(self) -> dict[str, int]:
        held = [c.vectors for c in self._cache.values() if c.vectors is not None]
        return {
            "owners": len(self._cache),
            "rows": sum(v.n for v in held),
            "edges": sum(v.edge_count for v in held),
            "bytes": sum(v.nbytes for v in held),
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
        terms = _tsquery(query, stop_words)
        if terms is None or k <= 0 or (scopes is not None and not scopes):
            return []
        # Only the owner's latest ``FTS_WINDOW`` matches are ranked (as SQLite does):
        # ranking every match of a common word would grow with the person's history.
        inner = "n.owner = $1 AND n.words @@ q.query"
        args: list[Any] = [owner, terms]
        if scopes is not None:
            args.append(list(scopes))
            inner += f" AND n.scope = ANY(${len(args)}::text[])"
        if at is not None:
            args.append(to_ts(at))
            inner += f" AND n.ts <= ${len(args)}"
        excluded = list(dict.fromkeys(exclude))
        if excluded:
            args.append(excluded)
            inner += f" AND NOT (n.id = ANY(${len(args)}::text[]))"
        args.append(FTS_WINDOW)
        window = len(args)
        args.append(k)
        sql = (
            "SELECT w.id, ts_rank(w.words, q.query) AS score FROM (SELECT"
            " to_tsquery('pg_catalog.portuguese', $2) || to_tsquery('pg_catalog.english', $2)"
            " AS query) AS q, LATERAL (SELECT n.id, n.words, n.ts, n.seq FROM nodes n"
            f" WHERE {inner} ORDER BY n.ts DESC, n.seq DESC LIMIT ${window}) AS w"
            f" ORDER BY score DESC, w.ts DESC, w.seq DESC LIMIT ${len(args)}"
        )
        rows = await self.db.fetch(sql, *args)
        return [(row["id"], float(row["score"])) for row in rows if row["score"] > 0]

    async def edges(self, owner: str, node_ids: Sequence[str]) -> list[Edge]:
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return []
        return _edges(await self._edge_rows(self.db.pool, owner, ids))

    @staticmethod
    async def _edge_rows(
        conn: ConnectionPool | asyncpg.Connection, owner: str, ids: list[str]
    ) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            f"SELECT {_EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = $1 AND from_id = ANY($2::text[])"
            f" UNION ALL SELECT {_EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = $1 AND to_id = ANY($2::text[])",
            owner,
            ids,
        )
        return rows

    async def neighbours(
        self, owner: str, node_ids: Sequence[str]
    ) -> tuple[list[Edge], dict[str, NodePlace]]:
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return [], {}
        cached = self._cache.get(owner)
        if cached is not None and cached.vectors is not None and cached.vectors.walkable:
            # As fresh as the owner's last vector search (a recall's seeds, just before).
            self._cache.move_to_end(owner)
            return cached.vectors.neighbours(ids)
        # Edges and where their ends were said, in one statement (one snapshot).
        rows = await self.db.fetch(
            "SELECT e.from_id, e.to_id, e.relation_type, e.strength, e.explanation,"
            " f.ts, f.scope, t.ts, t.scope FROM ("
            f"SELECT {_EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = $1 AND from_id = ANY($2::text[])"
            f" UNION SELECT {_EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = $1 AND to_id = ANY($2::text[])) AS e"
            " LEFT JOIN nodes f ON f.id = e.from_id AND f.owner = $1"
            " LEFT JOIN nodes t ON t.id = e.to_id AND t.owner = $1",
            owner,
            ids,
        )
        edges = _edges(rows)
        places: dict[str, NodePlace] = {}
        for r in rows:
            if r[5] is not None:
                places[r[0]] = NodePlace(float(r[5]), r[6])
            if r[7] is not None:
                places[r[1]] = NodePlace(float(r[7]), r[8])
        return edges, places

    async def get_nodes(self, owner: str, node_ids: Sequence[str]) -> dict[str, MemoryNode]:
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return {}
        # A person served: those among their latest nodes from memory (recall finds
        # recent turns most), the rest from PostgreSQL.
        kept = await self.nodes.kept_by_id(owner, ids)
        found = {node_id: node_from_kept(row) for node_id, row in kept.items()}
        missing = [i for i in ids if i not in found]
        if not missing:
            return found
        rows = await self.db.fetch(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ANY($1::text[]) AND owner = $2",
            missing,
            owner,
        )
        read = {row["id"]: node_from_row(row) for row in rows}
        self.db.relabelled(owner, read.values())
        return found | read

    async def connections_of(self, owner: str, node_id: str) -> list[Connection]:
        rows = await self.db.fetch(
            "SELECT to_id, relation_type, strength, explanation FROM graph_connections"
            " WHERE owner = $1 AND from_id = $2 ORDER BY strength DESC",
            owner,
            node_id,
        )
        return [Connection(r[0], r[1], float(r[2]), r[3]) for r in rows]

    async def vectors(self, owner: str, node_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """From the owner's kept matrix where it holds them (a stored vector never
        changes: re-embedding and forgetting drop the matrix), or as a search just found them,
        the rest from PostgreSQL."""
        cached = self._cache.get(owner)
        held = cached.vectors if cached is not None else None
        found = self._found.get(owner, {})
        out: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for node_id in dict.fromkeys(node_ids):
            i = held.index.get(node_id) if held is not None else None
            if held is not None and i is not None:
                out[node_id] = held.matrix[i]
            elif (vector := found.get(node_id)) is not None:
                out[node_id] = vector
            else:
                missing.append(node_id)
        if missing:
            rows = await self.db.fetch(
                "SELECT node_id, vector FROM graph_embeddings"
                " WHERE owner = $1 AND node_id = ANY($2::text[])",
                owner,
                missing,
            )
            out.update((r[0], r[1]) for r in rows)
        return out

    async def node_count_with_vectors(self, owner: str) -> int:
        return int(
            await self.db.fetchval("SELECT count(*) FROM graph_embeddings WHERE owner = $1", owner)
        )

    # -- export / forget ---------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        rows = await self.db.fetch(
            f"SELECT {_EDGE_COLUMNS} FROM graph_connections"
            " WHERE owner = $1 ORDER BY from_id, to_id, relation_type",
            owner,
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
                removed += affected(
                    await conn.execute(f"DELETE FROM {table} WHERE owner = $1", owner)
                )
            await notify(conn, owner)
        self.drop_cached(owner)
        return removed


def _whole(rows: Iterable[Sequence[Any]], version: int) -> OwnerPostings | None:
    """A person's postings at their node version ``version`` from rows (kind 0 a tag, 1
    an entity; key, node id, the node's tag count, ts, scope) holding all of them, at
    most WHOLE_ROWS + 1 of each kind (None: more than WHOLE_ROWS of a kind)."""
    tags = [r for r in rows if r[0] == 0]
    entities = [r for r in rows if r[0] == 1]
    if len(tags) > WHOLE_ROWS or len(entities) > WHOLE_ROWS:
        return None
    kept = OwnerPostings(version, KEPT_PER_TAG, KEPT_PER_ENTITY, complete=True)
    for _, tag, node_id, ntags, ts, _ in tags:
        kept.tags.setdefault(tag, []).append((float(ts), node_id, int(ntags)))
    for _, entity, node_id, _, ts, scope in entities:
        kept.entities.setdefault(entity, []).append((float(ts), node_id, scope))
    for postings in kept.tags.values():
        postings.sort()
        del postings[:-KEPT_PER_TAG]
    for mentions in kept.entities.values():
        mentions.sort()
        del mentions[:-KEPT_PER_ENTITY]
    return kept


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a vector (a parameter array of ``vector`` values would
    need the codec per element)."""
    return "[" + ",".join(repr(float(x)) for x in vector.tolist()) + "]"


def _edges(rows: Iterable[asyncpg.Record]) -> list[Edge]:
    found: dict[tuple[str, str, str], Edge] = {}
    for r in rows:
        found[(r[0], r[1], r[2])] = Edge(r[0], r[1], r[2], float(r[3]), r[4])
    return list(found.values())
