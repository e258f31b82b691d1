"""Which owners' data changed behind this process's back (schema version 3).

Each process keeps per-owner caches (a person's latest nodes, vector matrix, user row...)
and drops them itself when IT writes that owner's data. Another process sharing the
database file (``akira-bot memory forget``/``import`` beside the running bot, or engine
workers with people sharded between them) cannot reach those caches: without this, the
bot kept showing a forgotten person's recent turns.

So every out-of-band change of an owner's data (forgetting, deleting, importing) writes
the owner's key to ``owner_changes`` IN THE SAME TRANSACTION as the change, and every
process calls :meth:`OwnerChanges.catch_up` (through ``SQLiteStorage.catch_up``) before it
serves a message: it reads the rows written since it last looked, by primary key, and drops
what it keeps of those owners. A change is visible to a reader only once committed, and
committed together with its row, so a reader that has seen the row sees the change.

The table keeps one row per owner (the newest change: a change replaces the row, taking a
new, higher ``seq``), so a 100,000-message import costs a reader as much as one change.
Rows older than :data:`KEEP_CHANGES_S` are deleted whenever a change is written (and when
a storage opens): a forgotten person's key must not stay in the file for good. Pruning
raises ``owner_changes_pruned.seq`` to the highest ``seq`` it deleted and always writes a
newer row (the change being recorded; at open, one for :data:`NOBODY`), so a reader finds
a new row, then the mark: one that has not seen that far missed rows, does not know whose,
and drops every cache (correct, only slower for a while). A reader looks at the mark only
when it found new rows: nothing changed costs one primary-key probe.

Writes made by a process for the people it serves (a new message's node and graph rows,
emotion and profile updates) are NOT recorded: they come from the one process that serves
that person, which keeps its own caches up to date, and they are the hot path.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Sequence

import aiosqlite

from core.storage.database import Database
from core.storage.sqlite_rows import (
    EVERY_OWNER,
    KEEP_CHANGES_S,
    MAX_OWNERS_PER_CATCH_UP,
    NOBODY,
    PRUNE,
    RECORD,
    SINCE,
    WriteFn,
    announced,
    record_change,
)
from core.storage.sqlite_schema import CHANGE_MIGRATIONS

# The SQL that records a change, and the write functions that do it inside a group
# commit, live with the other write functions (core.storage.sqlite_rows), which the
# writer process loads; the table is migration 3 (core.storage.sqlite_schema).
MIGRATIONS = CHANGE_MIGRATIONS

__all__ = [
    "EVERY_OWNER",
    "KEEP_CHANGES_S",
    "MAX_OWNERS_PER_CATCH_UP",
    "MIGRATIONS",
    "NOBODY",
    "OwnerChanges",
    "WriteFn",
    "announced",
    "record_change",
    "record_change_in",
]


async def record_change_in(
    conn: aiosqlite.Connection, owners: str | Sequence[str], at: float | None = None
) -> None:
    """:func:`record_change` inside a :meth:`Database.transaction` (forgetting, bulk
    changes), for one owner or several."""
    at = time.time() if at is None else at
    for statement in PRUNE:
        await conn.execute(statement, (at - KEEP_CHANGES_S,))
    for owner in [owners] if isinstance(owners, str) else dict.fromkeys(owners):
        await conn.execute(RECORD, (owner, at))


def _changes_since(raw: sqlite3.Connection, seen: int) -> tuple[int, list[str]] | None:
    """(newest seq, owners changed after ``seen``); ``[EVERY_OWNER]`` when the rows since
    cannot all be told (pruned, or too many); None when nothing changed (the usual case:
    one primary-key probe). May run twice (see ``Database._call``): reads only."""
    rows = raw.execute(SINCE, (seen, MAX_OWNERS_PER_CATCH_UP + 1)).fetchall()
    if not rows:
        return None
    newest = int(rows[-1][0])
    # Read after the rows: a prune that removed rows this reader never saw had raised the
    # mark before those rows were read (a later prune only raises it further).
    pruned = int(raw.execute("SELECT seq FROM owner_changes_pruned").fetchone()[0])
    if pruned > seen:
        return _every_owner(raw, newest)
    if len(rows) > MAX_OWNERS_PER_CATCH_UP:
        return _every_owner(raw, newest)
    owners = [str(row[1]) for row in rows if row[1] != NOBODY]
    if EVERY_OWNER in owners:
        return newest, [EVERY_OWNER]
    return newest, owners


def _every_owner(raw: sqlite3.Connection, newest: int) -> tuple[int, list[str]]:
    """Every owner changed, up to the newest row now (dropping everything covers it)."""
    row = raw.execute("SELECT max(seq) FROM owner_changes").fetchone()
    return max(newest, int(row[0] or 0)), [EVERY_OWNER]


def _newest_seq(raw: sqlite3.Connection) -> int:
    """The newest ``seq`` handed out so far, pruned rows counted (after a prune that
    emptied the table, starting from 0 would look like having missed them)."""
    row = raw.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM owner_changes), 0),"
        " (SELECT seq FROM owner_changes_pruned))"
    ).fetchone()
    return int(row[0])


class OwnerChanges:
    """One process's reader of ``owner_changes``: what it has seen so far."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.seen = 0  # the highest ``seq`` read

    async def start(self) -> None:
        """From the newest change on (a process that just opened has no cache to drop,
        so it does not replay history); prune what is older than the bound."""
        cutoff = time.time() - KEEP_CHANGES_S
        stale = await self.db.fetchone(
            "SELECT 1 FROM owner_changes WHERE at < ? LIMIT 1", (cutoff,), lookup=True
        )
        if stale is not None:  # else no write at all: opening stays read-only
            async with self.db.transaction() as conn:
                await record_change_in(conn, NOBODY)
        self.seen = await self.db.run(_newest_seq, write=False, lookup=True)

    async def changed_owners(self) -> list[str]:
        """The owners changed since the last call (``[EVERY_OWNER]``: every owner may
        have), and from now on they count as seen. Empty when nothing changed: one
        lookup by primary key on the event loop's read connection."""
        found = await self.db.run(
            functools.partial(_changes_since, seen=self.seen), write=False, lookup=True
        )
        if found is None:
            return []
        newest, owners = found
        self.seen = max(self.seen, newest)  # two callers may overlap: never go back
        return owners
