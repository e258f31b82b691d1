"""Done means: a plugin package made in a temporary folder, installed with pip (into a
folder of its own on PYTHONPATH, so the shared environment stays as it was), enabled
only by AKIRA_BOT__PLUGINS naming its entry point, adds a command and a stage that work
on the console, Telegram and Discord (the local fakes), with one engine process and
with AKIRA_BOT__WORKERS=2. Every bot here is the real `akira-bot` in a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from akira_bot.testing import cli_env, run_cli, running_cli
from akira_bot.testing.discord_api import FakeDiscord
from akira_bot.testing.telegram_api import FakeTelegramServer

REPO = Path(__file__).resolve().parents[2]
SIGN = "(shouted)"
MODEL_REPLY = "Hi there"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package copied to a temporary folder and pip-installed from there."""
    root = tmp_path_factory.mktemp("shout")
    package = root / "akira-shout"
    shutil.copytree(REPO / "examples" / "shout_plugin", package)
    target = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(package),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert list(target.glob("akira_shout-*.dist-info"))
    return target


def bot_env(site: Path, data: Path, workers: int, **extra: str) -> dict[str, str]:
    return cli_env(
        path=[REPO, site],
        AKIRA_DATA_DIR=str(data),
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_LLM__SCRIPT=f'["{MODEL_REPLY}"]',
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_BOT__WORKERS=str(workers),
        # The plugin is enabled by this and nothing else; its own setting:
        AKIRA_BOT__PLUGINS='["shout"]',
        AKIRA_SHOUT__SIGN=SIGN,
        **extra,
    )


def test_the_plugin_is_not_importable_without_its_install() -> None:
    # So the tests below see the pip-installed copy, not something already around.
    with pytest.raises(ModuleNotFoundError):
        __import__("akira_shout")


@pytest.mark.parametrize("workers", [1, 2])
def test_console(site: Path, tmp_path: Path, workers: int) -> None:
    proc = run_cli(
        "chat",
        "--user",
        "ana",
        input="/shout hello\nhow are you?\n",
        env=bot_env(site, tmp_path / "data", workers),
        cwd=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == ["HELLO!", f"{MODEL_REPLY} {SIGN}"]


@pytest.mark.parametrize("workers", [1, 2])
async def test_telegram(site: Path, tmp_path: Path, workers: int) -> None:
    async with FakeTelegramServer() as fake:
        env = bot_env(site, tmp_path / "data", workers, **fake.settings_env())
        async with running_cli("run", env=env, cwd=tmp_path) as bot:
            await fake.wait_for(lambda: bool(fake.calls_to("getUpdates")), within=60)
            for text in ("/shout hello", "how are you?"):
                fake.send_text(text, user_id=42)
            texts = await fake.wait_for_texts(2, 42, within=30)
    assert bot.status == 0, bot.stderr[-2000:]
    err = bot.stderr
    assert texts == ["HELLO!", f"{MODEL_REPLY} {SIGN}"]
    assert "shout" in fake.commands_for()  # in Telegram's command list
    assert fake.token not in err


def replied(discord: FakeDiscord, channel: int) -> bool:
    return any(SIGN in (m["content"] or "") for m in discord.bot_messages_in(channel))


@pytest.mark.parametrize("workers", [1, 2])
async def test_discord(site: Path, tmp_path: Path, workers: int) -> None:
    async with FakeDiscord(heartbeat_interval_ms=1000) as discord:
        await talk_on_discord(site, tmp_path, discord, workers)


async def talk_on_discord(site: Path, tmp_path: Path, discord: FakeDiscord, workers: int) -> None:
    alice = discord.add_user("alice")
    env = bot_env(site, tmp_path / "data", workers, **discord.settings_env())
    async with running_cli("run", env=env, cwd=tmp_path) as bot:
        await discord.wait_for(lambda: discord.identifies and discord.command_syncs, within=60)
        interaction = await discord.slash(alice, "shout", "hello")
        await discord.wait_for(lambda: discord.events_for(interaction), within=30)
        await discord.user_message(alice, "how are you?")
        channel = discord.dm_channel_id(alice)
        await discord.wait_for(lambda: replied(discord, channel), within=30)
    assert bot.status == 0, bot.stderr[-2000:]
    err = bot.stderr
    assert [e.content for e in discord.events_for(interaction)] == ["HELLO!"]
    # The slash command's answer and the model's reply, signed by the stage.
    assert [m["content"] for m in discord.bot_messages_in(channel)][-1] == f"{MODEL_REPLY} {SIGN}"
    assert "shout" in {c["name"] for c in discord.commands}  # a slash command
    assert discord.token not in err
