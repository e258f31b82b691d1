"""``benchmarks/emotion_eval.py --detector llm`` against the fake OpenAI-compatible server:
the judge's readings are scored, and where it fails the classifier's reading counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]


def test_the_judge_is_scored_with_the_classifier_where_it_fails(tmp_path: Path) -> None:
    data = tmp_path / "mine_pt.tsv"
    data.write_text(
        "text\tlabel\n"
        "você é inútil! essa resposta é ridícula\tagressivo\n"
        "adorei, obrigado!\tfeliz\n"
        "a reunião é às 14h\tneutro\n",
        encoding="utf-8",
    )

    def respond(payload: dict[str, Any]) -> str:
        text = payload["messages"][-1]["content"]
        if "reunião" in text:
            return "no idea"  # garbage: the classifier answers for this one
        label = "agressivo" if "inútil" in text else "feliz"
        return json.dumps({"label": label, "confidence": 0.8})

    saved = tmp_path / "judged.jsonl"
    with FakeOpenAI.in_thread(default=respond) as fake:
        proc = subprocess.run(
            [
                sys.executable,
                "benchmarks/emotion_eval.py",
                str(data),
                "--detector",
                "llm",
                "--llm-base-url",
                fake.url,
                "--llm-model",
                "fake-model",
                "--weights",
                str(REPO / "core/emotion/weights/classifier.npz"),
                "--judge-below",
                "2",  # every reading is under it: the tie-breaker asks about all three
                "--save-judgements",
                str(saved),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)[str(data)]["ours"]
    assert ours["detector"] == "llm" and ours["n"] == 3
    assert ours["judge"]["asked"] == 3 and ours["judge"]["failed"] == 1
    assert ours["judge"]["judged_only"]["n"] == 2
    assert ours["per_label"]["agressivo"]["recall"] == 1.0
    assert ours["per_label"]["feliz"]["recall"] == 1.0
    assert 0.0 <= ours["ece"] <= 1.0 and "neutral_as_agressivo" in ours
    tie = ours["judge"]["tie_breaker"]
    assert tie["asked"] == 3 and tie["judge_below"] == 2.0
    assert tie["per_label"]["feliz"]["recall"] == 1.0
    assert ours["judge"]["classifier"]["n"] == 3
    lines = saved.read_text(encoding="utf-8").splitlines()
    rows = {r["truth"]: r for r in map(json.loads, lines)}  # written as each answer comes
    assert len(lines) == 3 and set(rows) == {"agressivo", "feliz", "neutro"}
    assert rows["agressivo"]["judge"] == ["agressivo", 0.8] and rows["neutro"]["judge"] is None
    assert rows["neutro"]["classifier"][0] in ("agressivo", "feliz", "triste", "confuso", "neutro")


def test_the_tie_breaker_leaves_confident_readings_alone(tmp_path: Path) -> None:
    """With a threshold no score is under, the judge is asked (llm figures) but the
    tie-breaker keeps every classifier reading."""
    data = tmp_path / "mine_pt.tsv"
    data.write_text("text\tlabel\nadorei, obrigado!\tfeliz\n", encoding="utf-8")
    with FakeOpenAI.in_thread(
        default=lambda payload: json.dumps({"label": "triste", "confidence": 0.9})
    ) as fake:
        proc = subprocess.run(
            [
                sys.executable,
                "benchmarks/emotion_eval.py",
                str(data),
                "--detector",
                "llm",
                "--llm-base-url",
                fake.url,
                "--weights",
                str(REPO / "core/emotion/weights/classifier.npz"),
                "--judge-below",
                "0",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)[str(data)]["ours"]
    assert ours["per_label"]["triste"]["precision"] == 0.0  # the llm figures: the judge's
    tie = ours["judge"]["tie_breaker"]
    assert tie["asked"] == 0
    assert tie["confusion"] == ours["judge"]["classifier"]["confusion"]
