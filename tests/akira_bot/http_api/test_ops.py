"""/health, /metrics and /openapi.json of a running bot; ``akira-bot run`` with the API
alone, and with the engine in worker processes."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from akira_bot.http.keys import issue_jwt
from tests.akira_bot.http_api.conftest import ROOT, SECRET, Bot, cli_env
from tests.conftest import ask, make_message


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


def samples(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


async def test_metrics_count_messages_replies_emotions_and_memories(http_bot: Bot) -> None:
    _, before_text = await _get(http_bot.url + "/metrics")
    before = samples(before_text)
    http_bot.script.extend(["Que bom!"])
    await ask(http_bot.engine, make_message("estou muito feliz hoje, obrigado!", user="7"))
    await ask(http_bot.engine, make_message("/remember cor: azul", user="7"))
    token = issue_jwt(SECRET, "telegram:8")
    async with aiohttp.ClientSession() as session:
        await session.post(
            http_bot.url + "/memory",
            json={"category": "fact", "content": "x"},
            headers={"Authorization": f"Bearer {token}"},
        )
    status, text = await _get(http_bot.url + "/metrics")
    assert status == 200
    after = samples(text)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert delta("akira_messages_total{platform=telegram}") == 2
    assert delta("akira_replies_total{kind=answer}") == 1
    assert delta("akira_replies_total{kind=command}") == 1
    assert delta("akira_llm_latency_seconds_count{}") == 1
    assert delta("akira_emotion_readings_total{label=feliz}") == 1
    assert delta("akira_memories_stored_total{outcome=created,source=user}") == 1
    assert after["akira_memories{state=verified}"] == 2  # /remember and the API's
    assert after["akira_queue_depth{}"] == 0
    assert after["akira_llm_breaker_state{}"] == 0


async def test_fallbacks_are_counted(http_bot: Bot) -> None:
    from core.llm import LLMError

    _, before_text = await _get(http_bot.url + "/metrics")
    http_bot.script.extend([LLMError("down")] * 5)
    reply = await ask(http_bot.engine, make_message("oi", user="11"))
    assert [r.kind.value for r in reply.sent] == ["fallback"]
    _, text = await _get(http_bot.url + "/metrics")
    before, after = samples(before_text), samples(text)
    assert after["akira_fallbacks_total{}"] - before.get("akira_fallbacks_total{}", 0) == 1


async def test_health_says_storage_breaker_and_adapters(http_bot: Bot) -> None:
    status, body = await _get(http_bot.url + "/health")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok" and health["storage"] == "ok"
    assert health["llm_breaker"] in ("closed", "none")
    assert health["adapters"] == {}


async def test_openapi_lists_the_synapse_routes(http_bot: Bot) -> None:
    status, body = await _get(http_bot.url + "/openapi.json")
    doc = json.loads(body)
    assert status == 200 and doc["openapi"].startswith("3.")
    for path in (
        "/memory",
        "/memory/recall",
        "/memory/search",
        "/memory/by-tag",
        "/memory/expiring",
        "/memory/{memory_id}",
        "/memory/{memory_id}/verify",
        "/memory/stats",
        "/health",
        "/metrics",
    ):
        assert path in doc["paths"], path
    assert "category" in doc["components"]["schemas"]["StoreMemory"]["properties"]


def _start_bot(tmp_path: Path, **extra: str) -> subprocess.Popen[str]:
    env = cli_env(tmp_path / "data", AKIRA_HTTP__PORT="0", **extra)
    return subprocess.Popen(
        [sys.executable, "-m", "akira_bot.cli", "run"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


async def _served_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    while True:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
        assert line, f"the bot stopped: exit {proc.poll()}"
        found = re.search(r"HTTP API on (http://[^\s\"]+)", line)
        if found:
            return found.group(1)


async def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Stop the bot as a service manager would; its stdout and the rest of its stderr."""
    proc.send_signal(signal.SIGTERM)
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 0, err
    return out, err


async def test_run_with_the_api_alone_serves_it_and_no_console(tmp_path: Path) -> None:
    proc = _start_bot(tmp_path, AKIRA_LOG__FORMAT="json")
    try:
        url = await _served_url(proc)
        status, body = await _get(url + "/health")
        assert status == 200 and '"storage": "ok"' in body
    finally:
        out, err = await _stop(proc)
    assert SECRET not in err
    assert out == ""  # no console
    for line in err.splitlines():  # JSON log lines
        assert json.loads(line)["level"] in ("INFO", "WARNING", "ERROR")


async def test_run_with_worker_processes_serves_the_api_from_the_bot_process(
    tmp_path: Path,
) -> None:
    """With AKIRA_BOT__WORKERS=2 the engines are in other processes: the API opens the
    database itself, and /metrics adds up every process's counters."""
    proc = _start_bot(tmp_path, AKIRA_BOT__WORKERS="2")
    try:
        url = await _served_url(proc)
        token = issue_jwt(SECRET, "telegram:3")
        async with aiohttp.ClientSession() as session:
            async with session.post(
                url + "/memory",
                json={"category": "fact", "content": "mora em Natal"},
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                assert resp.status == 201
            async with session.get(
                url + "/memory/recall", headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                assert "mora em Natal" in await resp.text()
        status, text = await _get(url + "/metrics")
        assert status == 200
        values = samples(text)
        assert values["akira_memories_stored_total{outcome=created,source=user}"] == 1
        status, body = await _get(url + "/health")
        assert status == 200 and "in workers" in body
    finally:
        await _stop(proc)


def test_json_log_lines_keep_secrets_out(
    settings_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from akira_bot.cli import configure_logging

    settings = settings_factory(log={"format": "json"}, http={"jwt_secret": SECRET})
    configure_logging(settings)
    logging.getLogger("akira_bot.test").warning("token was %s", SECRET)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("akira_bot.test").exception("failed")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert lines[0]["message"] == "token was ***" and lines[0]["level"] == "WARNING"
    assert lines[1]["message"] == "failed" and "ValueError: boom" in lines[1]["exception"]
