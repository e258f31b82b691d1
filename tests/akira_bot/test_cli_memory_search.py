"""`akira-bot memory search USER QUERY` over a real database filled through the engine."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.cli import main
from akira_bot.settings import Settings
from core.emotion.lexicon import LexiconDetector
from core.llm import ScriptedProvider
from core.types import ChatRef, IncomingMessage, RecordingResponder, UserRef

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


async def _fill(data_dir: Path) -> None:
    settings = Settings(
        data_dir=data_dir, llm={"provider": "scripted"}, embedding={"backend": "hashing"}
    )
    engine = build_engine(settings, llm=ScriptedProvider(["Sinto muito!"]))
    async with engine:
        for i, (user, text) in enumerate(
            [
                ("42", "Tenho dor de cabeça"),
                ("42", "Tomo remédio?"),
                ("7", "Minha cabeça dói também"),
            ]
        ):
            message = IncomingMessage(
                "telegram",
                ChatRef("telegram", f"dm-{user}"),
                UserRef("telegram", user),
                text,
                str(i),
                T0 + timedelta(minutes=i),
            )
            await engine.handle(message, RecordingResponder())


def test_memory_search_prints_the_persons_matches_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_fill(tmp_path))
    monkeypatch.setenv("AKIRA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AKIRA_EMBEDDING__BACKEND", "hashing")
    monkeypatch.setenv("AKIRA_LLM__PROVIDER", "scripted")
    monkeypatch.chdir(tmp_path)

    assert main(["memory", "search", "telegram:42", "cabeca", "--json", "--limit", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["user"] == "telegram:42"
    first = data["results"][0]
    assert first["content"] == "Tenho dor de cabeça"
    assert first["owner"] == "telegram:42"
    assert first["timestamp"] == T0.isoformat()
    assert first["reason"] == "direct match"
    # Every field of the design's MemoryNode, plus how it was found.
    assert set(first) >= {
        "id", "owner", "timestamp", "type", "content", "tags", "emotion", "connections",
        "score", "reason", "depth",
    }  # fmt: skip
    # The emotion read in the message when it was said (by the lexicon detector).
    assert first["type"] == "user_message"
    assert first["emotion"] == LexiconDetector().detect_many([first["content"]])[0].label
    assert isinstance(first["emotion_score"], float)
    # Its reply and the next message are connected to it: the count of its connections.
    assert first["connections"] >= 1
    assert all(r["owner"] == "telegram:42" for r in data["results"])
    assert not any("também" in r["content"] for r in data["results"])

    assert main(["memory", "search", "telegram:42", "cabeça"]) == 0
    text = capsys.readouterr().out
    assert "[2024-05-01 12:00 UTC] user: Tenho dor de cabeça" in text
    assert "direct match" in text

    assert main(["memory", "search", "telegram:99", "cabeça"]) == 0
    assert "no memories of telegram:99" in capsys.readouterr().out
