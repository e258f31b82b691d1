"""SQLite: what is learned about a person (schema version 40), see
:class:`core.storage.api.ProfileStore`."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence

from core.storage.api import ProfileStore
from core.storage.database import Database
from core.storage.profile_records import (
    NodeIndexEntry,
    ProfileCount,
    ProfileCounter,
    counter_from_row,
)

# Adds, never replaces: what another process added meanwhile stays counted.
_ADD = (
    "INSERT INTO profile_counters(owner, kind, name, weight, total, first_at, last_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT(owner, kind, name) DO UPDATE SET"
    "  weight = weight + excluded.weight,"
    "  total = total + excluded.total,"
    "  first_at = min(first_at, excluded.first_at),"
    "  last_at = max(last_at, excluded.last_at)"
)


def _add_rows(
    raw: sqlite3.Connection, *, rows: list[tuple[str, str, str, float, float, float, float]]
) -> None:
    raw.executemany(_ADD, rows)


class SQLiteProfileStore(ProfileStore):
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, owner: str, counts: Sequence[ProfileCount]) -> None:
        if counts:
            # Module-level and picklable: it may run in the writer process, in a group
            # commit with other people's writes.
            await self.db.run(functools.partial(_add_rows, rows=[c.row(owner) for c in counts]))

    async def counters(
        self, owner: str, kind: str | None = None, *, min_tag_total: float = 0.0
    ) -> list[ProfileCounter]:
        rows = await self.db.fetchall(
            "SELECT kind, name, weight, total, first_at, last_at FROM profile_counters"
            " WHERE owner = ? AND (? IS NULL OR kind = ?) AND (kind <> 'tag' OR total >= ?)"
            " ORDER BY kind, name",
            (owner, kind, kind, min_tag_total),
        )
        return [counter_from_row(row) for row in rows]

    async def node_index(self, owner: str) -> list[NodeIndexEntry]:
        rows = await self.db.fetchall(
            "SELECT type, strftime('%Y-%m', ts, 'unixepoch') AS period, count(*) AS n"
            " FROM nodes WHERE owner = ? GROUP BY period, type ORDER BY period, type",
            (owner,),
        )
        return [NodeIndexEntry(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    async def delete_owner(self, owner: str) -> int:
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM profile_counters WHERE owner = ?", (owner,))
            return cur.rowcount or 0
