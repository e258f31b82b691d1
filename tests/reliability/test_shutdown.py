"""Graceful shutdown under SIGTERM, and a dead LLM endpoint.

SIGTERM while replies are being generated: the bot stops taking updates, the in-flight
replies are still delivered within the bound, the process exits 0 and the database is
closed clean (the reply nodes, stored after delivery, are there). The model is a local
OpenAI-compatible server that takes its time, so the replies really are in flight.

A dead LLM (HTTP 500, a server that never answers, a refused connection): the person gets
the short fallback in their language, the message is stored, and once the circuit breaker
opens, later messages get their fallback at once without touching the endpoint.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.i18n import t
from core.llm import ResilientProvider
from core.storage import NodeType
from core.types import ReplyKind
from tests.conftest import ask, make_message
from tests.fakes.telegram_api import FakeTelegramServer
from tests.reliability.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
LLM_DELAY_S = 1.5
STOP_BOUND_S = 15.0  # adapters' and engine's own bounds are 10 s each; replies need 1.5


def base_env(tmp_path: Path, llm_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    env.update(
        {
            "AKIRA_DATA_DIR": str(tmp_path / "data"),
            "AKIRA_LLM__PROVIDER": "openai",
            "AKIRA_LLM__BASE_URL": llm_url,
            "AKIRA_LLM__MODEL": "fake",
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_EMOTION__DETECTOR": "lexicon",
            "PYTHONPATH": str(REPO),
        }
    )
    return env


def reply_nodes(db_path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # Closed clean: the last connection checkpointed and removed the WAL.
        assert not db_path.with_name(db_path.name + "-wal").exists() or (
            db_path.with_name(db_path.name + "-wal").stat().st_size == 0
        )
        return [
            (row[0], row[1])
            for row in conn.execute(
                "SELECT owner, type FROM nodes ORDER BY rowid",
            )
        ]
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 2])
async def test_sigterm_on_telegram_run_finishes_in_flight_replies(
    tmp_path: Path, workers: int
) -> None:
    """With ``workers`` 2 the signal reaches the bot's own process only, as from a
    service manager: the parent tells its engine processes to finish and close."""
    async with (
        FakeOpenAI(delay_s=LLM_DELAY_S, reply="Resposta depois de pensar.") as llm,
        FakeTelegramServer() as telegram,
    ):
        env = base_env(tmp_path, llm.base_url)
        env.update(
            {
                "AKIRA_TELEGRAM__TOKEN": telegram.token,
                "AKIRA_TELEGRAM__BASE_URL": telegram.base_url,
                "AKIRA_TELEGRAM__POLL_TIMEOUT": "1",
                "AKIRA_BOT__WORKERS": str(workers),
            }
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "akira_bot.cli",
            "run",
            env=env,
            cwd=tmp_path,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await telegram.wait_for(lambda: bool(telegram.calls_to("getUpdates")), within=30)
            users = (101, 102, 103)
            for user in users:
                telegram.send_text(f"olá, eu sou {user}, tudo bem?", user_id=user)
            # All three are inside the (slow) LLM call: in flight.
            await llm.wait_for_requests(len(users))
            assert telegram.sent_texts() == []
            stopped_at = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _out, err = await asyncio.wait_for(proc.communicate(), STOP_BOUND_S + 5)
            took = time.monotonic() - stopped_at
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        texts = {user: telegram.sent_texts(user) for user in users}

    assert proc.returncode == 0, err.decode()[-3000:]
    assert took < STOP_BOUND_S
    # Every in-flight reply was delivered, exactly once, before the process ended.
    assert texts == {user: ["Resposta depois de pensar."] for user in users}
    nodes = reply_nodes(tmp_path / "data" / "akira.db")
    for user in users:
        owner = f"telegram:{user}"
        assert (owner, NodeType.USER_MESSAGE.value) in nodes
        assert (owner, NodeType.AKIRA_RESPONSE.value) in nodes  # remembered after delivery


async def test_sigterm_on_console_pipe_finishes_the_in_flight_reply(tmp_path: Path) -> None:
    async with FakeOpenAI(delay_s=LLM_DELAY_S, reply="Resposta do console.") as llm:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "akira_bot.cli",
            "run",
            "--user",
            "dora",
            env=base_env(tmp_path, llm.base_url),
            cwd=tmp_path,
            stdin=asyncio.subprocess.PIPE,  # kept open: the console is waiting for more
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("oi, você está aí?\n".encode())
            await proc.stdin.drain()
            await llm.wait_for_requests(1, within=30)
            stopped_at = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), STOP_BOUND_S + 5)
            took = time.monotonic() - stopped_at
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    assert proc.returncode == 0, err.decode()[-3000:]
    assert took < STOP_BOUND_S
    assert out.decode().splitlines() == ["Resposta do console."]
    nodes = reply_nodes(tmp_path / "data" / "akira.db")
    assert nodes == [
        ("console:dora", NodeType.USER_MESSAGE.value),
        ("console:dora", NodeType.AKIRA_RESPONSE.value),
    ]


# --- a dead LLM --------------------------------------------------------------------------


def dead_llm_settings(tmp_path: Path, base_url: str, **llm: object) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        llm={
            "provider": "openai",
            "base_url": base_url,
            "model": "fake",
            "max_retries": 1,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            "breaker_failures": 2,
            "breaker_reset_s": 60,
            **llm,
        },
        embedding={"backend": "hashing"},
        emotion={"detector": "lexicon"},
        memory={"extraction": False},
    )


async def check_dead_llm(settings: Settings, requests: object) -> None:
    engine = build_engine(settings)
    assert isinstance(engine.services.llm, ResilientProvider)
    await engine.start()
    try:
        pt = await ask(engine, make_message("oi, você pode me ajudar com uma coisa?", user="1"))
        en = await ask(engine, make_message("hello, can you help me with something?", user="2"))
        assert [r.kind for r in pt.sent] == [ReplyKind.FALLBACK]
        assert pt.texts == [t("llm_down", "pt")]
        assert [r.kind for r in en.sent] == [ReplyKind.FALLBACK]
        assert en.texts == [t("llm_down", "en")]
        # Two failures: the breaker is open, the endpoint is not called any more and the
        # fallback comes at once.
        assert engine.services.llm.breaker.state.value == "open"
        calls_before = requests() if callable(requests) else None
        started = time.monotonic()
        later = await ask(engine, make_message("ainda aí? preciso de ajuda", user="3"))
        assert time.monotonic() - started < 0.5
        assert later.texts == [t("llm_down", "pt")]
        if calls_before is not None:
            assert requests() == calls_before
        for user, text in (
            ("1", "oi, você pode me ajudar com uma coisa?"),
            ("2", "hello, can you help me with something?"),
            ("3", "ainda aí? preciso de ajuda"),
        ):
            stored = await engine.storage.nodes.recent(f"telegram:{user}")
            assert [(n.type, n.content) for n in stored] == [(NodeType.USER_MESSAGE, text)]
    finally:
        await engine.close()


async def test_llm_answering_500_gets_fallback_and_opens_the_breaker(tmp_path: Path) -> None:
    async with FakeOpenAI(mode="error") as llm:
        await check_dead_llm(dead_llm_settings(tmp_path, llm.base_url), lambda: len(llm.requests))
        assert len(llm.requests) == 4  # two messages x (1 try + 1 retry), then nothing


async def test_llm_that_never_answers_times_out_to_fallback(tmp_path: Path) -> None:
    async with FakeOpenAI(mode="hang") as llm:
        settings = dead_llm_settings(tmp_path, llm.base_url, timeout_s=0.3, max_retries=0)
        started = time.monotonic()
        await check_dead_llm(settings, lambda: len(llm.requests))
        # Two time-outs of 0.3 s, then the open breaker answers at once.
        assert time.monotonic() - started < 5


async def test_llm_refusing_connections_gets_fallback(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    await check_dead_llm(dead_llm_settings(tmp_path, f"http://127.0.0.1:{port}/v1"), None)
