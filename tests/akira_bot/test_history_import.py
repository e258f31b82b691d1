"""Importing chat history: each format from small files the tests write."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from akira_bot.history_import import ImportFormatError, import_history, read_history
from akira_bot.testing import cli_env, run_cli
from core.storage import NodeType


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows)
        + "\n",
        encoding="utf-8",
    )
    return path


def telegram_export(path: Path) -> Path:
    data = {
        "name": "Ana",
        "type": "personal_chat",
        "id": 42,
        "messages": [
            {
                "id": 1,
                "type": "service",
                "date": "2025-03-01T09:00:00",
                "date_unixtime": "1740819600",
                "action": "create",
            },
            {
                "id": 2,
                "type": "message",
                "date": "2025-03-01T10:00:00",
                "date_unixtime": "1740823200",
                "from": "Ana",
                "from_id": "user42",
                "text": "Tenho dor de cabeça desde ontem",
            },
            {
                "id": 3,
                "type": "message",
                "date": "2025-03-01T10:01:00",
                "date_unixtime": "1740823260",
                "from": "AKIRA",
                "from_id": "user999",
                "text": "Sinto muito! Já tomou água?",
                "reply_to_message_id": 2,
            },
            {
                "id": 4,
                "type": "message",
                "date": "2025-03-01T10:02:00",
                "date_unixtime": "1740823320",
                "from": "Ana",
                "from_id": "user42",
                "text": ["Vou ao ", {"type": "bold", "text": "médico"}, " amanhã"],
            },
            {
                "id": 5,
                "type": "message",
                "date": "2025-03-01T10:03:00",
                "date_unixtime": "1740823380",
                "from": "Ana",
                "from_id": "user42",
                "text": "",
                "photo": "photos/1.jpg",
            },
        ],
    }
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def discord_export(path: Path) -> Path:
    data = {
        "guild": {"id": "500", "name": "Comunidade"},
        "channel": {"id": "600", "type": "GuildTextChat", "name": "geral"},
        "messages": [
            {
                "id": "10",
                "type": "Default",
                "timestamp": "2025-04-02T12:00:00+00:00",
                "content": "Alguém recomenda um livro de ficção científica?",
                "author": {"id": "7", "name": "bia", "isBot": False},
            },
            {
                "id": "11",
                "type": "Reply",
                "timestamp": "2025-04-02T12:05:00.123+00:00",
                "content": "Duna é ótimo",
                "author": {"id": "8", "name": "caio", "isBot": False},
                "reference": {"messageId": "10", "channelId": "600", "guildId": "500"},
            },
            {
                "id": "12",
                "type": "Default",
                "timestamp": "2025-04-02T12:06:00+00:00",
                "content": "beep",
                "author": {"id": "77", "name": "otherbot", "isBot": True},
            },
            {
                "id": "13",
                "type": "ChannelPinnedMessage",
                "timestamp": "2025-04-02T12:07:00+00:00",
                "content": "",
                "author": {"id": "7", "name": "bia", "isBot": False},
            },
        ],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


async def test_jsonl_import_is_idempotent_and_reports_bad_lines(
    engine_factory, tmp_path: Path
) -> None:
    engine, provider = await engine_factory()
    path = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {
                "user": "telegram:42",
                "text": "Tenho dor de cabeça",
                "timestamp": "2026-05-01T10:00:00Z",
                "id": "a1",
            },
            {
                "text": "sem id, usa --user",
                "timestamp": "2026-05-01T10:05:00+00:00",
                "kind": "group",
                "chat": "g1",
            },
            "{not json",
            {"user": "nouser", "text": "x", "timestamp": "2026-05-01T10:00:00Z"},
            {"user": "telegram:43", "text": "  ", "timestamp": "2026-05-01T10:00:00Z"},
            {"user": "telegram:43", "text": "sem hora"},
        ],
    )
    first = await import_history(engine.services, path, default_user="telegram:42")
    assert (first.imported, first.duplicates, first.invalid) == (2, 0, 4)
    assert sorted(e.number for e in first.errors) == [3, 4, 5, 6]
    assert all(e.reason.startswith(f"line {e.number}:") for e in first.errors)
    second = await import_history(engine.services, path, default_user="telegram:42")
    assert (second.imported, second.duplicates) == (0, 2)
    nodes = await engine.storage.nodes.recent("telegram:42", limit=10)
    assert [(n.content, n.timestamp) for n in nodes] == [
        ("Tenho dor de cabeça", datetime(2026, 5, 1, 10, tzinfo=UTC)),
        ("sem id, usa --user", datetime(2026, 5, 1, 10, 5, tzinfo=UTC)),
    ]
    assert nodes[1].chat_kind == "group" and nodes[1].scope == "chat:g1"
    assert provider.prompts == []  # no LLM call during import


async def test_a_lone_surrogate_escape_in_a_line_is_replaced_not_fatal(
    engine_factory, tmp_path: Path
) -> None:
    engine, _ = await engine_factory()
    path = tmp_path / "s.jsonl"
    # Lone surrogates, escaped as a broken exporter writes them.
    path.write_text(
        '{"user":"telegram:42","text":"ok","timestamp":"2024-01-01T00:00:00Z"}\n'
        '{"user":"telegram:42","text":"bad \\udcff","timestamp":"2024-01-01T00:01:00Z",'
        '"chat":"c\\ud800","id":"m\\udfff"}\n',
        encoding="utf-8",
    )
    summary = await import_history(engine.services, path)
    assert (summary.imported, summary.invalid) == (2, 0)
    nodes = await engine.storage.nodes.recent("telegram:42", limit=10)
    assert [n.content for n in nodes] == ["ok", "bad \ufffd"]
    assert nodes[1].chat_id == "c\ufffd"


async def test_telegram_export_with_the_bots_own_replies(engine_factory, tmp_path: Path) -> None:
    engine, _ = await engine_factory()
    summary = await import_history(
        engine.services, telegram_export(tmp_path / "result.json"), own_ids=["telegram:999"]
    )
    assert (summary.imported, summary.skipped_service, summary.invalid) == (3, 1, 1)
    nodes = await engine.storage.nodes.recent("telegram:42", limit=10)
    assert [(n.type, n.content) for n in nodes] == [
        (NodeType.USER_MESSAGE, "Tenho dor de cabeça desde ontem"),
        (NodeType.AKIRA_RESPONSE, "Sinto muito! Já tomou água?"),
        (NodeType.USER_MESSAGE, "Vou ao médico amanhã"),
    ]
    assert nodes[0].timestamp == datetime(2025, 3, 1, 10, tzinfo=UTC)
    assert await engine.storage.nodes.count("telegram:999") == 0


async def test_discord_export_scopes_and_skips(engine_factory, tmp_path: Path) -> None:
    engine, _ = await engine_factory()
    summary = await import_history(engine.services, discord_export(tmp_path / "channel.json"))
    assert summary.imported == 2 and summary.skipped_service == 1 and summary.invalid == 1
    assert dict(summary.per_user) == {"discord:7": 1, "discord:8": 1}
    (reply,) = await engine.storage.nodes.recent("discord:8")
    assert reply.scope == "500" and reply.chat_kind == "group" and reply.reply_to == "10"
    assert reply.timestamp == datetime(2025, 4, 2, 12, 5, 0, 123000, tzinfo=UTC)


async def test_dry_run_stores_nothing(engine_factory, tmp_path: Path) -> None:
    engine, _ = await engine_factory()
    summary = await import_history(
        engine.services, discord_export(tmp_path / "c.json"), dry_run=True
    )
    assert summary.imported == 2 and summary.dry_run
    assert await engine.storage.nodes.count() == 0


def test_format_detection_and_file_errors(tmp_path: Path) -> None:
    assert read_history(telegram_export(tmp_path / "t.json"))[0][0].platform == "telegram"
    assert read_history(discord_export(tmp_path / "d.json"))[0][0].platform == "discord"
    broken = tmp_path / "broken.json"
    broken.write_text('{"messages": [', encoding="utf-8")
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        read_history(broken, "telegram")
    with pytest.raises(ImportFormatError, match="no such file"):
        read_history(tmp_path / "missing.json")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n\x80\x81")
    messages, invalid = read_history(binary, default_user="console:x")
    assert messages == [] and len(invalid) == 2


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = cli_env(
        AKIRA_DATA_DIR=str(tmp_path / "data"),
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_BOT__OWN_IDS='["telegram:999"]',
    )
    return run_cli(*args, env=env, cwd=tmp_path)


def test_cli_import_then_memory_search_finds_messages_with_their_times(tmp_path: Path) -> None:
    export = telegram_export(tmp_path / "result.json")
    first = _cli(["memory", "import", str(export), "--json"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["imported"] == 3
    second = _cli(["memory", "import", str(export), "--format", "telegram", "--json"], tmp_path)
    assert (
        json.loads(second.stdout)["imported"] == 0
        and json.loads(second.stdout)["skipped_duplicate"] == 3
    )
    found = _cli(["memory", "search", "telegram:42", "dor de cabeça", "--json"], tmp_path)
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    top = next(r for r in results if r["content"] == "Tenho dor de cabeça desde ontem")
    assert top["timestamp"].startswith("2025-03-01T10:00:00")
    other = _cli(["memory", "search", "telegram:43", "dor de cabeça", "--json"], tmp_path)
    assert json.loads(other.stdout)["results"] == []
    bad = _cli(["memory", "import", str(tmp_path / "nope.json")], tmp_path)
    assert bad.returncode == 1 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
