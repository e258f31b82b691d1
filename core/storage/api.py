"""The storage protocols: what the engine, the memory layer, the stages and the commands
may ask of storage, whatever the backend (SQLite file, PostgreSQL server).

Every method that reads or writes a person's data takes the owner key and filters by it
inside the implementation, so no caller can forget to. The records these methods take
and give live beside them, in backend-free modules: :mod:`core.storage.records` (users,
nodes, connections), :mod:`core.storage.graph_records` (edges, places) and
:mod:`core.storage.memory_records` (structured memories and their rules),
:mod:`core.storage.feedback_records` (ratings of replies, mood corrections).

Backends: :class:`core.storage.sqlite.SQLiteStorage` (the embedded default) and
:class:`core.storage.postgres.PostgresStorage`; both pass the same contract suite
(tests/core/storage/contract).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from core.storage.feedback_records import (
    FeedbackTotals,
    MoodCorrection,
    Rating,
    ReplyMessage,
    ReplyRating,
)
from core.storage.graph_records import Edge, EmbeddingModelMismatch, NodePlace
from core.storage.memory_records import (
    Category,
    MemoryCounts,
    MemoryVersion,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemory,
)
from core.storage.profile_records import NodeIndexEntry, ProfileCount, ProfileCounter
from core.storage.records import Connection, MemoryNode, UserRecord, to_ts
from core.storage.schema import Migration
from core.storage.vector_cache import OwnerVectors, as_vector

T = TypeVar("T")


class OwnedData(ABC):
    """A part of storage that holds data about people: it can export and erase it.
    The storage facade asks every registered part on export and on forget-me."""

    section: str  # name of this part in an export ("messages", "memories", ...)

    @abstractmethod
    async def export_owner(self, owner: str) -> Any:
        """JSON-ready data about ``owner``; None leaves the section out of the export."""

    @abstractmethod
    async def delete_owner(self, owner: str) -> int: ...

    def drop_cached(self, owner: str | None) -> None:
        """Forget what this process keeps in memory about ``owner`` (None: about
        everyone): another process changed it (see :meth:`Storage.catch_up`). A load
        of it still running must not be kept either. Nothing is kept by default."""


async def export_parts(
    owner: str, profile: OwnedData, parts: Iterable[OwnedData]
) -> dict[str, Any]:
    """Everything every part holds about ``owner``, as one export (any backend)."""
    export: dict[str, Any] = {"user": owner, "profile": await profile.export_owner(owner)}
    for part in parts:
        data = await part.export_owner(owner)
        if data is not None:
            export[part.section] = data
    return export


async def forget_parts(
    owner: str, profile: OwnedData, parts: Iterable[OwnedData]
) -> dict[str, int]:
    """Erase ``owner`` from every part, the profile last; rows removed per part."""
    removed: dict[str, int] = {}
    for part in parts:
        removed[part.section] = await part.delete_owner(owner)
    removed["profile"] = await profile.delete_owner(owner)
    return removed


class UserStore(OwnedData):
    section = "profile"

    @abstractmethod
    async def ensure(
        self, key: str, *, display_name: str | None = None, seen_at: datetime | None = None
    ) -> UserRecord: ...

    @abstractmethod
    async def get(self, key: str) -> UserRecord | None: ...

    async def update_profile(self, key: str, **fields: Any) -> None:
        """Merge ``fields`` into the JSON profile (emotional state, preferences...)."""

        def update(profile: dict[str, Any]) -> None:
            profile.update(fields)

        await self.change_profile_with(key, update)

    async def change_profile(
        self,
        key: str,
        field: str,
        change: Callable[[Any], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """Replace one profile field with ``change(current value or None)``, atomically
        (no concurrent update of the field is lost); returns the new value. ``change``
        must be quick, must not await, and may run more than once. ``wait=False``:
        returns before the commit, which follows in the background. ``announce``: tell
        the other processes sharing the database (a write not made by the process
        serving the person)."""

        def update(profile: dict[str, Any]) -> T:
            value = change(profile.get(field))
            profile[field] = value
            return value

        return await self.change_profile_with(key, update, announce=announce, wait=wait)

    @abstractmethod
    async def change_profile_with(
        self,
        key: str,
        edit: Callable[[dict[str, Any]], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """``edit(profile)`` on the stored profile, atomically (compare and set: ``edit``
        may run more than once and must only change the profile it is given); returns
        what it returns. ``announce`` and ``wait`` as :meth:`change_profile`."""

    @abstractmethod
    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        """Store the person's language; ``wait=False``: commit in the background."""

    @abstractmethod
    async def count(self) -> int: ...

    @abstractmethod
    async def recently_seen(self, limit: int) -> list[tuple[str, str | None, float]]:
        """(key, display name, last seen as epoch seconds) of the ``limit`` people seen
        last, latest first (admin views)."""

    async def settle(self) -> None:
        """Wait for the writes made with ``wait=False`` to be committed (or to fail)."""


class NodeStore(OwnedData):
    section = "messages"

    @abstractmethod
    async def add(self, node: MemoryNode, *, announce: bool = False) -> bool:
        """Store a node; False when its ``source_id`` was already stored for the owner.
        ``announce``: tell the other processes sharing the database (imports)."""

    @abstractmethod
    async def get(self, owner: str, node_id: str) -> MemoryNode | None: ...

    @abstractmethod
    async def get_many(self, owner: str, node_ids: Sequence[str]) -> list[MemoryNode]: ...

    @abstractmethod
    async def recent(
        self,
        owner: str,
        *,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        chat_id: str | None = None,
        before: datetime | None = None,
    ) -> list[MemoryNode]:
        """The owner's latest nodes, oldest first; ``scopes`` limits privacy scopes."""

    @abstractmethod
    async def count(self, owner: str | None = None) -> int:
        """Nodes of one owner; with ``owner=None`` the total (admin statistics only)."""

    @abstractmethod
    async def known_sources(self, owner: str, source_ids: Sequence[str]) -> set[str]:
        """Which of ``source_ids`` the owner already has (imports skip them early)."""

    @abstractmethod
    async def set_emotion(
        self, owner: str, node_id: str, label: str, score: float, *, wait: bool = True
    ) -> None:
        """Store the emotion read in a node; ``wait=False``: commit in the background."""

    @abstractmethod
    async def by_platform_message(
        self, owner: str, platform_message_id: str
    ) -> MemoryNode | None: ...

    async def settle(self) -> None:
        """Wait for the writes made with ``wait=False`` to be committed (or to fail)."""


class GraphStore(OwnedData):
    """What the memory graph needs from storage: vectors, typed edges, tag postings and
    full-text search over nodes. Every method filters by ``owner``."""

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
        announce: bool = False,
        entities: Sequence[str] = (),
    ) -> bool:
        """Node, vector, tag postings, entity postings (``entities``: the keys of
        core.memory.entities) and outgoing connections in one transaction;
        False (and nothing written) when the node is a duplicate. Edges go only to the
        same owner's nodes. ``announce``: tell the other processes (imports)."""

    @abstractmethod
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
        """What :meth:`add_node` writes beside a node, for a node already stored without
        it (``add_node(node, vector=None)``: a message stored before its vector is
        computed, off the person's path): its vector, ``node.tags`` (its row's and their
        postings), entity postings and outgoing connections, in one transaction. False
        (and nothing written) when the owner has no such node (forgotten meanwhile)."""

    @abstractmethod
    async def latest_node(
        self, owner: str, *, at: datetime, exclude: str | None = None, node_type: str | None = None
    ) -> tuple[str, datetime] | None:
        """The owner's most recent node (of ``node_type``, if given) at or before ``at``."""

    @abstractmethod
    async def previous_in_chat(
        self, owner: str, chat_id: str, *, at: datetime, since: datetime, limit: int = 1
    ) -> list[MemoryNode]:
        """The owner's latest nodes of one chat in ``[since, at]``, oldest first."""

    @abstractmethod
    async def tag_candidates(
        self, owner: str, tags: Sequence[str], *, per_tag: int = 50
    ) -> dict[str, tuple[int, int]]:
        """Recent nodes sharing tags: node id -> (tags in common, its tag count)."""

    async def entity_mentions(
        self,
        owner: str,
        entities: Sequence[str],
        *,
        per_entity: int = 50,
        scopes: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> dict[str, list[str]]:
        """The owner's latest nodes naming each entity (in ``scopes``, at or before
        ``at``): entity -> node ids, newest first, at most ``per_entity`` each. Entities
        nobody named are left out."""
        unique = list(dict.fromkeys(entities))
        if not unique or per_entity <= 0 or (scopes is not None and not scopes):
            return {}
        allowed = list(dict.fromkeys(scopes)) if scopes is not None else None
        until = to_ts(at) if at is not None else math.inf
        return await self._entity_mentions(owner, unique, per_entity, allowed, until)

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
        """:meth:`tag_candidates` of ``tags`` and :meth:`entity_mentions` of ``entities``
        (every scope, at or before ``at``) together: what a new node links to by its
        tags and its entities. A backend where each question is a round trip asks both
        at once."""
        candidates = await self.tag_candidates(owner, tags, per_tag=per_tag) if tags else {}
        mentions = (
            await self.entity_mentions(owner, entities, per_entity=per_entity, at=at)
            if entities
            else {}
        )
        return candidates, mentions

    @abstractmethod
    async def _entity_mentions(
        self,
        owner: str,
        entities: list[str],
        per_entity: int,
        scopes: list[str] | None,
        until: float,
    ) -> dict[str, list[str]]:
        """:meth:`entity_mentions` with its arguments checked: distinct entities and
        scopes (None: every scope), ``until`` an epoch time."""

    @abstractmethod
    async def _owner_vectors(self, owner: str) -> OwnerVectors | None:
        """The owner's vectors as the backend keeps them in memory (None: no vectors)."""

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
        owner's ``newest`` most recently stored nodes only (a cost bound). Searched in
        memory over :meth:`_owner_vectors`, the same on every backend."""
        vectors = await self._owner_vectors(owner)
        if vectors is None:
            return []
        query = as_vector(vector)
        if query.shape[0] != vectors.dim:
            raise EmbeddingModelMismatch(
                f"query vector has {query.shape[0]} dimensions, stored vectors {vectors.dim}"
            )
        return vectors.search(query, k, scopes, exclude, to_ts(at) if at else None, newest=newest)

    async def with_vectors(self, owner: str, node_ids: Sequence[str]) -> set[str]:
        """Those of ``node_ids`` that have a vector, from the owner's vectors as the
        backend keeps them (the matrix a recall searches next anyway)."""
        vectors = await self._owner_vectors(owner)
        return set() if vectors is None else {i for i in node_ids if i in vectors.index}

    # -- second vectors: another encoder's vector of the same nodes (core.memory.graph) --

    @abstractmethod
    async def add_second_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, announce: bool = False
    ) -> int:
        """Store (node id, owner, vector) rows as the nodes' ``model`` vectors (one a node
        and model; a row for a node that is not that owner's is left out). Returns how
        many were stored. ``announce``: tell the other processes (imports)."""

    @abstractmethod
    async def _second_vectors(self, owner: str, model: str) -> OwnerVectors | None:
        """The owner's ``model`` vectors as the backend keeps them in memory (None: none)."""

    async def second_search(
        self,
        owner: str,
        model: str,
        vector: np.ndarray,
        *,
        k: int,
        scopes: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        at: datetime | None = None,
        newest: int | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (node id, cosine) of the owner's nodes by their ``model`` vectors (nodes
        without one are not found here), in memory on every backend; with ``newest``,
        among the owner's ``newest`` latest rows only (a cost bound, as in
        :meth:`vector_search`). A query of another dimension finds nothing: the second
        list is a help, never a reason to fail."""
        if k <= 0 or (scopes is not None and not scopes):
            return []
        vectors = await self._second_vectors(owner, model)
        query = as_vector(vector)
        if vectors is None or query.shape[0] != vectors.dim:
            return []
        return vectors.search(query, k, scopes, exclude, to_ts(at) if at else None, newest=newest)

    async def second_vectors(
        self, owner: str, model: str, node_ids: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The ``model`` vectors of those of ``node_ids`` that have one. From the owner's
        kept matrix, loaded if need be: the search that follows reads it anyway, and it
        holds every one of the owner's (it is dropped on any change it does not see), so
        what it lacks, no node has."""
        vectors = await self._second_vectors(owner, model)
        if vectors is None:
            return {}
        return {i: vectors.matrix[vectors.index[i]] for i in node_ids if i in vectors.index}

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
        """Top-k (node id, relevance > 0) by full-text search, best first: accents and
        case folded, the owner's nodes only."""

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
    async def connections_of(self, owner: str, node_id: str) -> list[Connection]:
        """Outgoing connections of one node, strongest first."""

    @abstractmethod
    async def vectors(self, owner: str, node_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    async def node_count_with_vectors(self, owner: str) -> int: ...

    @abstractmethod
    async def replace_vectors(
        self, model: str, rows: Sequence[tuple[str, str, np.ndarray]], *, first: bool
    ) -> None:
        """Re-embedding: with ``first`` every vector of another model is dropped, then
        ``rows`` (node id, owner, vector) are written."""

    @abstractmethod
    async def nodes_without_vector(self, model: str, limit: int) -> list[tuple[str, str, str]]:
        """(id, owner, content) of nodes with no vector of ``model`` (re-embedding)."""


class MemoryStore(OwnedData):
    """Structured memories of every owner; every query filters by owner. The rules of
    who may change what are :mod:`core.storage.memory_records`' (every backend applies
    them the same way)."""

    section = "memories"

    @abstractmethod
    async def upsert(
        self,
        owner: str,
        category: Category | str,
        key: str,
        content: str,
        *,
        tags: Iterable[str] = (),
        priority: Priority | str = Priority.NORMAL,
        source: Source | str = Source.USER,
        confidence: float | None = None,
        expires_at: datetime | None = None,
        scope: str = "dm",
        at: datetime | None = None,
    ) -> tuple[StructuredMemory, StoreOutcome]:
        """Create ``key`` in ``category`` or update it, the earlier version kept in the
        history (see ``decide_upsert``)."""

    async def update(
        self,
        owner: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Iterable[str] | None = None,
        priority: Priority | str | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
        source: Source | str = Source.USER,
        at: datetime | None = None,
    ) -> StructuredMemory | None:
        """Change fields of one memory by id (None when ``owner`` has no such memory).
        The earlier version goes to the history; a person's edit makes it verified. An
        upsert of the same key, so every backend applies the same rules."""
        current = await self.get(owner, memory_id)
        if current is None:
            return None
        return (
            await self.upsert(
                owner,
                current.category,
                current.key,
                current.content if content is None else content,
                tags=current.tags if tags is None else tags,
                priority=current.priority if priority is None else priority,
                source=source,
                confidence=None,
                expires_at=None if clear_expiry else (expires_at or current.expires_at),
                scope=current.scope,
                at=at,
            )
        )[0]

    @abstractmethod
    async def verify(
        self, owner: str, memory_id: str, *, verified_by: str, at: datetime | None = None
    ) -> StructuredMemory | None: ...

    @abstractmethod
    async def delete(self, owner: str, memory_id: str) -> bool:
        """Remove one memory and its history; announced to the other processes."""

    @abstractmethod
    async def get(self, owner: str, memory_id: str) -> StructuredMemory | None: ...

    @abstractmethod
    async def by_key(
        self, owner: str, key: str, category: Category | str | None = None
    ) -> list[StructuredMemory]: ...

    @abstractmethod
    async def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        """Earlier versions, oldest first."""

    @abstractmethod
    async def entries(
        self,
        owner: str,
        *,
        at: datetime | None = None,
        scopes: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[StructuredMemory]:
        """By priority (critical first), then most recently updated; with ``at`` expired
        ones are left out; ``scopes`` limits the privacy scopes (None = all)."""

    @abstractmethod
    async def by_tag(
        self, owner: str, tag: str, *, at: datetime | None = None, limit: int = 100
    ) -> list[StructuredMemory]: ...

    @abstractmethod
    async def expiring(
        self, owner: str, *, within_days: float, at: datetime
    ) -> list[StructuredMemory]: ...

    @abstractmethod
    async def search(
        self,
        owner: str,
        query: str,
        *,
        tags: Sequence[str] = (),
        at: datetime | None = None,
        scopes: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[StructuredMemory]:
        """Full-text search (accents folded) over key, content and tags, best first;
        ``tags`` requires every tag given. An empty query with tags lists by tag."""

    @abstractmethod
    async def counts(
        self, owner: str | None = None, *, at: datetime | None = None
    ) -> MemoryCounts: ...

    @abstractmethod
    async def owner_of(self, memory_id: str) -> str | None:
        """Whose memory this id is (admin tools only)."""

    @abstractmethod
    async def owners(self, limit: int) -> list[str]:
        """Up to ``limit`` people with structured memories (admin views: minds that only
        the API wrote to have no user row)."""


class FeedbackStore(OwnedData):
    """Feedback on the bot (records in :mod:`core.storage.feedback_records`): which
    platform messages carried each bot reply, people's ratings of replies (reactions),
    and their corrections of a misread mood. Every method filters by owner, except
    :meth:`totals` (numbers about everyone, for admins)."""

    section = "feedback"

    @abstractmethod
    async def link_replies(
        self, owner: str, chat_id: str, message_ids: Sequence[str], node_id: str, at: datetime
    ) -> None:
        """The bot's messages ``message_ids`` in ``chat_id`` carried reply node ``node_id``."""

    @abstractmethod
    async def reply_node(self, owner: str, chat_id: str, message_id: str) -> str | None:
        """The reply node a bot message of ``owner``'s turn carried (None: not one)."""

    @abstractmethod
    async def replies(self, owner: str) -> list[ReplyMessage]: ...

    @abstractmethod
    async def rate(self, rating: ReplyRating) -> bool:
        """Store a rating (the same one again only moves its time); True when new."""

    @abstractmethod
    async def unrate(self, owner: str, node_id: str, rating: Rating) -> bool:
        """Remove one rating; False when there was none."""

    @abstractmethod
    async def ratings(self, owner: str) -> list[ReplyRating]:
        """The owner's ratings, oldest first."""

    @abstractmethod
    async def add_correction(self, correction: MoodCorrection) -> None: ...

    @abstractmethod
    async def corrections(self, owner: str) -> list[MoodCorrection]:
        """The owner's corrections, oldest first."""

    @abstractmethod
    async def totals(self) -> FeedbackTotals:
        """Everyone's ratings and corrections, counted (admin statistics only)."""

    async def export_owner(self, owner: str) -> Any:
        """Ratings, corrections and the bot's messages of the person's turns; None (the
        section left out) when there is none of them."""
        export = {
            "ratings": [r.to_json() for r in await self.ratings(owner)],
            "corrections": [c.to_json() for c in await self.corrections(owner)],
            "reply_messages": [m.to_json() for m in await self.replies(owner)],
        }
        return export if any(export.values()) else None


# -- what is learned about a person (core.profile) ------------------------------------------


class ProfileStore(OwnedData):
    """The counters learned from a person's messages (topics, style, languages; see
    :mod:`core.storage.profile_records`) and the index of their nodes. Several processes
    may learn from one person's messages at once (an import beside the running bot): every
    counter only grows by addition, applied by the database (an UPSERT that adds), never
    read, changed and written back here."""

    section = "learned_profile"
    # How fast interests fade in the export's summary (the plugin sets the configured one).
    half_life_days: float = 30.0

    @abstractmethod
    async def add(self, owner: str, counts: Sequence[ProfileCount]) -> None:
        """Add every count to its counter (created at zero), in one transaction."""

    @abstractmethod
    async def counters(
        self, owner: str, kind: str | None = None, *, min_tag_total: float = 0.0
    ) -> list[ProfileCounter]:
        """The owner's counters (of ``kind``, if given), by kind then name. Keyword tags
        (kind ``tag``) added fewer than ``min_tag_total`` times are left out: a person
        gathers many once-said keywords, which the prompt does not need each turn."""

    @abstractmethod
    async def node_index(self, owner: str) -> list[NodeIndexEntry]:
        """The owner's nodes counted per type and month (UTC), oldest month first: a
        query over the nodes, which storage already indexes by owner."""

    async def export_owner(self, owner: str) -> Any:
        """The learned profile as the person would read it (favourite topics, style) and
        the counters it comes from; None when nothing was learned."""
        counters = await self.counters(owner)
        if not counters:
            return None
        from core.profile.summary import summarise  # core.profile reads these records

        summary = summarise(counters, half_life_days=self.half_life_days)
        return {
            **summary.to_dict(),
            "node_index": [entry.to_dict() for entry in await self.node_index(owner)],
            "counters": [counter.to_dict() for counter in counters],
        }


class Storage(Protocol):
    """The storage facade: one database, every part of a person's data, and what spans
    the parts (export, forget) and the processes sharing the database (catch_up,
    serving)."""

    @property
    def users(self) -> UserStore: ...

    @property
    def nodes(self) -> NodeStore: ...

    @property
    def graph(self) -> GraphStore: ...

    @property
    def memories(self) -> MemoryStore: ...

    @property
    def feedback(self) -> FeedbackStore: ...

    @property
    def profiles(self) -> ProfileStore: ...

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        ...

    def register(
        self, part: OwnedData | None, migrations: list[Migration] | tuple[()] = ()
    ) -> None:
        """Add a part (exported and erased with the rest) with its schema, before open."""
        ...

    async def open(self) -> None:
        """Connect and apply the migrations not applied yet."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """One trivial query: raises when the database cannot answer (health checks)."""
        ...

    async def __aenter__(self) -> Storage: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def export_owner(self, owner: str) -> dict[str, Any]:
        """Everything stored about ``owner``, as JSON-ready data."""
        ...

    async def forget_owner(self, owner: str) -> dict[str, int]:
        """Erase everything about ``owner``; how many rows each part removed. Every
        other process sharing the database drops what it keeps of ``owner``."""
        ...

    async def catch_up(self) -> list[str]:
        """Drop what this process keeps about the people another process changed since
        the last call; returns them (``[EVERY_OWNER]``: everyone). Called before each
        message is served."""
        ...

    def on_changed_elsewhere(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` for each owner a later :meth:`catch_up` finds changed
        by another process."""
        ...

    def drop_cached(self, owner: str | None) -> None: ...

    def serving(
        self, owner: str, *, sent_at: datetime | None = None, message_id: str | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Held while one message of ``owner`` is handled: with several processes on one
        database, no other process handles a message of ``owner`` meanwhile, and they go
        in the platform's order (``sent_at``, then the message number). Within one
        process the engine already keeps each person's messages in order."""
        ...
