"""Writes made with ``wait=False`` while this process holds a person's lock: the
emotional state's compare-and-set, the emotion read in the message, the person's
language. None of them is waited for before the reply (as with SQLite, which commits them
in the background); here they are not sent on their own either, but ride on the
statement that lets go of the person's lock (core.storage.postgres.locks), a round trip
the message makes anyway. The next holder of the lock, in any process, sees them: that
statement updates the person's user row, which the next holder's lock statement
updates too, so it waits for this one's commit.

A crash, or a server that goes away before the release, loses them (as a crash loses
SQLite's background writes), never a message. Before the release, the person's nodes
read from PostgreSQL come with the emotion reads still to send (the process's own
writes are seen); a read of their user row, a waited-for write or an export sends them
first (:meth:`PgDatabase.flush_pending`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Sums = list[float]  # weight, total, first and last time (epoch seconds) of a counter


def add_to_counter(
    counters: dict[tuple[str, str], Sums], key: tuple[str, str], sums: Sequence[float]
) -> None:
    """One more addition to the counter ``key``: summed as :func:`counters_added`'s
    statement adds them (the same float operations)."""
    weight, total, first, last = sums
    seen = counters.get(key)
    if seen is None:
        counters[key] = [weight, total, first, last]
    else:
        seen[0] += weight
        seen[1] += total
        seen[2], seen[3] = min(seen[2], first), max(seen[3], last)


@dataclass(slots=True)
class PendingWrites:
    """One person's writes waiting for the release of their lock."""

    # The profile as last seen here, and as the edits since left it (compare and set).
    before: str | None = None
    after: str | None = None
    # The edits that made ``after``: made again on the stored profile if the
    # compare-and-set finds another write got there first.
    edits: list[Callable[[dict[str, Any]], Any]] = field(default_factory=list)
    language: str | None = None
    emotions: dict[str, tuple[str, float]] = field(default_factory=dict)  # node id -> read
    # Additions to the learned profile's counters (core.storage.postgres.profiles),
    # summed per (kind, name): weight, total, first and last time.
    counters: dict[tuple[str, str], Sums] = field(default_factory=dict)

    def args(self) -> tuple[Any, ...]:
        """The arguments of :func:`writes` (in its order)."""
        keys = sorted(self.counters)  # the order rows are locked in, as every addition
        return (
            self.before,
            self.after,
            self.language,
            list(self.emotions),
            [label for label, _ in self.emotions.values()],
            [score for _, score in self.emotions.values()],
            [kind for kind, _ in keys],
            [name for _, name in keys],
            *([self.counters[key][i] for key in keys] for i in range(4)),
        )


def writes(first: int) -> str:
    """The CTEs writing a person's pending writes: the owner is ``$1``, the arguments of
    :meth:`PendingWrites.args` are ``$first`` on. ``person`` returns whether the
    profile is the one written (``swapped``; NULL without one), the node version, moved
    by one for each node whose emotion was stored (as set_emotion does), and the
    counters' version, moved by one when counters were added (as
    core.storage.postgres.profiles adds them), in the same update (one row, one update a
    statement). On the lock's connection the commit does not wait for the log's flush:
    like the emotional state, the counters are derived from messages already stored,
    and SQLite (``synchronous=NORMAL``) may lose its latest commits to a power cut too;
    a session waiting for the disk would hold up every lock statement queued on it."""
    b, a, lang, ids, labels, scores, kinds, names, weights, totals, firsts, lasts = (
        f"${first + i}" for i in range(12)
    )
    # ``person`` reads ``counted``: the counters' rows are locked before the user row,
    # in every statement that adds to them (no two additions wait for each other).
    return (
        f"emotions AS (UPDATE nodes SET emotion = e.label, emotion_score = e.score"
        f" FROM unnest({ids}::text[], {labels}::text[], {scores}::float8[])"
        " AS e(id, label, score) WHERE nodes.owner = $1 AND nodes.id = e.id RETURNING 1),"
        f" counted AS ({counters_added(kinds, names, weights, totals, firsts, lasts)}"
        " RETURNING 1),"
        " person AS (UPDATE users SET"
        f" profile = CASE WHEN users.profile = {b}::text THEN {a}::text ELSE users.profile END,"
        f" language = COALESCE({lang}::text, users.language),"
        " node_version = users.node_version + (SELECT count(*) FROM emotions),"
        " counters_version = users.counters_version + (SELECT least(count(*), 1) FROM counted)"
        f" WHERE users.key = $1 RETURNING users.profile = {a}::text AS swapped,"
        " users.node_version, (SELECT count(*) FROM emotions) AS emotions,"
        " users.counters_version)"
    )


def counters_added(
    kinds: str, names: str, weights: str, totals: str, firsts: str, lasts: str
) -> str:
    """Adds to the owner's (``$1``) counters, never replaces: the row lock the UPSERT
    takes orders concurrent additions, and each adds to what the other committed; in key
    order, so two transactions lock shared rows in the same order."""
    return (
        "INSERT INTO profile_counters(owner, kind, name, weight, total, first_at, last_at)"
        " SELECT $1, kind, name, weight, total, first_at, last_at FROM unnest("
        f"  {kinds}::text[], {names}::text[], {weights}::float8[], {totals}::float8[],"
        f"  {firsts}::float8[], {lasts}::float8[]"
        " ) AS added(kind, name, weight, total, first_at, last_at)"
        ' ORDER BY kind COLLATE "C", name COLLATE "C"'
        " ON CONFLICT (owner, kind, name) DO UPDATE SET"
        "  weight = profile_counters.weight + EXCLUDED.weight,"
        "  total = profile_counters.total + EXCLUDED.total,"
        "  first_at = LEAST(profile_counters.first_at, EXCLUDED.first_at),"
        "  last_at = GREATEST(profile_counters.last_at, EXCLUDED.last_at)"
    )


# The pending writes alone (a read or a waited-for write of the person comes first).
FLUSH = f"WITH {writes(2)} SELECT swapped, node_version, emotions, counters_version FROM person"
