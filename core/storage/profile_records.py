"""The records of what is learned about a person (core.profile), backend-free: the
counters both backends keep and the node index they compute.

A counter is a sum kept per person, kind and name ("topic"/"work", "style"/"emoji"...),
with two sums: ``weight``, the forward-decayed sum (each addition weighted by its
message's time, see :mod:`core.profile.decay`), and ``total``, the plain one. Both only
ever grow by addition, so storage adds them with an UPSERT (no read-modify-write) and two
processes learning from one person at once lose nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.storage.records import from_ts, to_ts


@dataclass(frozen=True, slots=True)
class ProfileCount:
    """One addition to a counter, from a message said at ``at``."""

    kind: str  # "topic", "tag", "style", "language"
    name: str
    weight: float  # forward-decayed amount (core.profile.decay.forward_weight x value)
    total: float  # the plain amount
    at: datetime
    first_at: datetime | None = None  # several messages' sum: the earliest (else ``at``)

    def row(self, owner: str) -> tuple[str, str, str, float, float, float, float]:
        first = self.at if self.first_at is None else self.first_at
        return (owner, self.kind, self.name, self.weight, self.total, to_ts(first), to_ts(self.at))


@dataclass(frozen=True, slots=True)
class ProfileCounter:
    """A counter as stored: both sums and the times of the first and last addition."""

    kind: str
    name: str
    weight: float
    total: float
    first_at: datetime
    last_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "weight": self.weight,
            "total": self.total,
            "first_at": self.first_at.isoformat(),
            "last_at": self.last_at.isoformat(),
        }


def counter_from_row(row: Any) -> ProfileCounter:
    return ProfileCounter(
        kind=str(row["kind"]),
        name=str(row["name"]),
        weight=float(row["weight"]),
        total=float(row["total"]),
        first_at=from_ts(float(row["first_at"])),
        last_at=from_ts(float(row["last_at"])),
    )


@dataclass(frozen=True, slots=True)
class NodeIndexEntry:
    """How many nodes of one type a person has in one month (UTC, ``YYYY-MM``)."""

    type: str
    period: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "period": self.period, "count": self.count}


__all__ = ["NodeIndexEntry", "ProfileCount", "ProfileCounter", "counter_from_row"]
