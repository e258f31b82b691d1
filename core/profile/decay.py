"""Interests that fade: forward decay with a fixed landmark.

A message said at ``t`` adds ``2 ** ((t - LANDMARK) / half_life)`` to a counter instead
of 1. The counter's value as of ``now`` is its sum times ``2 ** (-(now - LANDMARK) /
half_life)``: every message counted with weight ``2 ** (-(now - t) / half_life)``, halving
each half-life. Additions stay plain sums, so storage adds them atomically (an UPSERT
that adds) and messages may be learned in any order (an import of older history gives
the same counters as the live messages did). Ratios of two counters (an average length,
a share of messages with emoji) need no ``now``: the decay cancels.

Time is the message's own ``sent_at``, never the wall clock, so a replay is faithful.
The weights grow by 2 every half-life after the landmark: with the shortest half-life
allowed (:data:`MIN_HALF_LIFE_DAYS`) a float holds them for about 19 years.
"""

from __future__ import annotations

from datetime import UTC, datetime

LANDMARK = datetime(2025, 1, 1, tzinfo=UTC)
MIN_HALF_LIFE_DAYS = 7.0
_DAY_S = 86_400.0


def _half_lives(at: datetime, half_life_days: float) -> float:
    return (at - LANDMARK).total_seconds() / (max(half_life_days, MIN_HALF_LIFE_DAYS) * _DAY_S)


def forward_weight(at: datetime, half_life_days: float) -> float:
    """What a message said at ``at`` adds to a counter (times its amount)."""
    # Clamped below a float's range: far past it, weights stop growing (decay flattens)
    # instead of the learning failing.
    return 2.0 ** min(_half_lives(at, half_life_days), 1000.0)


def decayed(weight: float, at: datetime, half_life_days: float) -> float:
    """A counter's forward-decayed ``weight`` as of ``at``: each message it counts
    weighs 1 when said at ``at``, 1/2 a half-life earlier, and so on."""
    return weight * 2.0 ** (-_half_lives(at, half_life_days))
