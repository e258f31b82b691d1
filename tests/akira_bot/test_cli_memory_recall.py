"""``akira-bot memory recall|export|forget USER`` over a database the engine filled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.llm import ScriptedProvider
from tests.conftest import ask, make_message

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {  # the storage stays (AKIRA_TEST_STORAGE=postgres: the test's database)
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AKIRA_") or k.startswith("AKIRA_STORAGE__")
    }
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_EMOTION__DETECTOR": "lexicon",
            "AKIRA_LLM__PROVIDER": "scripted",
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "akira_bot.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )


async def test_memory_recall_export_and_forget(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = Settings.model_validate(
        {
            "data_dir": data_dir,
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "emotion": {"detector": "lexicon"},
        }
    )
    engine = build_engine(settings, llm=ScriptedProvider(["ok"]))
    async with engine:
        await ask(engine, make_message("hello, I'm travelling soon", at=T0))
        await ask(engine, make_message("/remember identity/name: Ana", at=T0))
        memories = engine.services.extras["structured_memories"]
        await memories.store_memory(
            "telegram:42",
            "context",
            "trip",
            "Flying to Tokyo",
            priority="critical",
            expires_at=T0 + timedelta(days=2),
            at=T0,
        )
        await memories.propose("telegram:42", "skill", "python", "Writes Python", at=T0)

    recall = _cli(["memory", "recall", "telegram:42", "--at", T0.isoformat()], data_dir)
    assert recall.returncode == 0, recall.stderr
    assert recall.stdout.splitlines()[:4] == [
        "=== STRUCTURED MEMORIES ===",
        "3 total (2 verified, 1 unverified)",
        "",
        "[001] context (CRITICAL) [verified] trip",
    ]
    assert "[003] identity (NORMAL) [verified] name" in recall.stdout
    assert "[002] skill (NORMAL) [unverified] python" in recall.stdout

    later = _cli(["memory", "recall", "telegram:42", "--at", "2025-06-10T00:00:00"], data_dir)
    assert "2 total (1 verified, 1 unverified)" in later.stdout and "Tokyo" not in later.stdout
    as_json = json.loads(_cli(["memory", "recall", "telegram:42", "--json"], data_dir).stdout)
    assert {m["key"] for m in as_json["memories"]} == {"name", "python"}  # now: trip expired

    exported = json.loads(_cli(["memory", "export", "telegram:42"], data_dir).stdout)
    assert {m["key"] for m in exported["memories"]} == {"name", "python", "trip"}
    assert len(exported["messages"]) == 2

    forget = _cli(["memory", "forget", "telegram:42"], data_dir)
    assert forget.returncode == 0 and "memories: 3" in forget.stdout
    after = json.loads(_cli(["memory", "export", "telegram:42"], data_dir).stdout)
    assert after["memories"] == [] and after["messages"] == [] and after["profile"] is None
    empty = _cli(["memory", "recall", "telegram:42"], data_dir)
    assert "0 total (0 verified, 0 unverified)" in empty.stdout

    bad = _cli(["memory", "recall", "telegram:42", "--at", "yesterday"], data_dir)
    assert bad.returncode == 2 and "ISO" in bad.stderr
