"""``akira-bot run`` with only AKIRA_TELEGRAM__* set serves the Bot API at that address:
the real CLI in a subprocess, polling the fake server, answering, stopping on SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from akira_bot.testing import cli_env, start_cli, stop_cli
from akira_bot.testing.telegram_api import FakeTelegramServer

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("workers", [1, 2])
async def test_akira_bot_run_serves_telegram(tmp_path: Path, workers: int) -> None:
    async with FakeTelegramServer() as fake:
        env = cli_env(
            path=[REPO],
            **fake.settings_env(),
            AKIRA_TELEGRAM__ADMIN_IDS="[1]",
            AKIRA_DATA_DIR=str(tmp_path / "data"),
            AKIRA_LLM__PROVIDER="scripted",
            AKIRA_LLM__SCRIPT='["Hi Ana, nice to meet you."]',
            AKIRA_EMBEDDING__BACKEND="hashing",
            AKIRA_BOT__WORKERS=str(workers),
        )
        # cwd: no akira.toml from the checkout
        proc = await start_cli("run", env=env, cwd=tmp_path)
        try:
            await fake.wait_for(lambda: bool(fake.calls_to("getUpdates")), within=30)
            fake.send_text("hello akira", user_id=42)
            fake.send_text("/nosuchcommand", user_id=42)
            texts = await fake.wait_for_texts(2, 42, within=20)
        finally:
            status, err = await stop_cli(proc, timeout=20)

    assert texts[0] == "Hi Ana, nice to meet you."
    assert "/nosuchcommand" in texts[1]  # the engine's unknown-command answer, in order
    assert status == 0
    assert fake.calls_to("getMe") and fake.calls_to("deleteWebhook")
    assert fake.token not in err
