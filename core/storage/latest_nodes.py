"""Each person's latest nodes, kept in memory by the SQLite node store: every message
asks for its person's latest nodes several times (the chat's previous turn, the recent
history, the latest node to link to, the message a reply answers)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from core.storage.records import MemoryNode, node_from_row
from core.storage.sqlite_rows import NodeRow

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


def node_from_kept(row: NodeRow) -> MemoryNode:
    """A fresh node from kept columns (callers may change what they get)."""
    return node_from_row(row._asdict())
