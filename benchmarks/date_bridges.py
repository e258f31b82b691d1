"""What reading the plans of a thread pool costs a conversational recall. Prints JSON.

    python benchmarks/date_bridges.py [--pool 200] [--repeats 200]

Conversational recall bridges the lines of the person's latest ``--pool`` messages that
announced events for about the same time (``core.memory.query.date_bridges``). Each line's
dates are parsed once (cached); what every recall pays again is pairing the events. The
pools here are the worst a person could send: a share of the lines (0, a quarter, half,
all) each announce a date ("tenho consulta dia 12 de maio"), the rest say nothing dated.
p50 / p90 per call in ms, after one call that fills the parse cache.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from core.memory.query import QueryConfig, date_bridges
from core.storage import MemoryNode, NodeType

MONTHS = "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro"


def pool_of(size: int, dated: float, seed: int = 1) -> list[MemoryNode]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    months = MONTHS.split()
    lines = []
    for i in range(size):
        text = (
            f"tenho consulta dia {rng.randint(1, 28)} de {rng.choice(months)}"
            if i < round(size * dated)
            else f"hoje foi um dia comum, linha {i}"
        )
        lines.append(
            MemoryNode(
                f"n{i}", "bench", text, NodeType.USER_MESSAGE, start + timedelta(hours=6 * i)
            )
        )
    rng.shuffle(lines)
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=QueryConfig().pool)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    cfg = QueryConfig()
    out: dict[str, object] = {"pool": args.pool, "repeats": args.repeats}
    for dated in (0.0, 0.25, 0.5, 1.0):
        pool = pool_of(args.pool, dated)
        bridged = date_bridges(
            pool, cfg.date_bridge_days, cfg.date_bridge_most, cfg.date_bridge_span_days
        )
        took = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            date_bridges(
                pool, cfg.date_bridge_days, cfg.date_bridge_most, cfg.date_bridge_span_days
            )
            took.append((time.perf_counter() - started) * 1000)
        took.sort()
        out[f"dated_{dated:g}"] = {
            "lines_bridged": len(bridged),
            "p50_ms": round(took[len(took) // 2], 3),
            "p90_ms": round(took[int(len(took) * 0.9)], 3),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
