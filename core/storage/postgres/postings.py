"""The latest tag and entity postings of the people this process serves, kept while
their node version holds (as their latest nodes and vectors are, docs/storage.md):
each node stored asks what earlier nodes share its tags and name its entities
(core.memory.connections), a statement a node otherwise. What is kept of a tag or an
entity is its latest ``limit`` postings (all of them when it has fewer), brought up to
date by this process's own writes. A person with few postings (at most
:data:`WHOLE_ROWS` of each kind) has all of them read at once: a new node's new words
then need no question. Otherwise a tag or entity not asked about yet is read from
PostgreSQL, with the others of that question, and kept from then on."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence

from core.storage.records import MemoryNode, count_shared_tags, to_ts

MAX_KEPT_OWNERS = 2_000  # people whose postings are kept, least recently served dropped
WHOLE_ROWS = 2_000  # postings of each kind a person may have to be read whole


class OwnerPostings:
    """One person's kept postings at their node version ``version``: tag -> (ts, node
    id, the node's tag count), entity -> (ts, node id, the node's scope); oldest first,
    the latest ``limit`` of each."""

    __slots__ = ("complete", "entities", "entity_limit", "tag_limit", "tags", "version")

    def __init__(
        self, version: int, tag_limit: int, entity_limit: int, *, complete: bool = False
    ) -> None:
        self.version = version
        # Every tag and entity of the person is here: one that is not has no postings.
        self.complete = complete
        self.tag_limit = tag_limit
        self.entity_limit = entity_limit
        self.tags: dict[str, list[tuple[float, str, int]]] = {}
        self.entities: dict[str, list[tuple[float, str, str]]] = {}

    def candidates(self, tags: Sequence[str], per_tag: int) -> dict[str, tuple[int, int]]:
        """As GraphStore.tag_candidates, from what is kept (every tag of ``tags`` is)."""
        found: dict[str, tuple[int, int]] = {}
        for tag in tags:
            kept = self.tags.get(tag, [])[-per_tag:] if per_tag > 0 else []
            count_shared_tags(found, ((node_id, ntags) for _, node_id, ntags in kept))
        return found

    def mentions(
        self,
        entities: Sequence[str],
        per_entity: int,
        until: float,
        scopes: Sequence[str] | None = None,
    ) -> dict[str, list[str]] | None:
        """As GraphStore.entity_mentions (``scopes`` None: every scope), newest first;
        None when what is kept cannot tell (fewer than ``per_entity`` kept ones are at
        or before ``until`` and in ``scopes`` while older ones may be missing)."""
        allowed = set(scopes) if scopes is not None else None
        found: dict[str, list[str]] = {}
        for entity in entities:
            kept = self.entities.get(entity, [])
            upto = kept[: bisect.bisect_right(kept, (until, "\U0010ffff"))]
            if allowed is not None:
                upto = [posting for posting in upto if posting[2] in allowed]
            if len(upto) < per_entity and len(kept) >= self.entity_limit:
                return None
            if upto:
                found[entity] = [node_id for _, node_id, _ in reversed(upto[-per_entity:])]
        return found

    def add(self, node: MemoryNode, tags: Sequence[str], entities: Sequence[str]) -> None:
        """A node this process stored (its distinct ``tags`` and ``entities``): its
        postings, where the tag or entity is kept."""
        ts, node_id = to_ts(node.timestamp), node.id
        for tag in tags:
            kept_tag = self.tags.setdefault(tag, []) if self.complete else self.tags.get(tag)
            if kept_tag is not None:
                bisect.insort(kept_tag, (ts, node_id, len(tags)))
                del kept_tag[: -self.tag_limit]
        for entity in entities:
            kept_entity = (
                self.entities.setdefault(entity, []) if self.complete else self.entities.get(entity)
            )
            if kept_entity is not None:
                bisect.insort(kept_entity, (ts, node_id, node.scope))
                del kept_entity[: -self.entity_limit]


class KeptPostings:
    """:class:`OwnerPostings` per person, bounded."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, OwnerPostings] = OrderedDict()

    def get(self, owner: str, version: int | None) -> OwnerPostings | None:
        kept = self._owners.get(owner)
        if kept is None:
            return None
        if version is None or kept.version != version:
            del self._owners[owner]  # another process wrote since: read again
            return None
        self._owners.move_to_end(owner)
        return kept

    def keep(self, owner: str, kept: OwnerPostings) -> None:
        self._owners[owner] = kept
        self._owners.move_to_end(owner)
        while len(self._owners) > MAX_KEPT_OWNERS:
            self._owners.popitem(last=False)

    def stored(
        self, version: int | None, node: MemoryNode, tags: Sequence[str], entities: Sequence[str]
    ) -> None:
        """A node this process stored, moving its owner's version to ``version``."""
        owner = node.owner
        kept = self._owners.get(owner)
        if kept is None:
            return
        if version is None or kept.version != version - 1:
            del self._owners[owner]
            return
        kept.add(node, tags, entities)
        kept.version = version

    def moved(self, owner: str, version: int) -> None:
        """An emotion read moved ``owner``'s version without a node."""
        kept = self._owners.get(owner)
        if kept is not None and kept.version == version - 1:
            kept.version = version

    def drop(self, owner: str | None) -> None:
        if owner is None:
            self._owners.clear()
        else:
            self._owners.pop(owner, None)
