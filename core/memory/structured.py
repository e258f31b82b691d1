"""Structured memories (the Synapse model): named facts about a person, their recall text
and the pipeline stage that puts it in the prompt.

The records and their rules live in :mod:`core.storage.memory_records`, their stores
behind :class:`core.storage.api.MemoryStore`; this module
is what the rest of the engine uses: :class:`StructuredMemories` (store, get, update,
delete, verify, search, by tag, expiring, recall) and :class:`StructuredRecallStage`.

Time is always the message's time (the ``at`` argument), never the wall clock, so expiry
can be replayed and tested. Expired memories are left out of recall but stay in the
database (and in the person's export) until they are deleted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from core.cleaner import (
    STRUCTURED_COUNTS_FORMAT,
    STRUCTURED_ENTRY_FORMAT,
    STRUCTURED_MORE_FORMAT,
    STRUCTURED_RECALL_HEADER,
    STRUCTURED_SECTION_TITLE,
    STRUCTURED_UNVERIFIED_NOTE,
    contains_internal_marker,
    neutralise_user_text,
)
from core.pipeline import CallNext, PromptSection, TurnContext
from core.storage.api import MemoryStore, Storage
from core.storage.memory_records import (
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Category,
    MemoryCounts,
    MemoryValidationError,
    MemoryVersion,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemory,
    normalise_key,
    normalise_tags,
)
from core.storage.records import EVERY_OWNER
from core.types import ChatKind

log = logging.getLogger(__name__)

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_KEY_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "RECALL_HEADER",
    "STRUCTURED_TITLE",
    "Category",
    "MemoryCounts",
    "MemoryValidationError",
    "MemoryVersion",
    "Priority",
    "Source",
    "StoreOutcome",
    "StructuredMemories",
    "StructuredMemory",
    "StructuredRecallStage",
    "format_memory",
    "normalise_key",
    "normalise_tags",
    "render_prompt_recall",
    "render_recall",
    "short_ids",
]

# The recall text's wording lives with the cleaner, which removes it when a model echoes it.
RECALL_HEADER = STRUCTURED_RECALL_HEADER
STRUCTURED_TITLE = STRUCTURED_SECTION_TITLE
EXTRAS_KEY = "structured_memories"  # where the feature puts the service in Services.extras

# Ids are ``mem_`` + 16 random hex digits; people see and type the first few (git style).
SHORT_ID_DIGITS = 6
MIN_SHORT_ID = 4
FULL_ID_DIGITS = 16
_SHORT_ID = re.compile(rf"^[0-9a-f]{{{MIN_SHORT_ID},{FULL_ID_DIGITS}}}$")


def _shared_start(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` have in common."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def short_ids(memories: Iterable[StructuredMemory]) -> dict[str, str]:
    """Each memory's id as people see it: the first :data:`SHORT_ID_DIGITS` hex digits
    after ``mem_``, longer where two of ``memories`` (pass all of one person's) share
    them, so each shown id finds exactly one memory."""
    ordered = sorted({m.id.removeprefix("mem_") for m in memories})
    shown: dict[str, str] = {}
    for i, own in enumerate(ordered):
        # In sorted order the longest prefix shared with any other id is a neighbour's.
        neighbours = ordered[max(0, i - 1) : i] + ordered[i + 1 : i + 2]
        common = max((_shared_start(own, n) for n in neighbours), default=0)
        shown[f"mem_{own}"] = own[: max(SHORT_ID_DIGITS, common + 1)]
    return shown


def format_memory(index: int, memory: StructuredMemory) -> str:
    """One entry of the recall text::

    [001] project (HIGH) [verified] project_synapse_status
        v1.5.0 deployed
        Tags: project, synapse
    """
    mark = "verified" if memory.verified else "unverified"
    lines = [
        STRUCTURED_ENTRY_FORMAT.format(
            index=index,
            category=memory.category.value,
            priority=memory.priority.value.upper(),
            mark=mark,
            key=memory.key,
        )
    ]
    lines.extend(f"    {line}" for line in memory.content.splitlines() or [""])
    if memory.tags:
        lines.append(f"    Tags: {', '.join(memory.tags)}")
    return "\n".join(lines)


def render_recall(memories: Sequence[StructuredMemory], *, shown: int | None = None) -> str:
    """The seed's recall text: a header, the counts, then each memory in the given order
    (callers pass them by priority, then recency). ``shown`` cuts the list (the counts
    still cover everything) and says how many were left out."""
    verified = sum(1 for m in memories if m.verified)
    lines = [
        RECALL_HEADER,
        STRUCTURED_COUNTS_FORMAT.format(
            total=len(memories), verified=verified, unverified=len(memories) - verified
        ),
    ]
    listed = memories if shown is None else memories[: max(0, shown)]
    for i, memory in enumerate(listed, 1):
        lines.append("")
        lines.append(format_memory(i, memory))
    if len(listed) < len(memories):
        lines.append("")
        lines.append(STRUCTURED_MORE_FORMAT.format(more=len(memories) - len(listed)))
    return "\n".join(lines)


def _neutralised(memory: StructuredMemory) -> StructuredMemory:
    key = neutralise_user_text(memory.key)
    content = neutralise_user_text(memory.content)
    tags = [neutralise_user_text(tag) for tag in memory.tags]
    if key == memory.key and content == memory.content and tags == memory.tags:
        return memory
    return dataclasses.replace(memory, key=key, content=content, tags=tags)


def render_prompt_recall(memories: Sequence[StructuredMemory], *, shown: int | None = None) -> str:
    """:func:`render_recall` as the prompt shows it. Memory text came from people and from
    the model, so each listed memory's key, content and tags are neutralised like user
    text first (a stored "<!TAG>" is defanged; a stored "## System" line, or a fake
    "=== STRUCTURED MEMORIES ===" banner or "[001] ... [verified] ..." entry, is quoted);
    the engine's own banner, counts and entry heads are rendered around them as they are.
    For memories with ordinary text this is exactly :func:`render_recall`."""
    listed = len(memories) if shown is None else max(0, shown)
    safe = [*(_neutralised(m) for m in memories[:listed]), *memories[listed:]]
    text = render_recall(safe, shown=shown)
    if contains_internal_marker(text):
        # Not expected (each field is clean on its own, keys and tags are normalised),
        # but never let a marker formed across fields through: neutralise the whole text.
        log.warning("structured recall text still held a marker; neutralising it whole")
        text = neutralise_user_text(text)
    return text


class StructuredMemories:
    """The service over :class:`MemoryStore`.

    Only people verify: :meth:`verify` requires ``verified_by`` (the ``platform:id`` of the
    user themself or an admin) and is called from the commands layer, never with anything
    a model produced. Agent proposals go through :meth:`propose`, which can only create
    unverified memories (source agent, confidence 0.7).
    """

    def __init__(self, store: MemoryStore, *, storage: Storage | None = None) -> None:
        self.store = store
        # Forget-me protection for background work: a write that began before the person
        # asked to be forgotten must not bring their data back (see ``writing``).
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._epochs: dict[str, int] = defaultdict(int)
        self._everyone = 0  # raised when every person's data changed elsewhere
        # With ``storage``, a forget by another process (``akira-bot memory forget``
        # beside the bot, another engine worker) counts too: propose() catches up first.
        self._storage = storage
        if storage is not None:
            storage.on_changed_elsewhere(self._changed_elsewhere)

    def _changed_elsewhere(self, owner: str) -> None:
        if owner == EVERY_OWNER:
            self._everyone += 1
        else:
            self._epochs[owner] += 1

    # --- writes ------------------------------------------------------------------------------

    async def store_memory(
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
        """Upsert by key (see :meth:`MemoryStore.upsert`); raises
        :class:`MemoryValidationError` on a bad key, tag, category or content."""
        return await self.store.upsert(
            owner,
            category,
            key,
            content,
            tags=tags,
            priority=priority,
            source=source,
            confidence=confidence,
            expires_at=expires_at,
            scope=scope,
            at=at,
        )

    async def propose(
        self,
        owner: str,
        category: Category | str,
        key: str,
        content: str,
        *,
        tags: Iterable[str] = (),
        priority: Priority | str = Priority.NORMAL,
        expires_at: datetime | None = None,
        scope: str = "dm",
        at: datetime | None = None,
        epoch: int | None = None,
    ) -> tuple[StructuredMemory, StoreOutcome] | None:
        """Store what the agent inferred: always source agent, unverified, confidence
        0.7. With ``epoch`` (from :meth:`epoch` when the work began) nothing is written if
        the person was forgotten since; returns None then."""
        if self._storage is not None and epoch is not None:
            await self._storage.catch_up()
        async with self._locks[owner]:
            if epoch is not None and epoch != self.epoch(owner):
                log.info("dropping a memory proposal for a forgotten person")
                return None
            return await self.store.upsert(
                owner,
                category,
                key,
                content,
                tags=tags,
                priority=priority,
                source=Source.AGENT,
                expires_at=expires_at,
                scope=scope,
                at=at,
            )

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
        at: datetime | None = None,
    ) -> StructuredMemory | None:
        """A person's edit of one memory (verified by them); the earlier version is kept.
        ``clear_expiry`` makes it never expire."""
        return await self.store.update(
            owner,
            memory_id,
            content=content,
            tags=tags,
            priority=priority,
            expires_at=expires_at,
            clear_expiry=clear_expiry,
            source=Source.USER,
            at=at,
        )

    async def verify(
        self, owner: str, memory_id: str, *, verified_by: str, at: datetime | None = None
    ) -> StructuredMemory | None:
        return await self.store.verify(owner, memory_id, verified_by=verified_by, at=at)

    async def delete(self, owner: str, memory_id: str) -> bool:
        return await self.store.delete(owner, memory_id)

    def epoch(self, owner: str) -> int:
        """A token for background work: pass it to :meth:`propose`. Both parts only
        grow, so their sum changes whenever either does."""
        return self._epochs[owner] + self._everyone

    @asynccontextmanager
    async def forgetting(self, owner: str) -> AsyncIterator[None]:
        """Hold while erasing a person: proposals that started earlier are dropped."""
        async with self._locks[owner]:
            self._epochs[owner] += 1
            yield

    # --- reads -------------------------------------------------------------------------------

    async def get(self, owner: str, memory_id: str) -> StructuredMemory | None:
        return await self.store.get(owner, memory_id)

    async def find(self, owner: str, ref: str) -> list[StructuredMemory]:
        """By id (``mem_...``, or the start of one as :func:`short_ids` shows it),
        ``category/key`` or key; raises MemoryValidationError on a reference that cannot
        be a key. A key is looked up before a short id of the same spelling."""
        ref = ref.strip()
        if ref.lower().startswith("mem_"):
            return await self.by_short_id(owner, ref)
        category, sep, key = ref.partition("/")
        if sep:
            return await self.store.by_key(owner, key, category)
        found = await self.store.by_key(owner, ref)
        if not found and _SHORT_ID.match(ref.lower()):
            found = await self.by_short_id(owner, ref)
        return found

    async def by_short_id(self, owner: str, ref: str) -> list[StructuredMemory]:
        """``owner``'s memories whose id starts with ``ref`` (``mem_`` optional, at least
        :data:`MIN_SHORT_ID` hex digits): one, none, or several when ``ref`` is too short
        to tell them apart. A full id is one lookup; a short one reads the person's list
        (a person's memories are a short list, and ids are random, so no index helps)."""
        ref = ref.strip()
        if ref.startswith("mem_") and (exact := await self.store.get(owner, ref)):
            return [exact]
        digits = ref.lower().removeprefix("mem_")
        if not _SHORT_ID.match(digits):
            return []
        if len(digits) == FULL_ID_DIGITS:
            found = await self.store.get(owner, f"mem_{digits}")
            return [found] if found else []
        return [m for m in await self.all(owner) if m.id[4:].startswith(digits)]

    async def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        return await self.store.history(owner, memory_id)

    async def active(
        self, owner: str, *, at: datetime, scopes: Sequence[str] | None = None
    ) -> list[StructuredMemory]:
        """Unexpired memories at ``at``, by priority then recency."""
        return await self.store.entries(owner, at=at, scopes=scopes)

    async def all(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[StructuredMemory]:
        """Every memory, expired ones included (the person's own view)."""
        return await self.store.entries(owner, limit=limit, offset=offset)

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
        return await self.store.search(owner, query, tags=tags, at=at, scopes=scopes, limit=limit)

    async def by_tag(
        self, owner: str, tag: str, *, at: datetime | None = None
    ) -> list[StructuredMemory]:
        return await self.store.by_tag(owner, tag, at=at)

    async def expiring(
        self, owner: str, *, within_days: float, at: datetime
    ) -> list[StructuredMemory]:
        return await self.store.expiring(owner, within_days=within_days, at=at)

    async def counts(self, owner: str | None = None, *, at: datetime | None = None) -> MemoryCounts:
        return await self.store.counts(owner, at=at)

    async def recall(
        self,
        owner: str,
        *,
        at: datetime,
        scopes: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> str:
        """The recall text of ``owner``'s unexpired memories at ``at`` (``scopes`` = the
        privacy scopes allowed, None = all)."""
        memories = await self.active(owner, at=at, scopes=scopes)
        return render_recall(memories, shown=limit)


def recall_scopes(ctx: TurnContext) -> list[str] | None:
    """Which memories may inform this reply: in a DM all of the person's; in a group only
    those learned (or /remember-ed) in that group's scope, unless the operator shares
    private memory in groups."""
    chat = ctx.message.chat
    if chat.kind is ChatKind.DM or ctx.services.config.share_private_memory_in_groups:
        return None
    return [chat.privacy_scope]


class StructuredRecallStage:
    """Adds the person's structured memories to the prompt (after "recall")."""

    name = "structured_recall"

    def __init__(self, memories: StructuredMemories, *, limit: int = 30, order: int = 35) -> None:
        self.memories = memories
        self.limit = limit
        self.order = order

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        try:
            memories = await self.memories.active(
                ctx.owner, at=ctx.message.sent_at, scopes=recall_scopes(ctx)
            )
        except Exception:
            # A broken memory table must not cost the person their reply.
            log.exception("structured recall failed for a message of %s", ctx.owner)
            memories = []
        ctx.extras["structured_memories"] = memories
        if memories:
            # Memory text came from people and from the model: it is neutralised like user
            # text (so a stored "<!TAG>", "## System" line or fake memory entry cannot
            # steer the prompt) before the engine's own block is rendered around it.
            body = render_prompt_recall(memories, shown=self.limit)
            ctx.sections.append(
                PromptSection(
                    STRUCTURED_TITLE, f"{body}\n\n{STRUCTURED_UNVERIFIED_NOTE}", self.order
                )
            )
        await call_next()
