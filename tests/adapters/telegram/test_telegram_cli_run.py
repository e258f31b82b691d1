"""``akira-bot run`` with only AKIRA_TELEGRAM__* set serves the Bot API at that address:
the real CLI in a subprocess, polling the fake server, answering, stopping on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes.telegram_api import FakeTelegramServer

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("workers", [1, 2])
async def test_akira_bot_run_serves_telegram(tmp_path: Path, workers: int) -> None:
    async with FakeTelegramServer() as fake:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")},
            "AKIRA_TELEGRAM__TOKEN": fake.token,
            "AKIRA_TELEGRAM__BASE_URL": fake.base_url,
            "AKIRA_TELEGRAM__ADMIN_IDS": "[1]",
            "AKIRA_TELEGRAM__POLL_TIMEOUT": "1",
            "AKIRA_DATA_DIR": str(tmp_path / "data"),
            "AKIRA_LLM__PROVIDER": "scripted",
            "AKIRA_LLM__SCRIPT": '["Hi Ana, nice to meet you."]',
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "PYTHONPATH": str(REPO),
            "AKIRA_BOT__WORKERS": str(workers),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "akira_bot.cli",
            "run",
            env=env,
            cwd=tmp_path,  # no akira.toml from the checkout
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await fake.wait_for(lambda: bool(fake.calls_to("getUpdates")), within=30)
            fake.send_text("hello akira", user_id=42)
            fake.send_text("/nosuchcommand", user_id=42)
            texts = await fake.wait_for_texts(2, 42, within=20)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            _out, err = await asyncio.wait_for(proc.communicate(), 20)

    assert texts[0] == "Hi Ana, nice to meet you."
    assert "/nosuchcommand" in texts[1]  # the engine's unknown-command answer, in order
    assert proc.returncode == 0
    assert fake.calls_to("getMe") and fake.calls_to("deleteWebhook")
    assert fake.token not in err.decode()
