"""The examples in examples/ run: each on the test kit, the in-code bot as a program."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from akira_bot.plugins import PluginError
from akira_bot.testing import BotTester, cli_env
from examples.dice.dice import DiceSettings, roll
from examples.faq.faq import HOUSE_RULES

REPO = Path(__file__).resolve().parents[2]
DICE = "examples.dice.dice"
FAQ = "examples.faq.faq"


async def test_dice_commands_use_the_plugins_own_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AKIRA_DICE__SIDES", "2")
    async with BotTester(plugins=[DICE]) as bot:
        reply = await bot.say("/roll 8")
        values = [int(v) for v in reply.removeprefix("🎲 ").split(" = ")[0].split(" + ")]
        assert len(values) == 8 and set(values) <= {1, 2}
        assert "From 1 to 10 dice" in await bot.say("/roll 11")  # max_dice's default
        assert (await bot.say("/coin", locale="en")).startswith("🪙")
        assert {"roll", "coin"} <= {s.name for s in bot.engine.commands}
        assert not bot.prompts  # commands never reach the model


async def test_dice_rejects_a_bad_setting_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_DICE__SIDES", "1")
    with pytest.raises(PluginError, match=r"examples\.dice\.dice.*AKIRA_DICE__SIDES"):
        async with BotTester(plugins=[DICE]):
            pass


def test_roll_is_a_plain_function() -> None:
    dice = roll("3d4", DiceSettings(), random.Random(1))
    assert len(dice) == 3 and all(1 <= d <= 4 for d in dice)
    assert dice == roll("3d4", DiceSettings(), random.Random(1))  # same seed, same dice
    assert all(1 <= d <= 20 for d in roll("5", DiceSettings(sides=20), random.Random(2)))


async def test_faq_stage_answers_known_questions_and_the_section_joins_the_prompt() -> None:
    async with BotTester(plugins=[FAQ], script=["Claro!"]) as bot:
        assert "9h" in await bot.say("Que horas vocês abrem?")
        assert not bot.prompts  # answered by the stage, not the model
        assert await bot.say("Vocês vendem café?") == "Claro!"
        assert HOUSE_RULES in bot.last_system_prompt
        # The stage sits after persist: the FAQ question was stored all the same.
        stored = await bot.engine.services.storage.nodes.count("console:42")
        assert stored >= 3  # both questions and the model's reply


def test_the_bot_assembled_in_code_runs(tmp_path: Path) -> None:
    env = cli_env(
        path=[REPO],
        AKIRA_DATA_DIR=str(tmp_path / "data"),
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_LLM__SCRIPT='["Hello, guest!"]',
        AKIRA_EMBEDDING__BACKEND="hashing",
    )
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "in_code" / "bot.py")],
        input="/whoami\nhello\n/stats\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "console:guest" in lines[0]
    assert "Hello, guest!" in lines[1]
    assert "/stats" in lines[2]  # admin_commands switched off in code: unknown command
