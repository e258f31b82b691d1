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
from collections.abc import Callable, Sequence

import aiosqlite

from core.storage.database import Database, Migration

# Stands for every owner: a change to all of them at once (re-embedding every vector).
EVERY_OWNER = "*"
# Stands for no owner: the row a prune at open writes so that readers notice it.
NOBODY = ""
# Rows older than this are deleted when another change is written: a reader that has not
# looked for a whole day (a process that served no message) drops every cache instead.
KEEP_CHANGES_S = 24 * 3600.0
# A reader finding more owners than this at once drops every cache: cheaper than that many
# single drops, and it bounds the rows read on the event loop.
MAX_OWNERS_PER_CATCH_UP = 512

MIGRATIONS = [
    Migration(
        3,
        "owner changes: other processes drop their caches of changed owners",
        """
        CREATE TABLE owner_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL UNIQUE,
            at REAL NOT NULL
        );
        CREATE INDEX owner_changes_at ON owner_changes(at);
        CREATE TABLE owner_changes_pruned (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            seq INTEGER NOT NULL
        );
        INSERT INTO owner_changes_pruned(one, seq) VALUES (1, 0);
        """,
    )
]

# Recording a change: prune (watermark first, from the rows about to go), then the row.
# Plain statements with no values passed between them, so the same list runs on a raw
# connection (group commits, the writer process) and on aiosqlite's (transactions).
_PRUNE = (
    "UPDATE owner_changes_pruned SET seq = (SELECT max(seq) FROM owner_changes WHERE at < ?1)"
    " WHERE (SELECT max(seq) FROM owner_changes WHERE at < ?1) > seq",
    "DELETE FROM owner_changes WHERE at < ?1",
)
# REPLACE: the owner's earlier row goes and a new one takes the next ``seq``: AUTOINCREMENT
# hands out numbers above every one ever committed (deleted rows' too), and SQLite commits
# one writer at a time, so rows become visible in ``seq`` order and "seq > the last seen"
# never skips one.
_RECORD = "INSERT OR REPLACE INTO owner_changes(owner, at) VALUES (?, ?)"
_SINCE = "SELECT seq, owner FROM owner_changes WHERE seq > ? ORDER BY seq LIMIT ?"


def record_change(raw: sqlite3.Connection, owner: str, at: float) -> None:
    """Record that ``owner``'s data changed, inside the caller's write transaction on a
    raw connection (a :meth:`Database.run` write function)."""
    for statement in _PRUNE:
        raw.execute(statement, (at - KEEP_CHANGES_S,))
    raw.execute(_RECORD, (owner, at))


WriteFn = Callable[[sqlite3.Connection], bool]


def announced(write: WriteFn, owner: str, *, announce: bool = True) -> WriteFn:
    """``write`` (a :meth:`Database.run` write function that says whether it wrote
    anything) made to record a change of ``owner`` in the same transaction when it did;
    ``write`` itself when not ``announce``. Picklable when ``write`` is (the writer
    process)."""
    if not announce:
        return write
    return functools.partial(_write_announced, write=write, owner=owner, at=time.time())


def _write_announced(raw: sqlite3.Connection, write: WriteFn, owner: str, at: float) -> bool:
    if not write(raw):
        return False
    record_change(raw, owner, at)
    return True


async def record_change_in(
    conn: aiosqlite.Connection, owners: str | Sequence[str], at: float | None = None
) -> None:
    """:func:`record_change` inside a :meth:`Database.transaction` (forgetting, bulk
    changes), for one owner or several."""
    at = time.time() if at is None else at
    for statement in _PRUNE:
        await conn.execute(statement, (at - KEEP_CHANGES_S,))
    for owner in [owners] if isinstance(owners, str) else dict.fromkeys(owners):
        await conn.execute(_RECORD, (owner, at))


def _changes_since(raw: sqlite3.Connection, seen: int) -> tuple[int, list[str]] | None:
    """(newest seq, owners changed after ``seen``); ``[EVERY_OWNER]`` when the rows since
    cannot all be told (pruned, or too many); None when nothing changed (the usual case:
    one primary-key probe). May run twice (see ``Database._call``): reads only."""
    rows = raw.execute(_SINCE, (seen, MAX_OWNERS_PER_CATCH_UP + 1)).fetchall()
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
