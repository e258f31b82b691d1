"""The memory API's speed: store, recall, search and by-tag through HTTP, over a real
SQLite file, the server and the client in one process (aiohttp on one event loop, so
each figure includes the client's own cost). Prints JSON.

    python benchmarks/http_api.py --requests 500 --concurrency 8 --minds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akira_bot.http.keys import new_mind_key
from akira_bot.http.keystore import SQLiteKeyStore, digest
from akira_bot.http.server import HttpServer, build_app, make_state
from core.storage import SQLiteStorage


def summary(times: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "requests": len(times),
        "per_s": round(len(times) / wall, 1),
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
    }


async def timed(
    count: int, concurrency: int, one: Callable[[int], Awaitable[None]]
) -> dict[str, float]:
    times: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def run(i: int) -> None:
        async with gate:
            start = time.perf_counter()
            await one(i)
            times.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(run(i) for i in range(count)))
    return summary(times, time.perf_counter() - start)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        storage = SQLiteStorage(Path(tmp) / "akira.db")
        await storage.open()
        keys = SQLiteKeyStore(storage.db)
        state = await make_state(storage, jwt_secret=None, keys=keys)
        server = HttpServer(build_app(state), "127.0.0.1", 0)
        await server.start()
        tokens = []
        for m in range(args.minds):
            key = new_mind_key()
            await keys.add("mind", digest(key), f"telegram:{m}")
            tokens.append({"Authorization": f"Bearer {key}"})
        try:
            async with aiohttp.ClientSession(server.url) as http:

                async def call(method: str, path: str, i: int, **kw: Any) -> None:
                    async with http.request(
                        method, path, headers=tokens[i % args.minds], **kw
                    ) as r:
                        await r.read()
                        assert r.status < 300, r.status

                results = {
                    "store": await timed(
                        args.requests,
                        args.concurrency,
                        lambda i: call(
                            "POST",
                            "/memory",
                            i,
                            json={
                                "category": "fact",
                                "content": f"fato número {i} sobre viagens e comida",
                                "key": f"fact_{i}",
                                "tags": ["bench", f"t{i % 7}"],
                            },
                        ),
                    ),
                    "recall": await timed(
                        args.requests, args.concurrency, lambda i: call("GET", "/memory/recall", i)
                    ),
                    "search": await timed(
                        args.requests,
                        args.concurrency,
                        lambda i: call("GET", "/memory/search?q=viagens%20comida&limit=20", i),
                    ),
                    "by_tag": await timed(
                        args.requests,
                        args.concurrency,
                        lambda i: call("GET", "/memory/by-tag?tag=t3", i),
                    ),
                }
        finally:
            await server.stop()
            await storage.close()
    return {
        "benchmark": "http_api",
        "requests_per_op": args.requests,
        "concurrency": args.concurrency,
        "minds": args.minds,
        "memories_per_mind": args.requests // args.minds,
        **results,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--minds", type=int, default=20)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
