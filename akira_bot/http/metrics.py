"""Prometheus metrics (``/metrics``), counted where the work happens.

* The pipeline: a ``metrics`` stage first in the pipeline counts messages, replies by
  kind, fallbacks and emotion readings; the ``generate`` stage is wrapped to time the
  LLM call alone (the wrapper stops the clock when generate hands on to the next stage).
* The memory API counts what it stores and verifies.
* At each scrape: memories in storage (verified/unverified, from the database, so they
  count what the chat commands and the extractor stored too), messages waiting, and the
  LLM circuit breaker.

With ``AKIRA_BOT__WORKERS`` above 1 the pipelines run in worker processes: the bot then
sets ``PROMETHEUS_MULTIPROC_DIR`` before anything imports prometheus_client (see
:func:`akira_bot.http.server.prepare_metrics`), each process writes its values there and
the scrape in the bot's process adds them up (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from core.types import ReplyKind

if TYPE_CHECKING:
    from core.pipeline import CallNext, Pipeline, Stage, TurnContext

log = logging.getLogger(__name__)

MESSAGES = Counter("akira_messages", "Messages that reached the pipeline", ["platform"])
REPLIES = Counter("akira_replies", "Replies sent, by kind", ["kind"])
FALLBACKS = Counter("akira_fallbacks", "Fallback replies (the LLM failed or said nothing)")
LLM_LATENCY = Histogram(
    "akira_llm_latency_seconds",
    "Time of the generate stage (the LLM call with its retries)",
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
EMOTIONS = Counter("akira_emotion_readings", "Emotion readings, by label", ["label"])
STORED = Counter(
    "akira_memories_stored", "Structured memories stored through the API", ["source", "outcome"]
)
VERIFIED = Counter("akira_memories_verified", "Memories verified through the API", ["by"])
MEMORIES = Gauge(
    "akira_memories", "Structured memories in storage", ["state"], multiprocess_mode="max"
)
IN_PIPELINE = Gauge(
    "akira_messages_in_pipeline", "Messages being handled now", multiprocess_mode="livesum"
)
QUEUE_DEPTH = Gauge(
    "akira_queue_depth",
    "Messages accepted and not yet answered (waiting or being handled)",
    multiprocess_mode="max",
)
BREAKER = Gauge(
    "akira_llm_breaker_state",
    "LLM circuit breaker: 0 closed, 1 half-open, 2 open (the worst of the workers)",
    multiprocess_mode="max",
)
BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}


def memory_stored(source: str, outcome: str) -> None:
    STORED.labels(source, outcome).inc()


def memory_verified(by: str) -> None:
    VERIFIED.labels(by).inc()


def breaker_state(llm: Any) -> str | None:
    """The state of the circuit breaker in front of ``llm`` (None: it has none)."""
    breaker = getattr(llm, "breaker", None)
    state = getattr(breaker, "state", None)
    return None if state is None else str(state.value if hasattr(state, "value") else state)


class MetricsStage:
    """First in the pipeline: counts the message, then what the rest of it did."""

    name = "metrics"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        MESSAGES.labels(ctx.message.platform).inc()
        IN_PIPELINE.inc()
        failed = False
        try:
            await call_next()
        except Exception:
            failed = True  # the engine sends its fallback reply
            raise
        finally:
            IN_PIPELINE.dec()
            self._count(ctx, failed)

    @staticmethod
    def _count(ctx: TurnContext, failed: bool) -> None:
        for reply in ctx.sent:
            REPLIES.labels(reply.kind.value).inc()
            if reply.kind is ReplyKind.FALLBACK:
                FALLBACKS.inc()
        if failed and not ctx.sent:
            REPLIES.labels(ReplyKind.FALLBACK.value).inc()
            FALLBACKS.inc()
        reading = ctx.extras.get("emotion")
        label = getattr(reading, "label", None)
        if isinstance(label, str):
            EMOTIONS.labels(label).inc()
        state = breaker_state(ctx.services.llm)
        if state is not None:
            BREAKER.set(BREAKER_VALUES.get(state, 0))


class TimedGenerate:
    """The ``generate`` stage, timed up to the moment it hands on to the next stage."""

    name = "generate"

    def __init__(self, inner: Stage) -> None:
        self.inner = inner

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        start = time.perf_counter()
        elapsed: float | None = None

        async def then() -> None:
            nonlocal elapsed
            elapsed = time.perf_counter() - start
            await call_next()

        try:
            await self.inner(ctx, then)
        finally:
            LLM_LATENCY.observe(time.perf_counter() - start if elapsed is None else elapsed)


def install_stages(pipeline: Pipeline) -> None:
    """Count what ``pipeline`` does (idempotent)."""
    if "metrics" not in pipeline.names:
        names = pipeline.names
        if names:
            pipeline.add(MetricsStage(), before=names[0])
        else:
            pipeline.add(MetricsStage())
    if "generate" in pipeline.names:
        current = pipeline.get("generate")
        if not isinstance(current, TimedGenerate):
            pipeline.replace("generate", TimedGenerate(current))


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def exposition() -> tuple[bytes, str]:
    """The text format of every metric (summed over the worker processes)."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        registry = CollectorRegistry()
        mp.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
