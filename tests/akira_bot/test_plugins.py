"""Plugins: loading (module path, entry point, code), the API (commands, stages, prompt
sections, after-reply hooks, typed services, own settings), the built-ins switched off,
and a failing plugin stopping the bot with one line."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from akira_bot.plugins import PluginAPI, PluginError, plugin_name
from akira_bot.settings import load_settings
from akira_bot.testing import BotTester, cli_env, run_cli
from core.commands import CommandRouter
from core.pipeline import CallNext, TurnContext

REPO = Path(__file__).resolve().parents[2]


def write_plugin(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")


def audit(api: PluginAPI) -> None:
    """A plugin as a function: a command, a stage, a section, a hook."""
    seen: list[str] = []
    api.provide(seen, list)

    @api.command("seen", "What the audit stage saw", admin_only=True)
    async def seen_command(ctx: TurnContext, args: str) -> str:
        return " | ".join(seen)

    @api.stage("audit", before="recall")
    async def audit_stage(ctx: TurnContext, call_next: CallNext) -> None:
        seen.append(ctx.text)
        await call_next()

    @api.prompt_section("Audit", order=5)
    async def section(ctx: TurnContext) -> str:
        return f"messages seen: {len(seen)}"

    @api.after_reply
    async def after(ctx: TurnContext) -> None:
        seen.append(f"replied:{ctx.reply_text}")


async def test_a_plugin_adds_a_command_a_stage_a_prompt_section_and_a_hook() -> None:
    async with BotTester(plugins=[audit], script=["Oi!"]) as bot:
        assert bot.engine.pipeline.names.index("audit") < bot.engine.pipeline.names.index("recall")
        assert await bot.say("hello there") == "Oi!"
        assert "messages seen: 1" in bot.last_system_prompt
        assert await bot.say("/seen", admin=True) == "hello there | replied:Oi!"
        # admin_only is checked by the router before the handler runs.
        assert "admin" in (await bot.say("/seen")).lower()
        assert "seen" in {spec.name for spec in bot.engine.commands}


async def test_handlers_get_typed_services() -> None:
    found: dict[str, object] = {}

    def probe(api: PluginAPI) -> None:
        found.update(
            storage=api.storage,
            memory=api.memory,
            llm=api.llm,
            memories=api.structured_memories,
            emotion=api.emotion,
            settings=api.settings,
        )

    async with BotTester(plugins=[probe]) as bot:
        services = bot.engine.services
        assert found["storage"] is services.storage and found["llm"] is bot.llm
        assert found["memories"] is services.structured_memories is not None
        assert found["emotion"] is services.emotion is not None
        assert services.require(CommandRouter) is bot.engine.router
        assert bot.settings is found["settings"]


@pytest.mark.parametrize(
    ("builtins", "gone_stage", "gone_command"),
    [
        (["structured_memories", "user_commands", "admin_commands"], "emotion", None),
        (["emotion", "user_commands", "admin_commands"], "structured_recall", None),
        (["emotion", "structured_memories", "admin_commands"], None, "remember"),
        (["emotion", "structured_memories", "user_commands"], None, "stats"),
        ([], "emotion", "help"),
    ],
)
async def test_each_builtin_can_be_switched_off(
    builtins: list[str], gone_stage: str | None, gone_command: str | None
) -> None:
    async with BotTester(settings={"bot": {"builtins": builtins}}, script=["ok"]) as bot:
        if gone_stage:
            assert gone_stage not in bot.engine.pipeline.names
        if gone_command:
            assert gone_command not in {s.name for s in bot.engine.commands}
            reply = await bot.say(f"/{gone_command}", admin=True, platform="telegram")
            assert f"/{gone_command}" in reply  # the unknown-command answer
        assert await bot.say("hello") == "ok"  # the bot still talks
    if "emotion" not in builtins:
        async with BotTester(settings={"bot": {"builtins": builtins}}) as bot:
            assert bot.engine.services.emotion is None


async def test_mood_and_memories_commands_work_without_their_features() -> None:
    async with BotTester(settings={"bot": {"builtins": ["user_commands"]}}) as bot:
        assert "food" in await bot.say("/remember food: pizza")
        assert "pizza" in await bot.say("/memories")
        assert await bot.say("/mood")


async def test_plugin_settings_from_env_and_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import BaseModel

    class Limits(BaseModel):
        most: int = 3
        label: str = "x"

    got: list[Limits] = []

    def limits(api: PluginAPI) -> None:
        got.append(api.config(Limits))

    toml = tmp_path / "akira.toml"
    toml.write_text('[limits]\nmost = 7\nlabel = "from toml"\n', encoding="utf-8")
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    monkeypatch.setenv("AKIRA_BOT__PLUGINS", '["tests.akira_bot.test_plugins:limits"]')
    load_settings()  # the [limits] table of a listed plugin is not an unknown setting
    monkeypatch.delenv("AKIRA_BOT__PLUGINS")  # given in code below instead
    monkeypatch.setenv("AKIRA_LIMITS__MOST", "9")
    async with BotTester(plugins=[limits]) as bot:
        assert bot.engine.services.require(Limits) is got[0]
    assert got[0].most == 9 and got[0].label == "from toml"
    monkeypatch.setenv("AKIRA_LIMITS__MOST", "many")
    with pytest.raises(PluginError, match="AKIRA_LIMITS__MOST"):
        async with BotTester(plugins=[limits]):
            pass


def test_plugin_names() -> None:
    assert plugin_name("mybot.plugins.dice") == "dice"
    assert plugin_name("shout") == "shout"
    assert plugin_name("akira-weather") == "akira_weather"
    assert plugin_name("mybot.bot:greeter") == "greeter"
    assert plugin_name("mybot.dice:setup") == "dice"


def seen_again(api: PluginAPI) -> None:
    api.command("seen", "Another /seen")(lambda ctx, args: None)  # type: ignore[arg-type,return-value]


async def test_two_plugins_with_one_command_name_fail_naming_the_second() -> None:
    with pytest.raises(PluginError, match=r"seen_again' failed to set up.*/seen"):
        async with BotTester(plugins=[audit, seen_again]):
            pass
    with pytest.raises(PluginError, match="listed twice"):
        async with BotTester(plugins=[audit, audit]):
            pass


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    ("plugin", "body", "expected"),
    [
        ("no.such.plugin", None, "plugin 'no.such.plugin': no module or"),
        ("broken_import", "import no_such_dependency_xyz\n", "failed to import"),
        ("broken_setup", "def setup(api):\n    raise RuntimeError('boom')\n", "failed to set up"),
        ("no_setup", "X = 1\n", "has no setup(api) function"),
    ],
)
def test_a_failing_plugin_stops_the_bot_with_one_line(
    tmp_path: Path, workers: str, plugin: str, body: str | None, expected: str
) -> None:
    if body is not None:
        write_plugin(tmp_path / "plugins", plugin, body)
    env = cli_env(
        path=[REPO, tmp_path / "plugins"],
        AKIRA_DATA_DIR=str(tmp_path / "data"),
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_BOT__PLUGINS=f'["{plugin}"]',
        AKIRA_BOT__WORKERS=workers,
    )
    proc = run_cli("chat", input="hello\n", env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("akira-bot:")]
    assert len(lines) == 1 and expected in lines[0] and repr(plugin) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not proc.stdout.strip()


def ping(api: PluginAPI) -> None:
    """A plugin given in code, sent to the worker processes by reference."""

    @api.command("ping", "Which process answers")
    async def ping_command(ctx: TurnContext, args: str) -> str:
        return f"pong from {os.getpid()}"


async def test_plugins_given_in_code_reach_the_worker_processes(tmp_path: Path) -> None:
    from akira_bot.app import build_handler
    from akira_bot.settings import Settings
    from akira_bot.testing import ask, make_message
    from core.workers import ShardedEngine

    settings = Settings(
        data_dir=tmp_path,
        llm={"provider": "scripted"},
        embedding={"backend": "hashing"},
        bot={"workers": 2},
    )
    engine = build_handler(settings, plugins=[ping, "examples.dice.dice"])
    assert isinstance(engine, ShardedEngine)
    async with engine:
        replies = {}
        for user in ("1", "2", "3", "4"):
            sent = await ask(engine, make_message("/ping", user=user))
            replies[engine.worker_for(f"telegram:{user}")] = sent.texts[0]
        rolled = await ask(engine, make_message("/roll 2d6"))
        assert {"ping", "roll"} <= {spec.name for spec in engine.commands}
    assert len(replies) == 2  # both workers answered
    pids = {int(text.rsplit(" ", 1)[1]) for text in replies.values()}
    assert os.getpid() not in pids and len(pids) == 2
    assert rolled.texts[0].startswith("🎲")
