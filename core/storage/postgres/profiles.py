"""PostgreSQL: what is learned about a person (schema version 40), see
:class:`core.storage.api.ProfileStore`."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from core.storage.api import ProfileStore
from core.storage.postgres.database import PgDatabase, affected
from core.storage.postgres.pending import PendingWrites, Sums, add_to_counter, counters_added
from core.storage.profile_records import NodeIndexEntry, ProfileCount, ProfileCounter
from core.storage.records import from_ts

# A direct addition (the person's lock is not held here: an import, a message learned
# from after its lock was let go): the counters, then the person's counters version
# moved by one in the same statement (their rows locked before the user row, as on the
# release, core.storage.postgres.pending), returned.
_ADD = (
    f"WITH added AS ({counters_added('$2', '$3', '$4', '$5', '$6', '$7')} RETURNING 1),"
    " bumped AS (UPDATE users SET counters_version = users.counters_version"
    " + (SELECT least(count(*), 1) FROM added) WHERE key = $1 RETURNING counters_version)"
    " SELECT (SELECT counters_version FROM bumped)"
)
# The owner's counters (of kind $2, if given; keyword tags counted at least $3 times,
# and those named in $4 whatever their count: this process adds to them before they
# are stored), by kind then name as SQLite and Python order them.
_READ = (
    "SELECT kind, name, weight, total, first_at, last_at FROM profile_counters"
    " WHERE owner = $1 AND ($2::text IS NULL OR kind = $2)"
    " AND (kind <> 'tag' OR total >= $3 OR name = ANY($4::text[]))"
    ' ORDER BY kind COLLATE "C", name COLLATE "C"'
)
# A person's counters are kept (and come with their lock, core.storage.postgres.locks)
# when they have at most this many; others are read each time, as before.
KEPT_COUNTERS = 2000
# What is kept at most, the least recently served person dropped first: people, and
# counters across them (a counter kept costs ~250 bytes).
MAX_KEPT_PEOPLE = 10_000
MAX_KEPT_ROWS = 200_000


class _Kept:
    """A person's counters as stored at their counters version (None: more than
    KEPT_COUNTERS of them), and the grant of their lock that found them current."""

    __slots__ = ("counters", "grant", "version")

    def __init__(self, version: int, counters: dict[tuple[str, str], Sums] | None) -> None:
        self.version = version
        self.counters = counters
        self.grant: int | None = None

    @property
    def rows(self) -> int:
        return 0 if self.counters is None else len(self.counters)


def _plus(
    base: Mapping[tuple[str, str], Sums], added: Mapping[tuple[str, str], Sums]
) -> dict[tuple[str, str], Sums]:
    """``base`` with ``added`` added, as the statement adds."""
    out = {key: list(sums) for key, sums in base.items()}
    for key, sums in added.items():
        add_to_counter(out, key, sums)
    return out


def _sum_into(
    counters: dict[tuple[str, str], Sums], owner: str, counts: Sequence[ProfileCount]
) -> None:
    """Adds ``counts`` to ``counters``, one entry per counter (an UPSERT may not touch a
    row twice)."""
    for count in counts:
        _owner, kind, name, *sums = count.row(owner)
        add_to_counter(counters, (kind, name), sums)


def _columns(added: Mapping[tuple[str, str], Sums]) -> list[list[Any]]:
    """The statement's columns, in key order: kinds, names, weights, totals, firsts, lasts."""
    keys = sorted(added)
    return [
        [kind for kind, _ in keys],
        [name for _, name in keys],
        *([added[key][i] for key in keys] for i in range(4)),
    ]


class PgProfileStore(ProfileStore):
    """The counters of a person this process serves are kept at their counters version
    (``users.counters_version``, moved by every addition in its own statement), and
    checked by the lock's statement, which brings them when they moved. While the
    process holds the person's lock, additions wait for its release and ride on it
    (core.storage.postgres.pending, with the emotional state), and a read is the kept
    counters plus those additions: no statement of their own. An import elsewhere adding
    meanwhile is seen by the next message, as if the read came before it."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._kept_rows = 0
        db.counters_kept = self._kept_version
        db.counters_granted = self._granted
        db.pending_hooks.append(self._pending_written)

    def _kept_version(self, owner: str) -> int:
        kept = self._kept.get(owner)
        return -1 if kept is None else kept.version

    def _granted(self, owner: str, version: int, counters: str | None) -> None:
        """``owner``'s lock was granted at counters version ``version``, with their
        counters (JSON) when the version kept here was another."""
        kept = self._drop(owner)
        if counters is not None:
            rows = json.loads(counters)
            kept = _Kept(version, {(r[0], r[1]): [float(x) for x in r[2:6]] for r in rows})
        elif kept is None or kept.version != version:
            kept = _Kept(version, None)  # more than KEPT_COUNTERS
        kept.grant = self.db.grant.get(owner)
        self._keep(owner, kept)

    def _keep(self, owner: str, kept: _Kept) -> None:
        self._kept[owner] = kept
        self._kept_rows += kept.rows
        while (len(self._kept) > MAX_KEPT_PEOPLE or self._kept_rows > MAX_KEPT_ROWS) and len(
            self._kept
        ) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._kept_rows -= dropped.rows

    def _drop(self, owner: str) -> _Kept | None:
        kept = self._kept.pop(owner, None)
        if kept is not None:
            self._kept_rows -= kept.rows
        return kept

    def _moved(
        self, owner: str, version: int | None, added: Mapping[tuple[str, str], Sums]
    ) -> None:
        """This process added ``added`` to ``owner``'s counters, moving their version to
        ``version`` (None: not stored, or no such person)."""
        kept = self._drop(owner)
        if kept is None or version is None or kept.version != version - 1:
            return  # another addition came between: read them again
        kept.version = version
        if kept.counters is not None:
            kept.counters = _plus(kept.counters, added)
            if len(kept.counters) > KEPT_COUNTERS:
                kept.counters = None
        self._keep(owner, kept)

    async def _pending_written(
        self, owner: str, pending: PendingWrites, row: Mapping[str, Any] | None
    ) -> None:
        if pending.counters:
            version = None if row is None else row["counters_version"]
            self._moved(owner, None if version is None else int(version), pending.counters)

    async def add(self, owner: str, counts: Sequence[ProfileCount]) -> None:
        if not counts:
            return
        if self.db.defers(owner):
            _sum_into(self.db.pending_for(owner).counters, owner, counts)
            return
        added: dict[tuple[str, str], Sums] = {}
        _sum_into(added, owner, counts)
        version = await self.db.fetchval(_ADD, owner, *_columns(added))
        self._moved(owner, None if version is None else int(version), added)

    def drop_cached(self, owner: str | None) -> None:
        if owner is None:
            self._kept.clear()
            self._kept_rows = 0
        else:
            self._drop(owner)

    async def counters(
        self, owner: str, kind: str | None = None, *, min_tag_total: float = 0.0
    ) -> list[ProfileCounter]:
        pending = self.db.pending.get(owner)
        added = pending.counters if pending is not None else {}
        kept = self._kept.get(owner)
        base: Mapping[tuple[str, str], Sums]
        if (
            kept is not None
            and kept.counters is not None
            and self.db.defers(owner)
            and kept.grant == self.db.grant.get(owner)
        ):
            self._kept.move_to_end(owner)
            base = kept.counters
        else:
            rows = await self.db.fetch(
                _READ, owner, kind, min_tag_total, [n for k, n in added if k == "tag"]
            )
            base = {
                (r[0], r[1]): [float(r[2]), float(r[3]), float(r[4]), float(r[5])] for r in rows
            }
        found = _plus(base, added) if added else base
        return [
            ProfileCounter(k, n, w, t, from_ts(first), from_ts(last))
            for (k, n), (w, t, first, last) in sorted(found.items())
            if (kind is None or k == kind) and (k != "tag" or t >= min_tag_total)
        ]

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
        pending = self.db.pending.get(owner)
        if pending is not None:
            pending.counters.clear()  # nothing of them is added after this
        return affected(
            await self.db.execute("DELETE FROM profile_counters WHERE owner = $1", owner)
        )
