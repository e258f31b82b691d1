"""`import akira_bot` is the public API: every name in __all__ resolves, lazily, and the
package ships its type hints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import akira_bot


def test_every_public_name_resolves() -> None:
    for name in akira_bot.__all__:
        assert getattr(akira_bot, name) is not None, name
    assert akira_bot.TurnContext.__module__ == "core.pipeline"
    assert akira_bot.testing.BotTester.__name__ == "BotTester"
    assert sorted(dir(akira_bot)) == sorted(akira_bot.__all__)


def test_importing_the_package_loads_nothing_heavy() -> None:
    script = (
        "import sys, akira_bot; "
        "print(sorted(m for m in ('core.engine', 'numpy', 'akira_bot.app') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_package_is_typed() -> None:
    assert (Path(akira_bot.__file__).parent / "py.typed").is_file()
