"""Process-wide settings the running bot applies."""

from __future__ import annotations

import json
import subprocess
import sys

from akira_bot.app import GC_THRESHOLDS


def test_the_collector_is_tuned_for_a_long_running_bot() -> None:
    # In a child process: the thresholds and the frozen objects are the whole process's.
    script = (
        "import gc, json; from akira_bot.app import tune_garbage_collector; "
        "before = gc.get_freeze_count(); tune_garbage_collector(); "
        "print(json.dumps([list(gc.get_threshold()), before, gc.get_freeze_count()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    thresholds, frozen_before, frozen_after = json.loads(out)
    assert tuple(thresholds) == GC_THRESHOLDS
    assert frozen_before == 0 and frozen_after > 10_000  # startup's objects, never scanned
