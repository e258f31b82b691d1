"""PostgreSQL: what is learned about a person (schema version 40), see
:class:`core.storage.api.ProfileStore`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from core.storage.api import ProfileStore
from core.storage.postgres.database import PgDatabase, affected
from core.storage.profile_records import (
    NodeIndexEntry,
    ProfileCount,
    ProfileCounter,
    counter_from_row,
)

# Adds, never replaces: the row lock the UPSERT takes orders concurrent additions, and
# each adds to what the other committed. One statement for all of a message's counters
# (one round trip), in key order so two transactions lock shared rows in the same order.
_ADD = (
    "INSERT INTO profile_counters(owner, kind, name, weight, total, first_at, last_at)"
    " SELECT $1, kind, name, weight, total, first_at, last_at FROM unnest("
    "  $2::text[], $3::text[], $4::float8[], $5::float8[], $6::float8[], $7::float8[]"
    " ) AS added(kind, name, weight, total, first_at, last_at) ORDER BY kind, name"
    " ON CONFLICT (owner, kind, name) DO UPDATE SET"
    "  weight = profile_counters.weight + EXCLUDED.weight,"
    "  total = profile_counters.total + EXCLUDED.total,"
    "  first_at = LEAST(profile_counters.first_at, EXCLUDED.first_at),"
    "  last_at = GREATEST(profile_counters.last_at, EXCLUDED.last_at)"
)

# The addition, then the owner's counters as it left them (one round trip): the prompt's
# "about" section reads them next. Rows it did not touch are the statement's snapshot,
# as a read just before would have seen them.
_ADD_AND_READ = (
    f"WITH added AS ({_ADD} RETURNING kind, name, weight, total, first_at, last_at)"
    " SELECT kind, name, weight, total, first_at, last_at FROM added"
    " UNION ALL SELECT c.kind, c.name, c.weight, c.total, c.first_at, c.last_at"
    " FROM profile_counters c WHERE c.owner = $1"
    " AND NOT EXISTS (SELECT 1 FROM added a WHERE a.kind = c.kind AND a.name = c.name)"
    " ORDER BY kind, name"
)
# People whose counters, as their latest addition left them, are kept for the next read.
MAX_KEPT_COUNTERS = 1024


def _summed(rows: list[tuple[str, str, str, float, float, float, float]]) -> list[list[Any]]:
    """One row per counter (an UPSERT may not touch a row twice), as the statement's
    columns: kinds, names, weights, totals, first and last times."""
    by_key: dict[tuple[str, str], list[Any]] = {}
    for _owner, kind, name, weight, total, first, last in rows:
        seen = by_key.get((kind, name))
        if seen is None:
            by_key[(kind, name)] = [kind, name, weight, total, first, last]
        else:
            seen[2] += weight
            seen[3] += total
            seen[4], seen[5] = min(seen[4], first), max(seen[5], last)
    return [list(column) for column in zip(*by_key.values(), strict=True)]


class PgProfileStore(ProfileStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        # The counters of a person this process serves as its addition returned them,
        # with the grant of their lock it was made under: taken by the next read under
        # that grant (once: a later read asks again). An import elsewhere adding in
        # between is seen by the next message, as if the read came before it.
        self._added: OrderedDict[str, tuple[int, list[ProfileCounter]]] = OrderedDict()

    async def add(self, owner: str, counts: Sequence[ProfileCount]) -> None:
        if counts:
            columns = _summed([c.row(owner) for c in counts])
            grant = self.db.grant.get(owner)
            self._added.pop(owner, None)
            if grant is None:
                await self.db.execute(_ADD, owner, *columns)
                return
            rows = await self.db.fetch(_ADD_AND_READ, owner, *columns)
            self._added[owner] = (grant, [counter_from_row(row) for row in rows])
            if len(self._added) > MAX_KEPT_COUNTERS:
                self._added.popitem(last=False)

    def drop_cached(self, owner: str | None) -> None:
        if owner is None:
            self._added.clear()
        else:
            self._added.pop(owner, None)

    async def counters(
        self, owner: str, kind: str | None = None, *, min_tag_total: float = 0.0
    ) -> list[ProfileCounter]:
        added = self._added.pop(owner, None)
        if added is not None and added[0] == self.db.grant.get(owner):
            return [
                c
                for c in added[1]
                if (kind is None or c.kind == kind)
                and (c.kind != "tag" or c.total >= min_tag_total)
            ]
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
        self.drop_cached(owner)
        return affected(
            await self.db.execute("DELETE FROM profile_counters WHERE owner = $1", owner)
        )
