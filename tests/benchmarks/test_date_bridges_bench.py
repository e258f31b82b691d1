"""``benchmarks/date_bridges.py`` times the pairing of a thread pool's plans: run for real on
small pools, its JSON read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_prints_the_cost_for_each_share_of_dated_lines() -> None:
    command = [sys.executable, "benchmarks/date_bridges.py", "--pool", "40", "--repeats", "5"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["pool"] == 40
    assert out["dated_0"]["lines_bridged"] == 0  # nothing dated, nothing paired
    # Forty appointments over eleven months: most have another within three weeks.
    assert out["dated_1"]["lines_bridged"] > out["dated_0.25"]["lines_bridged"] > 0
    assert all(out[k]["p50_ms"] >= 0 for k in ("dated_0", "dated_0.25", "dated_0.5", "dated_1"))
