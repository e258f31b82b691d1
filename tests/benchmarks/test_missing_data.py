"""Benchmarks and the training script, run where the shared data folder is not beside the
checkout (a fresh clone elsewhere): one line saying where the data lives, exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "command",
    [
        ["benchmarks/emotion_eval.py", "{missing}/dev.tsv"],
        ["benchmarks/locomo.py", "{missing}/locomo.json"],
        ["-m", "training.emotion.train", "--data-dir", "{missing}"],
    ],
)
def test_missing_data_is_one_clear_line(tmp_path: Path, command: list[str]) -> None:
    args = [part.format(missing=tmp_path / "nowhere") for part in command]
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "not found" in last and "../shared/data" in last
