"""Which checkout's ``core`` a benchmark imports: ``--code DIR`` (another checkout, e.g.
the code before a change, made with ``git worktree add --detach DIR REV``) or this one.

Imported before anything imports ``core`` (argparse runs later), by scripts that compare
two versions of the code one after the other (recall_eval.py, recall_latency.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def code_root(argv: Sequence[str]) -> Path:
    for i, item in enumerate(argv):
        if item == "--code" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if item.startswith("--code="):
            return Path(item.split("=", 1)[1]).resolve()
    return HERE.parent


def use_code(argv: Sequence[str]) -> Path:
    """Put the chosen checkout first on ``sys.path``, this folder next, and this checkout
    last: locomo.py and memory_scale.py put their own checkout first unless it is on the
    path already."""
    code = code_root(argv)
    sys.path.insert(0, str(code))
    if str(HERE) not in sys.path:
        sys.path.insert(1, str(HERE))
    if str(HERE.parent) not in sys.path:
        sys.path.append(str(HERE.parent))
    return code
