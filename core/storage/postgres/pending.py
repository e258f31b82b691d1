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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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

    def args(self) -> tuple[Any, ...]:
        """The arguments of :func:`writes` (in its order)."""
        return (
            self.before,
            self.after,
            self.language,
            list(self.emotions),
            [label for label, _ in self.emotions.values()],
            [score for _, score in self.emotions.values()],
        )


def writes(first: int) -> str:
    """The CTEs writing a person's pending writes: the owner is ``$1``, the arguments of
    :meth:`PendingWrites.args` are ``$first`` on. ``person`` returns whether the
    profile is the one written (``swapped``; NULL without one) and the node version,
    moved by one for each node whose emotion was stored (as set_emotion does), in the
    same update (one row, one update a statement)."""
    b, a, lang, ids, labels, scores = (f"${first + i}" for i in range(6))
    return (
        f"emotions AS (UPDATE nodes SET emotion = e.label, emotion_score = e.score"
        f" FROM unnest({ids}::text[], {labels}::text[], {scores}::float8[])"
        " AS e(id, label, score) WHERE nodes.owner = $1 AND nodes.id = e.id RETURNING 1),"
        " person AS (UPDATE users SET"
        f" profile = CASE WHEN users.profile = {b}::text THEN {a}::text ELSE users.profile END,"
        f" language = COALESCE({lang}::text, users.language),"
        " node_version = users.node_version + (SELECT count(*) FROM emotions)"
        f" WHERE users.key = $1 RETURNING users.profile = {a}::text AS swapped,"
        " users.node_version, (SELECT count(*) FROM emotions) AS emotions)"
    )


# The pending writes alone (a read or a waited-for write of the person comes first).
FLUSH = f"WITH {writes(2)} SELECT swapped, node_version, emotions FROM person"
