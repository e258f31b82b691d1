"""The load benchmark itself: its counts at a small size, and how it reads the tail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.load import StealClock, tail_bunching

LOAD = Path(__file__).resolve().parents[2] / "benchmarks" / "load.py"


def test_a_tail_from_one_stall_is_bunched_and_a_steady_one_is_not() -> None:
    started_at = [i * 0.01 for i in range(1000)]  # 10 s of messages
    stalled = [5.0] * 1000
    for i in range(500, 520):  # everything that started 5.0-5.2 s in waited
        stalled[i] = 400.0
    assert tail_bunching(stalled, started_at) == {
        "slowest_1pct_in_busiest_2s": 1.0,
        "slowest_1pct_busiest_2s_start_s": 4.0,
    }
    steady = [400.0 if i % 100 == 0 else 5.0 for i in range(1000)]  # one in 100, all along
    assert tail_bunching(steady, started_at)["slowest_1pct_in_busiest_2s"] == 0.2
    assert tail_bunching([], []) == {
        "slowest_1pct_in_busiest_2s": 0.0,
        "slowest_1pct_busiest_2s_start_s": 0.0,
    }


def test_steal_is_the_share_of_all_cpu_time_between_the_samples_around_a_window() -> None:
    clock = StealClock()
    # (seconds in, steal ticks, all ticks): 10% stolen in the first 2 s, 50% in the next 2.
    clock.samples = [(0.0, 0, 0), (1.0, 10, 100), (2.0, 20, 200), (3.0, 70, 300), (4.0, 120, 400)]
    assert clock.share(0.0, 2.0) == 0.1
    assert clock.share(2.0, 4.0) == 0.5
    assert clock.share(2.5, 3.5) == 0.5  # widened to the samples at 2 and 4 s
    assert clock.share(0.0, 4.0) == 0.3
    assert StealClock().share(0.0, 1.0) is None


@pytest.mark.sqlite_itself("load.py's SQLite mode; its PostgreSQL mode is the test below")
@pytest.mark.parametrize("workers", [1, 2])
def test_every_message_is_stored_and_answered_once_in_order(workers: int, tmp_path: Path) -> None:
    size = ["--users", "20", "--messages", "3", "--think-ms", "20"]
    timeline = tmp_path / "timeline.jsonl"
    run = subprocess.run(
        [sys.executable, str(LOAD), *size, "--workers", str(workers), "--timeline", str(timeline)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["messages"] == result["stored"] == result["delivered"] == 60
    assert (result["lost"], result["duplicates"], result["out_of_order"]) == (0, 0, 0)
    assert result["leaks"] == 0 and result["stored_replies"] == 60
    assert 0.0 < result["slowest_1pct_in_busiest_2s"] <= 1.0
    assert result["config"]["workers"] == workers
    if Path("/proc/stat").exists():  # Linux: the host's steal over the run, a share
        assert 0.0 <= result["host_cpu_steal_share"] <= 1.0
    # One line a message, by start, with the overheads the percentiles came from.
    lines = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert len(lines) == 60
    starts = [line["start_s"] for line in lines]
    assert starts == sorted(starts)
    assert max(line["ms"] for line in lines) == pytest.approx(result["overhead_max_ms"], abs=0.01)
    assert all(
        line["wall"] - line["start_s"] == pytest.approx(lines[0]["wall"] - starts[0], abs=1e-3)
        for line in lines
    )


def test_two_processes_on_postgres_store_and_answer_every_message_once() -> None:
    """``--storage postgres --processes 2``: two engine processes on one throwaway
    database, each message to the next process whoever its author; verified from the
    database. (Order across processes depends on how far apart a person's lines arrive:
    measured, not asserted here; docs/storage.md.)"""
    size = ["--users", "10", "--messages", "3", "--think-ms", "20"]
    run = subprocess.run(
        [sys.executable, str(LOAD), *size, "--storage", "postgres", "--processes", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads(run.stdout)
    assert result["messages"] == result["stored"] == result["delivered"] == 30
    assert (result["lost"], result["duplicates"]) == (0, 0)
    assert result["leaks"] == 0 and result["stored_replies"] == 30
    assert result["config"]["storage"] == "postgres" and result["config"]["processes"] == 2
