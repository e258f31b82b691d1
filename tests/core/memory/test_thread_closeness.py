"""A thread's closeness to a follow-up is read from both encoders, the closer reading kept
(core.memory.query, ``thread_priors``, ``QueryConfig.second_closeness``): a thread the
second encoder relates to the message and the first does not still scores as close; an
announced event is as old as the time since it came due."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from core.memory.query import QueryConfig, plan_query, thread_priors
from tests.core.memory.conftest import CHATTER_PT, said

OWNER = "telegram:7"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_the_second_encoder_can_make_a_thread_close() -> None:
    rng = np.random.default_rng(3)
    at = T0 + timedelta(days=30)
    pool = [said(OWNER, "debt", "um cliente tá me devendo faz dois meses", T0, "dm-7")]
    pool += [
        said(OWNER, f"c{i}", text, T0 + timedelta(days=1 + i), "dm-7")
        for i, text in enumerate(CHATTER_PT)
    ]
    query, query2 = unit(rng.standard_normal(32)), unit(rng.standard_normal(24))
    # The first encoder reads the debt line as far as any chatter; the second close.
    first = {n.id: unit(rng.standard_normal(32)) for n in pool}
    second = {n.id: unit(rng.standard_normal(24)) for n in pool}
    second["debt"] = unit(query2 + 0.05 * rng.standard_normal(24))

    def prior(config: QueryConfig) -> float:
        plan = plan_query("CAIU!!! nem acredito", at, config)
        priors = thread_priors(plan, query, pool, first, config=config, second=(query2, second))
        return priors.get("debt", 0.0)

    on = QueryConfig()
    off = replace(on, second_closeness=False)
    assert on.second_closeness
    assert prior(on) > prior(off) + 0.05
    # Without a second encoder's vectors the setting changes nothing.
    plan = plan_query("CAIU!!! nem acredito", at, on)
    assert thread_priors(plan, query, pool, first, config=on) == thread_priors(
        plan_query("CAIU!!! nem acredito", at, off), query, pool, first, config=off
    )


def test_an_announced_event_is_as_old_as_the_time_since_it_came_due() -> None:
    """An announced exam, told in January, is an open thread in April: its age
    counts from the day it came due, not from the day it was told (past ``thread_days``
    by then). Told as long ago without a date, a line is no thread any more (unless it
    awaits an outcome: test_awaited_outcomes.py)."""
    rng = np.random.default_rng(5)
    told = T0 - timedelta(days=60)  # 2026-01-01
    at = datetime(2026, 4, 12, 20, 0, tzinfo=UTC)
    pool = [
        said(OWNER, "exam", "a prova do concurso é dia 10 de abril", told, "dm-7"),
        said(OWNER, "old", "to pensando em pintar a sala de azul", told, "dm-7"),
    ]
    pool += [
        said(OWNER, f"c{i}", text, at - timedelta(days=20 - i), "dm-7")
        for i, text in enumerate(CHATTER_PT)
    ]
    vectors = {n.id: unit(rng.standard_normal(32)) for n in pool}
    config = QueryConfig()
    assert (at - told).days > config.thread_days
    plan = plan_query("saiu o resultado!!!", at, config)
    priors = thread_priors(plan, unit(rng.standard_normal(32)), pool, vectors, config=config)
    assert "exam" in priors
    assert "old" not in priors
    assert priors["exam"] == max(priors.values())  # due two days ago: the likeliest referent
