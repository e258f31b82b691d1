"""PostgreSQL: what is learned about a person (schema version 40), see
:class:`core.storage.api.ProfileStore`."""

from __future__ import annotations

from collections.abc import Sequence

from core.storage.api import ProfileStore
from core.storage.postgres.database import PgDatabase, affected
from core.storage.profile_records import (
    NodeIndexEntry,
    ProfileCount,
    ProfileCounter,
    counter_from_row,
)

# Adds, never replaces: the row lock the UPSERT takes orders concurrent additions, and
# each adds to what the other committed.
_ADD = (
    "INSERT INTO profile_counters(owner, kind, name, weight, total, first_at, last_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7)"
    " ON CONFLICT (owner, kind, name) DO UPDATE SET"
    "  weight = profile_counters.weight + EXCLUDED.weight,"
    "  total = profile_counters.total + EXCLUDED.total,"
    "  first_at = LEAST(profile_counters.first_at, EXCLUDED.first_at),"
    "  last_at = GREATEST(profile_counters.last_at, EXCLUDED.last_at)"
)


class PgProfileStore(ProfileStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def add(self, owner: str, counts: Sequence[ProfileCount]) -> None:
        if not counts:
            return
        # Sorted, so two transactions adding to the same counters lock them in one order
        # (no deadlock between two processes learning from one person).
        rows = sorted(c.row(owner) for c in counts)
        async with self.db.transaction() as conn:
            await conn.executemany(_ADD, rows)

    async def counters(
        self, owner: str, kind: str | None = None, *, min_tag_total: float = 0.0
    ) -> list[ProfileCounter]:
        rows = await self.db.fetch(
            "SELECT kind, name, weight, total, first_at, last_at FROM profile_counters"
            " WHERE owner = $1 AND ($2::text IS NULL OR kind = $2)"
            " AND (kind <> 'tag' OR total >= $3)"
            " ORDER BY kind, name",
            owner,
            kind,
            min_tag_total,
        )
        return [counter_from_row(row) for row in rows]

    async def node_index(self, owner: str) -> list[NodeIndexEntry]:
        rows = await self.db.fetch(
            "SELECT type, to_char(to_timestamp(ts) AT TIME ZONE 'UTC', 'YYYY-MM') AS period,"
            " count(*) AS n FROM nodes WHERE owner = $1"
            " GROUP BY period, type ORDER BY period, type",
            owner,
        )
        return [NodeIndexEntry(str(r["type"]), str(r["period"]), int(r["n"])) for r in rows]

    async def delete_owner(self, owner: str) -> int:
        return affected(
            await self.db.execute("DELETE FROM profile_counters WHERE owner = $1", owner)
        )
