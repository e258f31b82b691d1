"""Each person's latest nodes, kept in memory by the node stores: every message asks for
its person's latest nodes several times (the chat's previous turn, the recent history,
the latest node to link to, the message a reply answers). SQLite keeps them for as long
as they are not evicted (only the process serving a person writes their nodes);
PostgreSQL while the process holds the person's lock, checked against the person's node
version (core.storage.postgres.nodes). The questions are asked of the kept rows the same
way on both (the ``*_rows`` filters and :func:`matching`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.storage.records import MemoryNode, NodeRow, node_from_row, to_ts

# These many of each person's latest nodes are kept, for this many nodes in all.
LATEST_PER_OWNER = 32
MAX_LATEST_NODES = 64_000


@dataclass
class LatestNodes:
    """One person's latest nodes as stored (the columns of :data:`NODE_COLUMNS`), oldest
    first, in the order SQLite sorts them (time, then insertion). ``complete``: these are
    all of the person's nodes; otherwise they are the latest ``LATEST_PER_OWNER``, and an
    answer not found among them has to come from SQLite."""

    rows: list[NodeRow] = field(default_factory=list)
    complete: bool = False
    # The person's node version these rows are (PostgreSQL; None on SQLite).
    version: int | None = None

    def newest_first(self) -> Iterator[NodeRow]:
        return reversed(self.rows)

    @property
    def oldest_ts(self) -> float:
        return float(self.rows[0].ts) if self.rows else float("inf")

    def add(self, new: NodeRow) -> None:
        if any(row.id == new.id for row in self.rows):
            return  # already read from the database
        if not self.complete and self.rows and new.ts < self.rows[0].ts:
            return  # older than every kept node: not among the latest
        # A new row sorts after every stored row of the same time (its rowid is larger).
        at = len(self.rows)
        while at > 0 and self.rows[at - 1].ts > new.ts:
            at -= 1
        self.rows.insert(at, new)
        if len(self.rows) > LATEST_PER_OWNER:
            del self.rows[0]
            self.complete = False

    def retag(self, node_id: str, tags: str) -> None:
        """A kept node's tags (its row's JSON) rewritten in storage, once its vector came."""
        for i, row in enumerate(self.rows):
            if row.id == node_id:
                self.rows[i] = row._replace(tags=tags)


def node_from_kept(row: NodeRow) -> MemoryNode:
    """A fresh node from kept columns (callers may change what they get)."""
    return node_from_row(row._asdict())


RowFilter = Callable[[NodeRow], bool]


def matching(
    latest: LatestNodes, limit: int, keep: RowFilter, *, since: float | None = None
) -> list[NodeRow] | None:
    """Up to ``limit`` of the kept rows that ``keep`` accepts, newest first; None when
    the kept rows cannot tell (the answer may lie among older nodes: ask the database).
    ``since``: rows older than that time are never wanted."""
    found: list[NodeRow] = []
    for row in latest.newest_first():
        if len(found) >= limit:
            break
        if keep(row):
            found.append(row)
    # Every node not kept is older than (or as old as) the oldest kept one.
    if len(found) >= limit or latest.complete or (since is not None and latest.oldest_ts < since):
        return found
    return None


def recent_rows(
    scopes: Sequence[str] | None, chat_id: str | None, before: datetime | None
) -> RowFilter:
    """The rows :meth:`NodeStore.recent` answers with."""
    allowed = set(scopes) if scopes is not None else None
    until = to_ts(before) if before is not None else None
    return lambda row: (
        (allowed is None or row.scope in allowed)
        and (chat_id is None or row.chat_id == chat_id)
        and (until is None or row.ts < until)
    )


def latest_rows(at: datetime, exclude: str | None, node_type: str | None) -> RowFilter:
    """The rows :meth:`GraphStore.latest_node` answers with."""
    until, skip = to_ts(at), exclude or ""
    return lambda row: (
        row.ts <= until and row.id != skip and (node_type is None or row.type == node_type)
    )


def chat_rows(chat_id: str, at: datetime, since: datetime) -> RowFilter:
    """The rows :meth:`GraphStore.previous_in_chat` answers with."""
    until, first = to_ts(at), to_ts(since)
    return lambda row: first <= row.ts <= until and row.chat_id == chat_id


def message_rows(platform_message_id: str) -> RowFilter:
    """The rows :meth:`NodeStore.by_platform_message` answers with."""
    return lambda row: row.platform_message_id == platform_message_id
