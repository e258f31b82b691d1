"""Statements one message sends to PostgreSQL, by kind: one engine (the real pipeline, the
scripted LLM, the hashing embedder) on a throwaway database, ``--users`` people sending
``--messages`` messages each, one at a time, after one warm-up message each. Every
statement the driver sends (pooled connections, the lock and arrival sessions) is
counted in asyncpg itself; each is a round trip.

    python benchmarks/pg_statements.py [--users 5] [--messages 8] [--processes 2]

``--processes N``: N engines (each with its own storage: pool, lock sessions, what it
keeps of people), each message sent to one of them at random, as ``benchmarks/load.py``'s
load balancer spreads a person's messages over its processes: a process then often
serves someone another process served last, and reads again what it keeps of them.

Prints JSON: statements_per_message, per_message (the statements by their text's
start, per message, most first), bot_cpu_ms_per_message (this process) and
server_cpu_ms_per_message (the PostgreSQL backends serving the database, when the server
runs on this host: benchmarks.load.server_cpu_s), one message at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg.connection

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from akira_bot.app import build_engine  # noqa: E402
from akira_bot.settings import Settings  # noqa: E402
from benchmarks.load import BenchResponder, UserLog, message_for, server_cpu_s  # noqa: E402
from core.llm import ScriptedProvider  # noqa: E402
from tests.postgres import postgres_database  # noqa: E402

counted: Counter[str] = Counter()
counting = False


def label(sql: str) -> str:
    """The statement's start, and where it reads nodes from (most reads start alike)."""
    text = " ".join(sql.split())
    at = text.find(" FROM nodes WHERE")
    return f"{text[:40]} ...{text[at : at + 110]}" if at > 0 else text[:110]


def count_statements() -> None:
    """Count every statement asyncpg sends, prepared (``_execute``) or simple."""
    conn_class: Any = asyncpg.connection.Connection
    execute_prepared = conn_class._execute
    execute_simple = conn_class.execute

    async def _execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if counting:
            counted[label(query)] += 1
        return await execute_prepared(self, query, *args, **kwargs)

    async def execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if counting and not args:  # with arguments it goes through _execute
            counted[label(query)] += 1
        return await execute_simple(self, query, *args, **kwargs)

    conn_class._execute = _execute
    conn_class.execute = execute


async def run(args: argparse.Namespace) -> dict[str, Any]:
    global counting
    count_statements()
    async with postgres_database("akira23_statements") as dsn:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                data_dir=Path(tmp),
                llm={"provider": "scripted"},
                embedding={"backend": "hashing"},
                emotion={"detector": "lexicon"},
                bot={"rate_limit_messages": 0},
                storage={"backend": "postgres", "postgres_dsn": dsn},
            )
            engines = [
                build_engine(settings, llm=ScriptedProvider(lambda m: "ok " + m[-1].content[:30]))
                for _ in range(args.processes)
            ]
            for engine in engines:
                await engine.start()
            try:
                rng, spread = random.Random(1), random.Random(2)
                for user in range(args.users):
                    engine = engines[spread.randrange(args.processes)]
                    await engine.handle(message_for(user, 0, rng, False), BenchResponder(UserLog()))
                for engine in engines:
                    await engine.services.memory.settle()
                database = urllib.parse.urlsplit(dsn).path.lstrip("/")
                server_started, bot_started = server_cpu_s(database)[0], time.process_time()
                counting = True
                for index in range(1, args.messages + 1):
                    for user in range(args.users):
                        engine = engines[spread.randrange(args.processes)]
                        message = message_for(user, index, rng, False)
                        await engine.handle(message, BenchResponder(UserLog()))
                        if args.processes > 1:
                            # The reply stored before the person's next message, which
                            # may go to another engine (in one, the lock orders them).
                            await engine.services.memory.settle()
                for engine in engines:
                    await engine.services.memory.settle()
                    await engine.services.background.drain(10)
                counting = False
                server_s = server_cpu_s(database)[0] - server_started
                bot_s = time.process_time() - bot_started
            finally:
                for engine in engines:
                    await engine.close()
    n = args.users * args.messages
    return {
        "statements_per_message": round(sum(counted.values()) / n, 2),
        "bot_cpu_ms_per_message": round(bot_s * 1000 / n, 2),
        "server_cpu_ms_per_message": round(server_s * 1000 / n, 2),
        "per_message": {sql: round(c / n, 2) for sql, c in counted.most_common()},
        "users": args.users,
        "messages_per_user": args.messages,
        "processes": args.processes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--messages", type=int, default=8)
    parser.add_argument("--processes", type=int, default=1)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
