"""What a cached start of the default bot costs before its first message, as JSON: wall
and CPU seconds (every thread of the process) to import the app, to build it and to
start it (``Engine.start``: storage, the local LLM through llama.cpp, and the models'
warm-up: topic vectors, the emotion encoders). No message is sent, so the LLM's
generation (most of a first reply, and as long as the reply it samples) is left out.

Each run is a fresh process with a fresh data dir; each checkout keeps its models cache
(AKIRA_CACHE_DIR) and Python its bytecode caches across runs, after one unmeasured start.
``--code`` runs another checkout beside this one, alternating.

    python benchmarks/start_cost.py --runs 5 [--code /tmp/old]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import asyncio, json, time
t0, c0 = time.perf_counter(), time.process_time()
from akira_bot.app import build_handler
from akira_bot.settings import Settings
t1, c1 = time.perf_counter(), time.process_time()
engine = build_handler(Settings())
t2, c2 = time.perf_counter(), time.process_time()

async def start():
    await engine.start()
    await engine.close()

asyncio.run(start())
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({
    "import_s": [t1 - t0, c1 - c0],
    "build_s": [t2 - t1, c2 - c1],
    "start_s": [t3 - t2, c3 - c2],
    "total_s": [t3 - t0, c3 - c0],
}))
"""


def run(repo: Path, data_dir: Path, cache_dir: Path) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_CACHE_DIR": str(cache_dir),
            "AKIRA_LLM__LOCAL_BACKEND": "llama.cpp",
            "PYTHONPATH": str(repo),
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--code", type=Path, default=None, help="another checkout, side by side")
    args = parser.parse_args(argv)
    repos = {"this": REPO, **({"other": args.code.resolve()} if args.code else {})}
    runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name in repos}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="akira-start-") as tmp:
        for name, repo in repos.items():  # unmeasured: fills the caches
            run(repo, Path(tmp) / f"{name}-warm", Path(tmp) / f"{name}-cache")
        for index in range(args.runs):
            for name, repo in repos.items():
                data = Path(tmp) / f"{name}-{index}"
                runs[name].append(run(repo, data, Path(tmp) / f"{name}-cache"))
                loads.append(os.getloadavg()[0])
    result: dict[str, Any] = {"cpus": os.cpu_count(), "host_load_1min": loads}
    for name, rows in runs.items():
        result[name] = {
            phase: {
                "wall_median_s": round(statistics.median(r[phase][0] for r in rows), 2),
                "cpu_median_s": round(statistics.median(r[phase][1] for r in rows), 2),
                "wall_s": [round(r[phase][0], 2) for r in rows],
                "cpu_s": [round(r[phase][1], 2) for r in rows],
            }
            for phase in ("import_s", "build_s", "start_s", "total_s")
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
