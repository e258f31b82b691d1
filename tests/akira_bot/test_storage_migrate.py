"""``akira-bot storage migrate --to DSN``: SQLite into PostgreSQL, lossless (the export
of a person is the same from both), idempotent (twice gives the same rows), and the
connection string (with its password) never printed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.llm import ScriptedProvider
from core.storage.feedback_records import Rating, ReplyRating
from tests.conftest import ask, make_message
from tests.postgres import postgres_database

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
PASSWORD = "hunter2-not-for-logs"  # trust auth ignores it; it must not be printed
TABLES = (
    "users",
    "nodes",
    "graph_embeddings",
    "graph_second_embeddings",
    "graph_connections",
    "graph_tags",
    "structured_memories",
    "structured_memory_history",
    "feedback_replies",
    "feedback_ratings",
    "mood_corrections",
)


def _cli(args: list[str], data_dir: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_EMOTION__DETECTOR": "lexicon",
            "AKIRA_LLM__PROVIDER": "scripted",
            **env_extra,
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


async def _fill(data_dir: Path) -> None:
    settings = Settings.model_validate(
        {
            "data_dir": data_dir,
            "llm": {"provider": "scripted"},
            "embedding": {"backend": "hashing"},
            "emotion": {"detector": "lexicon"},
        }
    )
    engine = build_engine(settings, llm=ScriptedProvider(["Que bom!", "Entendi.", "Até logo"]))
    async with engine:
        await ask(engine, make_message("Estou muito feliz com o violão novo", at=T0))
        await ask(
            engine, make_message("/remember identity/name: Ana", at=T0 + timedelta(minutes=1))
        )
        await ask(engine, make_message("Amanhã toco na praça", at=T0 + timedelta(minutes=2)))
        await ask(engine, make_message("hello there", user="7", at=T0 + timedelta(minutes=3)))
        await ask(
            engine, make_message("/remember identity/name: Ana Maria", at=T0 + timedelta(minutes=4))
        )
        # Feedback: a /mood correction and a thumb on a reply (schema 70).
        await ask(engine, make_message("/mood eu estava triste", at=T0 + timedelta(minutes=5)))
        feedback = engine.storage.feedback
        await feedback.link_replies("telegram:42", "dm-42", ["900", "901"], "n-reply", T0)
        await feedback.rate(
            ReplyRating("telegram:42", "n-reply", Rating.UP, "dm-42", "900", "👍", T0)
        )
        # A second vector (schema 16), as the emotion classifier's USE vector would be.
        first = (await engine.storage.nodes.recent("telegram:42", limit=1))[0]
        second = np.linspace(-1.0, 1.0, 12, dtype=np.float32)
        await engine.storage.graph.add_second_vectors(
            "use-multilingual-v3", [(first.id, "telegram:42", second / np.linalg.norm(second))]
        )


def _sqlite_counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}
    finally:
        conn.close()


async def _counts(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}
    finally:
        await conn.close()


@pytest.mark.sqlite_itself("its source is a SQLite database the bot filled")
async def test_migrate_is_lossless_idempotent_and_keeps_the_password_out(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await _fill(data_dir)
    async with postgres_database() as dsn:
        secret_dsn = dsn.replace("postgres@", f"postgres:{PASSWORD}@")
        first = _cli(["storage", "migrate", "--to", secret_dsn], data_dir)
        assert first.returncode == 0, first.stderr
        assert "copied" in first.stdout
        after_first = await _counts(dsn)
        assert after_first == _sqlite_counts(data_dir / "akira.db")
        assert after_first["nodes"] == 6 and after_first["structured_memory_history"] == 1
        assert after_first["mood_corrections"] == after_first["feedback_ratings"] == 1
        assert after_first["graph_second_embeddings"] == 1
        second = _cli(["storage", "migrate", "--to", secret_dsn], data_dir)
        assert second.returncode == 0, second.stderr
        assert await _counts(dsn) == after_first  # twice: the same rows
        for out in (first, second):
            assert PASSWORD not in out.stdout + out.stderr
            assert "127.0.0.1" not in out.stdout

        for user in ("telegram:42", "telegram:7"):
            from_sqlite = _cli(["memory", "export", user], data_dir)
            from_postgres = _cli(
                ["memory", "export", user],
                data_dir,
                AKIRA_STORAGE__BACKEND="postgres",
                AKIRA_STORAGE__POSTGRES_DSN=secret_dsn,
            )
            assert from_sqlite.returncode == 0 and from_postgres.returncode == 0, (
                from_postgres.stderr
            )
            sqlite_export, postgres_export = (
                json.loads(from_sqlite.stdout),
                json.loads(from_postgres.stdout),
            )
            assert sqlite_export["messages"], "the person's messages were exported"
            assert postgres_export == sqlite_export
            assert PASSWORD not in from_postgres.stderr


def test_migrate_refuses_what_is_not_a_postgres_dsn(tmp_path: Path) -> None:
    out = _cli(["storage", "migrate", "--to", "mysql://x"], tmp_path)
    assert out.returncode == 1 and "postgresql://" in out.stderr


def test_a_server_that_is_down_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """Nothing listens on port 1: the bot says so in one line, without the DSN."""
    dsn = f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/akira23"
    out = _cli(
        ["memory", "export", "telegram:1"],
        tmp_path,
        AKIRA_STORAGE__BACKEND="postgres",
        AKIRA_STORAGE__POSTGRES_DSN=dsn,
    )
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "PostgreSQL server cannot be reached" in out.stderr
    assert PASSWORD not in out.stderr and ":1/" not in out.stderr
