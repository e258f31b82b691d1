"""`akira-bot chat` in pipe mode, as a person or a script would run it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from akira_bot.testing import cli_env
from akira_bot.testing import run_cli as kit_run_cli
from core.cleaner import contains_internal_marker


def run_cli(
    args: Sequence[str | bytes], stdin: str, tmp_path: Path, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess (bytes arguments: as a shell passes non-UTF-8 ones)."""
    defaults = {
        "AKIRA_DATA_DIR": str(tmp_path / "data"),
        "AKIRA_LLM__PROVIDER": "scripted",
        "AKIRA_EMBEDDING__BACKEND": "hashing",
        "AKIRA_EMOTION__DETECTOR": "lexicon",
    }
    env = cli_env(**(defaults | env_extra))
    return kit_run_cli(*args, input=stdin, env=env, cwd=tmp_path)


def test_one_reply_line_per_input_line_without_markers(tmp_path: Path) -> None:
    script = [
        "<think>o usuário disse oi</think>Oi! <!WARM_FRIENDLY_MODE>Tudo bem?",
        "<THINKING>nome</THINKING>Eu sou a AKIRA.\n\nPrazer!",
    ]
    proc = run_cli(
        ["chat", "--user", "alice"],
        "oi\nqual seu nome?\n",
        tmp_path,
        AKIRA_LLM__SCRIPT=json.dumps(script),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == ["Oi! Tudo bem?", "Eu sou a AKIRA. Prazer!"]
    assert not any(contains_internal_marker(line) for line in lines)


def test_history_is_kept_between_runs_for_the_same_user(tmp_path: Path) -> None:
    first = run_cli(["chat", "--user", "bob"], "Tenho dor de cabeça\n", tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "Você disse: Tenho dor de cabeça"
    # A second session is a new conversation turn, not a duplicate delivery of the first.
    second = run_cli(["chat", "--user", "bob"], "Tomo remédio?\n", tmp_path)
    assert second.stdout.strip() == "Você disse: Tomo remédio?"
    export = run_cli(["memory", "export", "console:bob"], "", tmp_path)
    assert export.returncode == 0, export.stderr
    data = json.loads(export.stdout)
    contents = [m["content"] for m in data["messages"]]
    assert contents == [
        "Tenho dor de cabeça",
        "Você disse: Tenho dor de cabeça",
        "Tomo remédio?",
        "Você disse: Tomo remédio?",
    ]


def test_run_with_no_platform_configured_starts_the_console(tmp_path: Path) -> None:
    proc = run_cli(["run", "--user", "carol"], "hello there\n\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Você disse: hello there"
    assert len(lines) == 2  # the empty line gets its own polite reply line
    assert lines[1]


def test_help_for_every_subcommand(tmp_path: Path) -> None:
    for args in (
        ["--help"],
        ["run", "--help"],
        ["chat", "--help"],
        ["emotion", "--help"],
        ["memory", "--help"],
        ["memory", "search", "--help"],
        ["memory", "export", "--help"],
        ["memory", "forget", "--help"],
    ):
        proc = run_cli(args, "", tmp_path)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "usage: akira-bot" in proc.stdout


def test_bad_user_argument_is_a_clear_usage_error(tmp_path: Path) -> None:
    proc = run_cli(["memory", "export", "alice"], "", tmp_path)
    assert proc.returncode == 2
    assert "platform:id" in proc.stderr and "Traceback" not in proc.stderr


def test_emotion_command_with_each_shipped_detector(tmp_path: Path) -> None:
    """`akira-bot emotion TEXT --json` through the setting people use to pick a detector,
    the fine-tuned model and the ensemble included; a value that is not a detector is
    refused."""
    seed = "você é inútil! essa resposta é ridícula"
    for detector in ("lexicon", "classifier", "ensemble", "finetuned"):
        proc = run_cli(["emotion", seed, "--json"], "", tmp_path, AKIRA_EMOTION__DETECTOR=detector)
        assert proc.returncode == 0, (detector, proc.stderr)
        reading = json.loads(proc.stdout)
        assert reading["label"] == "agressivo", (detector, reading)
        assert 0.0 <= reading["score"] <= 1.0
    bad = run_cli(["emotion", seed], "", tmp_path, AKIRA_EMOTION__DETECTOR="bart")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "finetuned" in bad.stderr  # the error lists what may be chosen


def test_memories_subcommands_in_the_console(tmp_path: Path) -> None:
    """/remember with a priority and an expiry, /memories expiring, #tag and a bad date,
    typed in the console (Portuguese, the default language); one reply line each."""
    script = "\n".join(
        [
            "/remember !alta viagem: Porto por 5 dias #férias",
            "/memories expiring",
            "/memories #ferias",
            "/remember prova: álgebra até 31/02/2027",
            "/memories",
        ]
    )
    proc = run_cli(["chat", "--user", "ana"], script + "\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved, soon, tagged, refused, listing = proc.stdout.splitlines()
    assert saved.startswith("Guardado: note/viagem. Prioridade: alta. Vale até ")
    assert "nos próximos 7 dia(s): 1" in soon and "Porto" in soon
    assert "“#ferias”: 1" in tagged and "Tags: férias" in tagged
    assert refused.startswith("Não entendi a data “31/02/2027”") and "Nada foi guardado" in refused
    assert "1 memória(s)" in listing and "álgebra" not in listing
