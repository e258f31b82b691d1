"""Running the real ``akira-bot`` in a subprocess from a test: the environment without
the caller's own ``AKIRA_*`` variables, piped input, a bounded wait."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path


def cli_env(*, path: Sequence[Path | str] = (), **akira: str) -> dict[str, str]:
    """This process's environment minus every ``AKIRA_*`` variable, plus ``akira`` (full
    names: ``AKIRA_LLM__PROVIDER="scripted"``) and ``path`` put first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    if path:
        parts = [str(p) for p in path]
        if env.get("PYTHONPATH"):
            parts.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env | akira


def run_cli(
    *args: str | bytes, env: dict[str, str], cwd: Path, input: str = "", timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``akira-bot ARGS`` to completion with ``input`` on its stdin (text mode; bytes
    arguments go as they are, as a shell passes ones that are not UTF-8)."""
    command = [sys.executable, "-m", "akira_bot.cli", *args]
    return subprocess.run(
        command, input=input, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


async def start_cli(*args: str, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """``akira-bot ARGS`` started (``run`` with a platform's fake, say); stop it with
    :func:`stop_cli`."""
    command = [sys.executable, "-m", "akira_bot.cli", *args]
    return await asyncio.create_subprocess_exec(
        *command, env=env, cwd=cwd, stdin=DEVNULL, stdout=PIPE, stderr=PIPE
    )


@dataclass
class CliRun:
    """A bot started by :func:`running_cli`; ``status`` and ``stderr`` once it stopped."""

    process: asyncio.subprocess.Process
    status: int | None = None
    stderr: str = ""


@asynccontextmanager
async def running_cli(*args: str, env: dict[str, str], cwd: Path) -> AsyncIterator[CliRun]:
    """``akira-bot ARGS`` running for the block, stopped (SIGTERM) when it ends."""
    run = CliRun(await start_cli(*args, env=env, cwd=cwd))
    try:
        yield run
    finally:
        run.status, run.stderr = await stop_cli(run.process)


async def stop_cli(proc: asyncio.subprocess.Process, timeout: float = 40) -> tuple[int, str]:
    """SIGTERM (a graceful shutdown) unless it already exited; its exit status and stderr."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, err.decode(errors="replace")
