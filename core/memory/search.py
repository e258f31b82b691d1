"""Hybrid search with connections: vector and full-text seeds fused by rank (RRF), then a
breadth-first walk over the typed, weighted edges.

A seed scores ``sum(weight / (rrf_k + rank))`` over the lists it appears in, scaled so
the best possible seed scores 1. A node reached over an edge scores
``parent score * edge strength * hop_decay`` (best path wins); a seed that is also
reached from another seed keeps its own score plus a share of the propagated one, so
nodes that both match and sit next to matches rise. Every result says why it is there:
"direct match" or "via <relation> from <node id>".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import numpy as np

from core.memory.base import RecalledNode
from core.memory.connections import seed_range
from core.memory.entities import extract_entities, speaker
from core.memory.query import gathers
from core.memory.tags import STOP_WORDS, is_question
from core.storage.api import GraphStore, NodeStore
from core.storage.records import MemoryNode, NodeType, to_ts

# The relation a result reached over a bridge (a rare word shared) is given as.
BRIDGE = "shared_word"
# ... and over two events told for about the same time.
NEAR_DATE = "near_date"
CENTRE_REUSE = 32  # searches served by one computed centroid of a person
CENTRE_CACHE = 1024  # people whose centroid is kept (oldest dropped first)


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Defaults tuned on the LoCoMo dev conversations (benchmarks/locomo.py, --set to
    experiment): a small RRF constant trusts the first ranks more, full-text counts half
    as much as vectors (the vectors carry the turn's context), and weaker edge kinds
    (similar, shared tags) count half in the walk."""

    seed_k: int = 40  # candidates taken from each of vector and full-text search
    rrf_k: float = 5.0
    vector_weight: float = 1.0
    text_weight: float = 0.5
    hop_decay: float = 0.4  # each hop keeps strength x decay of its parent's score
    expand_seeds: int = 10  # seeds whose neighbourhood is walked
    max_edges_per_node: int = 12  # strongest edges followed from one node
    boost_share: float = 0.5  # share of a propagated score added to a seed it reaches
    path_share: float = 0.5  # share of each further path's score added to a reached node
    relation_weights: tuple[tuple[str, float], ...] = (
        ("similar", 0.5),
        ("shared_tags", 0.5),
        ("same_entity", 0.5),
    )
    # Maximal marginal relevance (Carbonell & Goldstein 1998) over the best
    # ``diversity_pool`` x limit results: each next result scores x (1 - ``diversity`` x
    # its highest centred cosine to one ranked above it). A question gathering several
    # facts ("where has she camped?") needs the different ones, not the same moment
    # told twice (a line and its reply). Centred (the person's centroid removed) so the
    # cosine reads what two lines share beyond being the same person's chat. 0: off.
    # Chosen leave-one-conversation-out on LoCoMo dev (0.5 in every fold). Conversational
    # recall passes its own (core.memory.query.QueryConfig.diversity: off): a message in
    # a conversation points at one referent, and its neighbours are what tell it.
    diversity: float = 0.5
    diversity_pool: int = 3
    # A vector hit's rank score is scaled by its cosine mapped linearly from
    # ``min_similarity`` (0: noise, not a seed — top-k always returns something) to
    # ``full_similarity`` (1). None: by model, see core.memory.connections.SEED_RANGES.
    min_similarity: float | None = None
    full_similarity: float | None = None
    # Hubness reduction: vector hits are ranked by ``cos(q, v) - centre_weight *
    # cos(v, centroid)``, the centroid being the mean of the person's latest
    # ``centre_newest`` vectors. Short generic lines ("ok, valeu!", "Hi! How's your day
    # going?") sit close to the centroid and so close to every query; centring (Suzuki et
    # al. 2013, "Centering similarity measures to reduce hubs") lets specific lines
    # through. The top ``seed_k * centre_pool`` by plain cosine are re-ranked. 0: off.
    centre_weight: float = 0.5
    centre_newest: int = 256
    centre_pool: int = 2
    # Entities the query names (core.memory.entities; "minha irmã", "Julia"): a found
    # node naming one scores x (1 + ``entity_boost`` x the share of the query's entities
    # it names), and the mentions of an entity named at most ``entity_rare`` times are
    # seeds of ``entity_seed`` (a question reaches what the person said about that one).
    # An entity named ``entity_postings`` times or more (a speaker's own name) tells
    # nothing apart: none of the three. All three 0: no lookup.
    entity_boost: float = 0.5
    entity_seed: float = 0.0
    # A same_entity edge leaving a node that names the query's entity keeps this share
    # of its parent's score (not strength x relation weight x hop decay): "minha irmã
    # Júlia ..." names the sister the query asks about, so "a Júlia marcou a data" is
    # about her too, one step away, not two hops of chance adjacency.
    entity_path: float = 0.5
    entity_postings: int = 200
    entity_rare: int = 12
    # A second encoder's vectors (GraphMemory's ``second``: USE beside e5 reads short
    # chat lines differently): its top ``seed_k`` by cosine are one more rank list, of
    # this weight, in the fusion (nodes without a second vector are found by the other
    # lists only). For searches outside a conversation (the CLI, HTTP, LoCoMo); the
    # conversational recall passes its own (QueryConfig.second_weight). 0: not searched.
    second_weight: float = 0.0
    # The second list searches the person's newest rows only: it helps with what a chat
    # line says in other words, and beyond 10k rows its matrix would cost more than the
    # rest of the search together. None: all of them.
    second_newest: int | None = 10_000
    # Turn kinds in searches outside a conversation (a conversational recall passes its
    # own ``adjust``): the bot's replies are derived from what the person said and the
    # person's questions state nothing about them, so a found reply counts x
    # ``reply_factor`` and a question x ``question_factor`` against a statement (the
    # conversational recall's factors). Chosen leave-one-conversation-out on LoCoMo dev
    # (on in every fold; docs/recall.md). Off: every row counts alike.
    turn_kinds: bool = True
    reply_factor: float = 0.7
    question_factor: float = 0.6
    # Whose line it is. A transcript line opens with its speaker ("Caroline: ...": an
    # imported group chat, LoCoMo's conversations); when the query names the speaker of
    # some of the found lines ("What has Melanie painted?"), a line another speaker said
    # counts x ``other_speaker``: there the others react to, ask about or answer what
    # the named one did or said, as the bot's replies do to the person's. 1: off.
    # Chosen on LoCoMo dev (docs/recall.md, session 7; held out, 0.3-0.6 were chosen).
    other_speaker: float = 0.45
    # A question that gathers (core.memory.query.gathers: "what books has she read?",
    # "quais lugares eu já visitei?") wants facts of several moments, not one moment
    # told in several lines: in the diversity step a result within ``moment`` seconds
    # of each better one counts x (1 - ``spread``), and its lists give ``gather_k``
    # times ``seed_k`` candidates (it wants several facts; the cost falls on such
    # questions only). 0: off. Chosen on LoCoMo dev (docs/recall.md, session 7).
    spread: float = 0.15
    moment: float = 7200.0  # seconds: the session gap of core.memory.query
    gather_k: float = 3.0
    # Who and what, read apart. A name the person's memory holds ``entity_postings``
    # times or more (a transcript's speaker: "What has Melanie painted?") tells no line
    # apart by its words (the entity rules above skip it too), yet in the query's vector
    # it pulls towards everything that name says, on any topic: the speaker's own
    # lines fill the top. Whose line it is, the speaker rule reads from the labels; the
    # vector searched is the question as asked mixed with the question without those
    # names (its topic), this share of the latter: the plain mean, chosen in every fold
    # held out on LoCoMo dev (docs/recall.md, session 8). One more text in the query's
    # model batch, only for a query naming such a name (plain search:
    # GraphMemory.search_with_connections). 0: off.
    topic_share: float = 0.5
    # With it, the full-text list looks for the topic's words only: such a name matches
    # every line its speaker said, and those lines (newest first) filled the list's
    # places after the lines holding the topic's words. Only where topic_share applies.
    topic_text: bool = True


def turn_factor(node: MemoryNode, reply: float, question: float) -> float:
    """How much a found row counts by what kind of turn it is (a statement: 1)."""
    if node.type is NodeType.AKIRA_RESPONSE:
        return reply
    return question if is_question(node.content) else 1.0


@dataclass(slots=True)
class _Hit:
    score: float
    depth: int = 0
    via: str | None = None
    relation: str | None = None
    seed: bool = False


class GraphSearcher:
    """Runs :func:`search` against one graph store and node store."""

    def __init__(
        self,
        graph: GraphStore,
        nodes: NodeStore,
        config: SearchConfig | None = None,
        *,
        model: str = "",
    ) -> None:
        self.graph = graph
        self.nodes = nodes
        self.config = config or SearchConfig()
        self._centres: dict[tuple[str, tuple[str, ...] | None], tuple[np.ndarray, int]] = {}
        lo, hi = seed_range(model)
        self.min_similarity = (
            self.config.min_similarity if self.config.min_similarity is not None else lo
        )
        self.full_similarity = (
            self.config.full_similarity if self.config.full_similarity is not None else hi
        )

    async def _centred(
        self,
        owner: str,
        query_vector: np.ndarray,
        hits: list[tuple[str, float]],
        scopes: Sequence[str] | None,
        keep: int,
    ) -> list[tuple[str, float]]:
        """``hits`` (id, cosine) re-ranked by centred similarity, best ``keep`` kept,
        each still carrying its plain cosine (what the seed confidence is calibrated on)."""
        cfg = self.config
        centre = await self._centre(owner, query_vector, scopes)
        if centre is None:
            return hits[:keep]
        vectors = await self.graph.vectors(owner, [i for i, _ in hits])
        known = [(i, s) for i, s in hits if i in vectors]
        shift = np.array([vectors[i] @ centre for i, _ in known]) * cfg.centre_weight
        order = np.argsort(-(np.array([s for _, s in known]) - shift), kind="stable")
        return [known[j] for j in order[:keep].tolist()]

    async def _diversified(
        self,
        owner: str,
        query_vector: np.ndarray,
        ranked: Sequence[str],
        scores: dict[str, float],
        scopes: Sequence[str] | None,
        weight: float,
        keep: int,
        moments: tuple[Mapping[str, float], float] | None = None,
    ) -> list[str]:
        """``ranked`` (best first) reordered by maximal marginal relevance of ``weight``:
        the best ``keep`` chosen, the rest after them in their order; ``scores`` is
        updated with the discounted scores of the chosen. ``moments``: (node id -> when
        it was said, spread): each result of the same moment as a chosen one counts
        x (1 - spread) (``SearchConfig.spread``)."""
        vectors = await self.graph.vectors(owner, list(ranked))
        ids = [i for i in ranked if i in vectors and i in scores]
        if len(ids) < 2:
            return list(ranked)
        matrix = np.stack([vectors[i] for i in ids]).astype(np.float32)
        centre = await self._centre(owner, query_vector, scopes)
        if centre is not None:
            matrix = matrix - centre
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
        base = np.array([scores[i] for i in ids])
        # Centred cosines between the candidates. einsum, not ``@``: a matmul this small
        # goes to the threaded BLAS, whose threads then spin on the CPU after each search.
        gram = np.einsum("id,jd->ij", matrix, matrix)
        overlap = np.zeros(len(ids))  # highest centred cosine to a chosen result
        free = np.ones(len(ids), dtype=bool)
        times, spread = moments if moments is not None else ({}, 0.0)
        when = np.array([times.get(i, np.nan) for i in ids])
        kept = np.ones(len(ids))  # (1 - spread) per chosen result of the same moment
        order: list[int] = []
        for _ in range(min(keep, len(ids))):
            factor = (1.0 - weight * np.clip(overlap, 0.0, 1.0)) * kept
            adjusted = np.where(free, base * factor, -np.inf)
            pick = int(np.argmax(adjusted))
            scores[ids[pick]] = float(adjusted[pick])
            order.append(pick)
            free[pick] = False
            overlap = np.maximum(overlap, gram[pick])
            if spread > 0:
                same = np.abs(when - when[pick]) <= self.config.moment
                kept = np.where(same, kept * (1.0 - spread), kept)
        chosen = [ids[j] for j in order]
        taken = set(chosen)
        return chosen + [i for i in ranked if i not in taken]

    async def _centre(
        self, owner: str, query_vector: np.ndarray, scopes: Sequence[str] | None
    ) -> np.ndarray | None:
        """The mean of the person's latest vectors (in the allowed scopes), kept for
        ``CENTRE_REUSE`` searches: what is typical of a person drifts slowly."""
        key = (owner, tuple(sorted(scopes)) if scopes is not None else None)
        kept = self._centres.get(key)
        if kept is not None and kept[1] > 0:
            self._centres[key] = (kept[0], kept[1] - 1)
            return kept[0]
        cfg = self.config
        newest = await self.graph.vector_search(
            owner, query_vector, k=cfg.centre_newest, scopes=scopes, newest=cfg.centre_newest
        )
        vectors = await self.graph.vectors(owner, [i for i, _ in newest])
        recent = [vectors[i] for i, _ in newest if i in vectors]
        centre = np.mean(recent, axis=0) if len(recent) >= 8 else None  # too few: no norm
        if len(self._centres) >= CENTRE_CACHE:
            self._centres.pop(next(iter(self._centres)))
        if centre is not None:
            self._centres[key] = (centre, CENTRE_REUSE)
        return centre

    async def _entity_seeds(
        self,
        owner: str,
        query: str,
        hits: dict[str, _Hit],
        scopes: Sequence[str] | None,
        at: datetime | None,
    ) -> dict[str, float]:
        """Seeds the mentions of the rare entities ``query`` names (in ``hits``); returns
        node id -> share of the query's known entities it names (for the boost)."""
        cfg = self.config
        if cfg.entity_boost <= 0 and cfg.entity_seed <= 0 and cfg.entity_path <= 0:
            return {}
        mentions = extract_entities(query)
        if not mentions:
            return {}
        # Postings already respect owner, scopes and time.
        named = await self.graph.entity_mentions(
            owner,
            [*mentions.definite, *mentions.tentative],
            per_entity=cfg.entity_postings,
            scopes=scopes,
            at=at,
        )
        if not named:
            return {}
        named = {e: ids for e, ids in named.items() if len(ids) < cfg.entity_postings}
        share: dict[str, float] = {}
        for ids in named.values():
            for node_id in ids:
                share[node_id] = share.get(node_id, 0.0) + 1.0 / len(named)
            if cfg.entity_seed > 0 and len(ids) <= cfg.entity_rare:
                for node_id in ids:
                    hits.setdefault(node_id, _Hit(0.0, seed=True)).score += cfg.entity_seed
        return share

    async def search(
        self,
        owner: str,
        query: str,
        query_vector: np.ndarray | None,
        *,
        depth: int = 2,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        exclude_ids: Iterable[str] = (),
        at: datetime | None = None,
        priors: Mapping[str, float] | None = None,
        seed_scale: float = 1.0,
        windows: Sequence[tuple[float, float]] = (),
        window_boost: float = 1.0,
        window_outside: float = 0.6,
        recency: tuple[float, float] | None = None,
        adjust: Callable[[MemoryNode], float] | None = None,
        diversity: float | None = None,
        second: tuple[str, np.ndarray, float] | None = None,
        prior_damping: float = 0.0,
        spread: float | None = None,
        text_query: str | None = None,
        bridges: Mapping[str, Sequence[str]] | None = None,
        bridge_share: float = 0.0,
        date_bridges: Mapping[str, Sequence[str]] | None = None,
        date_bridge_share: float = 0.0,
    ) -> list[RecalledNode]:
        """``priors``: extra seed scores (node id -> score; a top search seed scores 1),
        e.g. the threads a follow-up may pick up (core.memory.query). ``windows``: times
        the query names, as (start, end) timestamps: a node said inside one scores
        x (1 + ``window_boost``), outside all of them x ``window_outside``. ``recency``:
        (weight, time constant in seconds): a node's score is scaled by
        ``1 - weight + weight * exp(-age / constant)``, its age counted from ``at``.
        ``seed_scale`` scales the query's own seeds (a message that says little finds
        little by itself; its priors should count more). ``adjust``: a factor per
        candidate node, applied with the time priors (None: by kind of turn, when
        ``turn_kinds``).
        ``diversity``: the MMR weight for this search (None: the configured one).
        ``second``: (model, the query's vector of that second encoder, its list's weight).
        ``prior_damping``: the priors count x (1 - this x the best seed's score of the
        query's own lists): what the query already found needs less of them. ``spread``: a
        gathering question's moments apart, this much (None: the configured one).
        ``text_query``: what the full-text list looks for (None: ``query``).
        ``bridges``: node id -> nodes it shares something specific with (a rare word:
        core.memory.query.word_bridges); the walk's first step passes ``bridge_share``
        of a seed's score over each, beside its edges. ``date_bridges``: the same for
        events told for about the same time (core.memory.query.date_bridges), with
        ``date_bridge_share``; a line found by the query's own lists that is also a near
        event of a better one keeps the better score plus a share of its own, as a
        line about the query's entity does."""
        cfg = self.config
        if limit <= 0 or (scopes is not None and not scopes):
            return []
        if adjust is None and cfg.turn_kinds:
            adjust = partial(turn_factor, reply=cfg.reply_factor, question=cfg.question_factor)
        excluded = set(exclude_ids)
        spread = cfg.spread if spread is None else spread
        gathering = spread > 0 and query_vector is not None and gathers(query)
        # A gathering question wants several facts: more candidates from every list.
        seed_k = round(cfg.seed_k * cfg.gather_k) if gathering else cfg.seed_k
        # Excluded nodes (the message being answered, turns already in the prompt) are
        # not returned but still lead somewhere: seeds may include them.
        # Full-text search runs on the database thread while the vector search runs here.
        text_search = asyncio.ensure_future(
            self.graph.text_search(
                owner,
                query if text_query is None else text_query,
                k=seed_k,
                scopes=scopes,
                at=at,
                stop_words=STOP_WORDS,
            )
        )
        vector_hits: list[tuple[str, float]] = []
        second_hits: list[tuple[str, float]] = []
        second_weight = second[2] if second is not None else 0.0
        try:
            # Two turns of the loop before the vector search's CPU work: in the first the
            # text search's task starts and its read joins the turn's batch, in the second
            # the batch goes to a reader thread (SQLite's ``Database._call`` sends a turn's
            # reads together, scheduled with call_soon). After one turn the read was still
            # waiting when the vector search began, and the two ran one after the other.
            for _ in range(2):
                await asyncio.sleep(0)
            if second is not None and second_weight > 0:
                second_hits = await self.graph.second_search(
                    owner,
                    second[0],
                    second[1],
                    k=seed_k,
                    scopes=scopes,
                    at=at,
                    newest=cfg.second_newest,
                )
            if query_vector is not None:
                centring = cfg.centre_weight > 0
                vector_hits = await self.graph.vector_search(
                    owner,
                    query_vector,
                    k=seed_k * (cfg.centre_pool if centring else 1),
                    scopes=scopes,
                    at=at,
                )
                vector_hits = [(i, s) for i, s in vector_hits if s > self.min_similarity]
                if centring and vector_hits:
                    vector_hits = await self._centred(
                        owner, query_vector, vector_hits, scopes, seed_k
                    )
        except BaseException:
            text_search.cancel()
            raise
        text_hits = await text_search
        hits: dict[str, _Hit] = {}
        best = (
            cfg.vector_weight * (query_vector is not None)
            + cfg.text_weight
            + second_weight * bool(second_hits)
        )
        norm = (cfg.rrf_k + 1) / max(best, 1e-9)
        span = max(self.full_similarity - self.min_similarity, 1e-6)
        for rank, (node_id, sim) in enumerate(vector_hits, start=1):
            confidence = min(1.0, (sim - self.min_similarity) / span)
            hit = hits.setdefault(node_id, _Hit(0.0, seed=True))
            hit.score += cfg.vector_weight / (cfg.rrf_k + rank) * norm * confidence
        for rank, (node_id, _sim) in enumerate(second_hits, start=1):
            hit = hits.setdefault(node_id, _Hit(0.0, seed=True))
            hit.score += second_weight / (cfg.rrf_k + rank) * norm
        for rank, (node_id, _relevance) in enumerate(text_hits, start=1):
            hit = hits.setdefault(node_id, _Hit(0.0, seed=True))
            hit.score += cfg.text_weight / (cfg.rrf_k + rank) * norm
        found = max((hit.score for hit in hits.values()), default=0.0)
        if seed_scale != 1.0:
            for hit in hits.values():
                hit.score *= seed_scale
        prior_scale = 1.0 - prior_damping * min(found, 1.0)
        for node_id, prior in (priors or {}).items():
            if prior > 0:
                hits.setdefault(node_id, _Hit(0.0, seed=True)).score += prior * prior_scale
        naming = await self._entity_seeds(owner, query, hits, scopes, at)
        if not hits:
            return []

        # Seeds come from searches that already respect owner, scopes and time. The walk
        # checks each node it reaches by its place (time, scope) alone; whole nodes are
        # loaded only for the results.
        until = to_ts(at) if at is not None else None
        allowed = set(scopes) if scopes is not None else None
        relation_weight = dict(cfg.relation_weights)
        frontier = sorted(hits, key=lambda i: -hits[i].score)[: cfg.expand_seeds]
        for level in range(1, depth + 1):
            if not frontier:
                break
            edges, places = await self.graph.neighbours(owner, frontier)
            by_node: dict[str, list[tuple[float, str, str]]] = {}
            frontier_set = set(frontier)
            for edge in edges:
                for end in (edge.from_id, edge.to_id):
                    if end in frontier_set:
                        other = edge.other(end)
                        weight = edge.strength * relation_weight.get(edge.relation_type, 1.0)
                        by_node.setdefault(end, []).append((weight, other, edge.relation_type))
            proposals: dict[str, tuple[float, str, str]] = {}
            for parent in frontier:
                parent_score = hits[parent].score
                steps = sorted(by_node.get(parent, []), reverse=True)[: cfg.max_edges_per_node]
                # Bridges beside the edges, not among them: the cap is for the many edges
                # of a busy node.
                if level == 1 and bridges and bridge_share > 0:
                    steps += [(bridge_share, other, BRIDGE) for other in bridges.get(parent, ())]
                if level == 1 and date_bridges and date_bridge_share > 0:
                    steps += [
                        (date_bridge_share, other, NEAR_DATE)
                        for other in date_bridges.get(parent, ())
                    ]
                for weight, other, relation in steps:
                    if other == parent:
                        continue
                    if relation == "same_entity" and parent in naming:
                        score = parent_score * cfg.entity_path
                    elif relation in (BRIDGE, NEAR_DATE):
                        score = parent_score * weight
                    else:
                        score = parent_score * weight * cfg.hop_decay
                    # Paths, not only nodes: a node reached from several matches gets the
                    # best path's score plus a share of every other path's (it joins
                    # things the query is about: "the dog of my sister").
                    if other not in proposals:
                        proposals[other] = (score, parent, relation)
                    else:
                        best, via, rel = proposals[other]
                        if score > best:
                            proposals[other] = (score + cfg.path_share * best, parent, relation)
                        else:
                            proposals[other] = (best + cfg.path_share * score, via, rel)
            next_frontier: list[str] = []
            for node_id, (score, parent, relation) in proposals.items():
                place = places.get(node_id)
                if place is None and relation in (BRIDGE, NEAR_DATE):
                    pass  # bridges join nodes the caller read in these scopes, before ``at``
                elif place is None or not _within(place.scope, place.ts, allowed, until):
                    continue  # never walk into another scope, the future or a vanished node
                known_hit = hits.get(node_id)
                if known_hit is None:
                    hits[node_id] = _Hit(score, level, parent, relation)
                    next_frontier.append(node_id)
                elif known_hit.seed and (
                    (relation == "same_entity" and parent in naming) or relation == NEAR_DATE
                ):
                    # A weak match that is about the query's entity: the entity's path
                    # is the better reason, the match adds to it.
                    high, low = max(known_hit.score, score), min(known_hit.score, score)
                    known_hit.score = high + cfg.boost_share * low
                elif known_hit.seed:
                    known_hit.score += cfg.boost_share * score
                elif score > known_hit.score:
                    known_hit.score, known_hit.depth = score, level
                    known_hit.via, known_hit.relation = parent, relation
            frontier = sorted(next_frontier, key=lambda i: -hits[i].score)[: cfg.expand_seeds]
        for node_id, share in naming.items():
            if node_id in hits:
                hits[node_id].score *= 1.0 + cfg.entity_boost * share

        ranked = sorted(
            (i for i in hits if i not in excluded),
            key=lambda i: (-hits[i].score, i),
        )
        mmr = cfg.diversity if diversity is None else diversity
        diverse = (mmr > 0 or gathering) and query_vector is not None
        timed = (
            bool(windows)
            or (recency is not None and until is not None)
            or bool(adjust)
            or gathering
            or cfg.other_speaker != 1.0
        )
        # A few spare in case a node vanished (forgotten) since it was found; with time
        # priors, enough candidates for them to reorder.
        if timed:
            wanted = ranked[: max(limit * 4, 40, limit * cfg.diversity_pool * diverse)]
            known = await self.graph.get_nodes(owner, wanted)
            others = _other_speakers(query, known, cfg.other_speaker)
            scores = {
                i: hits[i].score
                * _time_factor(
                    to_ts(known[i].timestamp),
                    windows,
                    window_boost,
                    window_outside,
                    recency,
                    until,
                )
                * (adjust(known[i]) if adjust is not None else 1.0)
                * others.get(i, 1.0)
                for i in wanted
                if i in known
            }
            wanted = sorted(scores, key=lambda i: (-scores[i], i))
            if diverse and query_vector is not None:
                moments = (
                    ({i: to_ts(known[i].timestamp) for i in wanted}, spread) if gathering else None
                )
                wanted = await self._diversified(
                    owner, query_vector, wanted, scores, scopes, mmr, len(wanted), moments
                )
        else:
            # Reordered by their scores alone: only what is returned is loaded.
            wanted = ranked[: limit * cfg.diversity_pool if diverse else limit + 5]
            scores = {i: hits[i].score for i in wanted}
            if diverse and query_vector is not None:
                wanted = await self._diversified(
                    owner, query_vector, wanted, scores, scopes, mmr, limit + 5
                )
                wanted = wanted[: limit + 5]
            known = await self.graph.get_nodes(owner, wanted)
        results: list[RecalledNode] = []
        for node_id in wanted:
            node = known.get(node_id)
            if node is None or node.owner != owner:
                continue
            if not _within(node.scope, to_ts(node.timestamp), allowed, until):
                continue
            hit = hits[node_id]
            if hit.seed:
                results.append(RecalledNode(node, scores[node_id], "direct match"))
            else:
                results.append(
                    RecalledNode(
                        node,
                        scores[node_id],
                        f"via {hit.relation} from {hit.via}",
                        depth=hit.depth,
                        via_node_id=hit.via,
                        via_relation=hit.relation,
                    )
                )
            if len(results) == limit:
                break
        return results


def _other_speakers(query: str, nodes: Mapping[str, MemoryNode], factor: float) -> dict[str, float]:
    """Node id -> ``factor`` for the transcript lines of ``nodes`` said by another speaker
    than the ones ``query`` names, when it names the speaker of some of them (see
    ``SearchConfig.other_speaker``); empty when it names none or ``factor`` is 1."""
    if factor == 1.0:
        return {}
    said = {node_id: speaker(node.content) for node_id, node in nodes.items()}
    labels = {label for label in said.values() if label is not None}
    if not labels:
        return {}
    mentions = extract_entities(query)
    named = labels & {*mentions.names, *mentions.tentative}
    if not named:
        return {}
    return {i: factor for i, label in said.items() if label is not None and label not in named}


def _time_factor(
    ts: float,
    windows: Sequence[tuple[float, float]],
    boost: float,
    outside: float,
    recency: tuple[float, float] | None,
    until: float | None,
) -> float:
    factor = 1.0
    if windows:
        inside = any(start <= ts < end for start, end in windows)
        factor = 1.0 + boost if inside else outside
    if recency is not None and until is not None:
        weight, constant = recency
        age = max(0.0, until - ts)
        factor *= 1.0 - weight + weight * math.exp(-age / max(constant, 1.0))
    return factor


def _within(scope: str, ts: float, allowed: set[str] | None, until: float | None) -> bool:
    """In one of the allowed privacy scopes (None: any) and not after ``until``."""
    return (allowed is None or scope in allowed) and (until is None or ts <= until)
