"""What the learned profile costs a message (built-in plugin ``profile``). Prints JSON.

A person with ``--history`` messages already learned (the story's kind of chat text,
tagged as the memory graph tags it), then ``--reps`` more messages: for each, the
learning (one UPSERT transaction of its counters) and the profile read for the prompt
(the person's counters, once-said keywords left out, and the summary), p50/p90 in ms, on
a SQLite file and, with ``--postgres DSN``, on PostgreSQL.

    PYTHONPATH=$PWD python benchmarks/profile_cost.py
    PYTHONPATH=$PWD python benchmarks/profile_cost.py --postgres postgresql://postgres@127.0.0.1/test_x
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.memory.tags import Tagger
from core.profile import ProfileLearner, about_section
from core.storage import SQLiteStorage, Storage
from core.storage.records import MemoryNode, NodeType

TEXTS = [
    "Odeio meu chefe, essa reunião de trabalho foi um absurdo!!",
    "hoje cozinhei uma pizza deliciosa, amei 😍",
    "tô triste, não consigo parar de pensar no trabalho 😢",
    "fiz um bolo de chocolate, ficou incrível kkk",
    "my sister is visiting next week, we'll go hiking in the mountains",
    "ansiedade de novo antes da prova de cálculo",
    "o gato derrubou meu café no teclado hahaha",
    "what do you think about learning rust this year?",
]
START = datetime(2026, 1, 1, tzinfo=UTC)


def _node(i: int, owner: str, tagger: Tagger, rng: random.Random) -> MemoryNode:
    # A word of its own in most messages: the long tail of once-said keywords.
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9))
    text = f"{rng.choice(TEXTS)} {word}"
    node = MemoryNode(
        f"n{i}", owner, text, NodeType.USER_MESSAGE, START + timedelta(minutes=30 * i)
    )
    node.tags = tagger.tags(text)
    return node


def _ms(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "p50_ms": round(statistics.median(values) * 1000, 3),
        "p90_ms": round(values[int(len(values) * 0.9)] * 1000, 3),
    }


async def _run(storage: Storage, history: int, reps: int) -> dict[str, Any]:
    tagger = Tagger()
    learner = ProfileLearner(storage.profiles, tagger=tagger)
    rng = random.Random(7)
    owner = "console:bench"
    await storage.users.ensure(owner)
    await learner.learn_many(_node(i, owner, tagger, rng) for i in range(history))
    learn: list[float] = []
    read: list[float] = []
    for i in range(history, history + reps):
        node = _node(i, owner, tagger, rng)
        started = time.perf_counter()
        await learner.learn(node)
        learn.append(time.perf_counter() - started)
        started = time.perf_counter()
        about_section(await learner.profile(owner, at=node.timestamp))
        read.append(time.perf_counter() - started)
    counters = await storage.profiles.counters(owner)
    return {
        "counters_stored": len(counters),
        "counters_read": len(await storage.profiles.counters(owner, min_tag_total=3)),
        "learn": _ms(learn),
        "profile_read": _ms(read),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--history", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--postgres", help="a PostgreSQL DSN of a database to use")
    args = parser.parse_args()
    out: dict[str, Any] = {"history": args.history, "reps": args.reps}
    with tempfile.TemporaryDirectory() as folder:
        async with SQLiteStorage(Path(folder) / "bench.db") as sqlite:
            out["sqlite"] = await _run(sqlite, args.history, args.reps)
    if args.postgres:
        from core.storage.postgres import PostgresStorage

        async with PostgresStorage(args.postgres) as postgres:
            out["postgres"] = await _run(postgres, args.history, args.reps)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
