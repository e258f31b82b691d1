"""Search cost at scale, wall and CPU time, plain and conversational. Prints JSON.

    python benchmarks/recall_latency.py [--nodes 100000] [--queries 200] [--code DIR]

One person's store of ``--nodes`` nodes is bulk-loaded as ``benchmarks/memory_scale.py``
builds it (random unit vectors, synthetic Zipf texts, follow-up edges). Then, alternating
query by query so both see the same machine:

- ``plain``: ``GraphSearcher.search`` with a precomputed query vector (what
  ``memory_scale.py`` times);
- ``conversational``: ``GraphMemory.recall`` at a time after the last node, the query
  embedded by an instant random embedder (no batching wait): the plan, the thread pool
  (the person's latest nodes and their vectors), the priors and the re-ranking on top;
  ``conversational_second`` with a second encoder too, and the learned order of
  ``core.memory.rerank`` when the code has one (its weights written for the random
  encoders).

CPU time (``time.process_time``: every thread of the process, the database thread
included) is reported beside wall time: on a machine shared with other work, wall time
mostly measures the queue for the CPU. ``--code DIR`` imports ``core`` from another
checkout (e.g. the code before a change) so the two can be run one after the other.

Entities (schema 15, core.memory.entities): ``--entity-share`` of the nodes name one of
``ENTITY_NAMES`` names (Zipf: a few are named thousands of times, as a person's mother
or partner would be), written as postings, and every other query names one ("..., e a
Name?"), so the entity lookups, seeds and boost are timed. Code without the entity table
gets the same queries and no postings.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


sys.path.insert(0, str(HERE))
from checkout import use_code  # noqa: E402

CODE = use_code(sys.argv[1:])

import numpy as np  # noqa: E402
from memory_scale import T0, RandomEmbedder, TextSource, bulk_load, unit_vectors  # noqa: E402

from core.memory.graph import GraphConfig, GraphMemory  # noqa: E402
from core.memory.search import GraphSearcher, SearchConfig  # noqa: E402
from core.storage import SQLiteStorage  # noqa: E402

ENTITY_NAMES = 500
SECOND_DIM = 512  # USE multilingual v3's


class SecondRandom(RandomEmbedder):
    """Random unit vectors of the second encoder's size, by text hash (as RandomEmbedder).
    Named as USE is, so that what reads USE's vectors (core.memory.heads) runs on them
    too: what is timed is its cost, not its sense."""

    name = "use-multilingual-v3"
    dim = SECOND_DIM

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), SECOND_DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(SECOND_DIM)
            out[i] = (v / np.linalg.norm(v)).astype(np.float32)
        return out


async def add_second(storage: SQLiteStorage, owner: str) -> int:
    """A second vector for every node of the owner (schema 16); 0 when the schema has
    none (older code)."""
    db = storage.db
    found = await db.fetchone("SELECT 1 FROM sqlite_master WHERE name = 'graph_second_embeddings'")
    if found is None:
        return 0
    rows = await db.fetchall("SELECT id FROM nodes WHERE owner = ?", (owner,))
    rng = np.random.default_rng(23)
    for start in range(0, len(rows), 20_000):
        chunk = rows[start : start + 20_000]
        v = rng.standard_normal((len(chunk), SECOND_DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        async with db.transaction() as conn:
            await conn.executemany(
                "INSERT INTO graph_second_embeddings(node_id, owner, model, dim, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (r["id"], owner, SecondRandom.name, SECOND_DIM, v[i].tobytes())
                    for i, r in enumerate(chunk)
                ],
            )
    return len(rows)


def zipf(n: int) -> np.ndarray:
    ranks = np.arange(1, n + 1)
    return (1 / ranks) / (1 / ranks).sum()


def entity_name(i: int) -> str:
    return f"Nome{i}"


async def add_entities(storage: SQLiteStorage, owner: str, share: float) -> int:
    """Entity postings for ``share`` of the owner's nodes; 0 when the schema has none."""
    db = storage.db
    if await db.fetchone("SELECT 1 FROM sqlite_master WHERE name = 'graph_entities'") is None:
        return 0
    rows = await db.fetchall("SELECT id, ts, scope FROM nodes WHERE owner = ?", (owner,))
    rng = np.random.default_rng(17)
    p = zipf(ENTITY_NAMES)
    named = [r for r, keep in zip(rows, rng.random(len(rows)) < share, strict=True) if keep]
    picks = rng.choice(ENTITY_NAMES, size=len(named), p=p)
    async with db.transaction() as conn:
        await conn.executemany(
            "INSERT OR IGNORE INTO graph_entities(owner, entity, ts, node_id, scope)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (owner, entity_name(int(i)).lower(), r["ts"], r["id"], r["scope"])
                for r, i in zip(named, picks, strict=True)
            ],
        )
    return len(named)


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.array(values) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p90_ms": round(float(np.percentile(ms, 90)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
    }


def shipped_order_for_random(workdir: Path) -> Path | None:
    """The shipped weights of the learned order (core.memory.rerank) written for the
    random encoders, so that conversational recall with the second encoder runs it: what
    is timed is its cost, not its sense. None when the code has no learned order."""
    try:
        from core.memory.rerank import DEFAULT_RERANKER, Reranker, save_reranker
    except ImportError:
        return None
    with np.load(DEFAULT_RERANKER) as data:
        weights = np.asarray(data["weights"])
    path = workdir / "rerank.npz"
    save_reranker(Reranker(RandomEmbedder.name, SecondRandom.name, weights), path, {})
    return path


async def measure(
    nodes: int, queries: int, workdir: Path, entity_share: float = 0.3
) -> dict[str, Any]:
    storage = SQLiteStorage(workdir / "latency.db")
    out: dict[str, Any] = {"nodes": nodes, "queries": queries}
    async with storage:
        out["build_s"] = round(await bulk_load(storage, 1, nodes, TextSource()), 1)
        out["entity_postings"] = await add_entities(storage, "bench:0", entity_share)
        memory = GraphMemory(storage, RandomEmbedder(), config=GraphConfig(max_wait_ms=0.0))
        owner = "bench:0"
        # With a second vector a node (USE's size), when the code has them: the
        # conversational recall searching both, alternating with the one above.
        out["second_vectors"] = await add_second(storage, owner)
        second = None
        if out["second_vectors"]:
            config = GraphConfig(max_wait_ms=0.0)
            rerank = shipped_order_for_random(workdir)
            if rerank is not None:  # the learned order runs too (when the code has one)
                config = dataclasses.replace(
                    config, query=dataclasses.replace(config.query, rerank=str(rerank))
                )
            second = GraphMemory(storage, RandomEmbedder(), config=config)
            second.use_second(SecondRandom())
        rng = np.random.default_rng(11)
        texts = TextSource(seed=5).texts(queries)
        vectors = unit_vectors(rng, queries)
        at = T0 + timedelta(minutes=10 * nodes + 1)
        await memory.searcher.search(owner, texts[0], vectors[0], depth=2, limit=10)  # warm
        timings: dict[str, tuple[list[float], list[float]]] = {
            "plain": ([], []),
            "conversational": ([], []),
        }
        # The same plain search with the entity lookup off, alternating in this process:
        # the entity part's cost apart from the machine's drift between runs.
        search_fields = {f.name for f in dataclasses.fields(SearchConfig)}
        unnamed = None
        if "entity_boost" in search_fields:
            off = dataclasses.replace(
                SearchConfig(), entity_boost=0.0, entity_seed=0.0, entity_path=0.0
            )
            unnamed = GraphSearcher(storage.graph, storage.nodes, off, model=memory.model)
            timings["plain_entities_off"] = ([], [])
        # And with result diversity off (the MMR re-ranking), when the code has it.
        plain_only = None
        if "diversity" in search_fields:
            flat = dataclasses.replace(memory.searcher.config, diversity=0.0)
            plain_only = GraphSearcher(storage.graph, storage.nodes, flat, model=memory.model)
            timings["plain_diversity_off"] = ([], [])
        second_vectors = SecondRandom().embed_passages(texts)
        if second is not None:
            timings["plain_second"] = ([], [])
            timings["conversational_second"] = ([], [])
            await second.recall(owner, texts[0], scopes=None, limit=10, at=at)  # warm
        names = rng.choice(ENTITY_NAMES, size=queries, p=zipf(ENTITY_NAMES))
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            query = " ".join(text.split()[:6])
            if n % 2:
                query += f", e a {entity_name(int(names[n]))}?"
            for kind in timings:
                wall, cpu = time.perf_counter(), time.process_time()
                if kind == "plain":
                    await memory.searcher.search(owner, query, vector, depth=2, limit=10)
                elif kind == "plain_entities_off" and unnamed is not None:
                    await unnamed.search(owner, query, vector, depth=2, limit=10)
                elif kind == "plain_diversity_off" and plain_only is not None:
                    await plain_only.search(owner, query, vector, depth=2, limit=10)
                elif kind == "plain_second":
                    await memory.searcher.search(
                        owner,
                        query,
                        vector,
                        depth=2,
                        limit=10,
                        second=(SecondRandom.name, second_vectors[n], 1.0),
                    )
                elif kind == "conversational_second" and second is not None:
                    await second.recall(owner, query, scopes=None, limit=10, at=at)
                else:
                    await memory.recall(owner, query, scopes=None, limit=10, at=at)
                timings[kind][0].append(time.perf_counter() - wall)
                timings[kind][1].append(time.process_time() - cpu)
        for kind, (walls, cpus) in timings.items():
            out[kind] = {"wall": percentiles(walls), "cpu": percentiles(cpus)}
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--code", help="import core from this checkout")
    parser.add_argument("--entity-share", type=float, default=0.3, help="nodes naming someone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args.nodes, args.queries, Path(tmp), args.entity_share))
    result["code"] = str(CODE)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
