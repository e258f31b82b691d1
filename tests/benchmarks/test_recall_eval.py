"""``benchmarks/recall_eval.py`` reports, beside recall at 5 and 10, the mean reciprocal
rank of the wanted lines within 10 (``mrr@10``): run for real on a small chat with the
hashing embedder, and checked against the ranks it prints for each probe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHAT = """\
person zed en
session 2026-01-05 10:00
zed.1 my sister Mara is getting married in Lisbon in October
zed.2 the cat knocked my coffee over again this morning
zed.3 started a pottery class on thursdays, my first bowl is wonky
session 2026-02-01 10:00
probe paraphrase zed.1 | my sister Mara is getting married in Lisbon in October
probe paraphrase zed.2,zed.3 | the cat knocked my coffee over and my first pottery bowl is wonky
"""


def test_the_mean_reciprocal_rank_is_reported_per_kind(tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(CHAT, encoding="utf-8")
    command = [sys.executable, "benchmarks/recall_eval.py", str(chat), "--embedder", "hashing"]
    command += ["--second", "none", "--filler", "0", "--cache", "none", "--details"]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ranks = [probe["expected_rank"] for probe in out["details"]]
    assert ranks[0] == [1]  # the same words: found first
    expected = sum(
        sum(1 / r for r in probe if r is not None) / len(probe) for probe in ranks
    ) / len(ranks)
    mrr = out["ours"]["mrr@10"]
    assert mrr["paraphrase"] == mrr["overall"] == round(expected, 4)
    assert 0 < mrr["overall"] <= out["ours"]["recall@10"]["overall"]
