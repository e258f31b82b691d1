"""Operations: ``/health`` (is the bot able to serve?) and ``/metrics`` (Prometheus).

Neither needs a credential and neither shows anything about a person: counts, states
and adapter names only. Put them behind the network's own access rules if even that is
too much (the server listens on 127.0.0.1 unless told otherwise).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from adapters.base import Adapter
from akira_bot.http import metrics
from akira_bot.http.state import STATE, HttpState

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

STORAGE_TIMEOUT_S = 2.0


def adapter_connected(adapter: Adapter) -> bool:
    """Whether a platform adapter is connected (its own :attr:`Adapter.connected`)."""
    return adapter.connected


def _llm_of(handler: Any) -> Any:
    services = getattr(handler, "services", None)
    return getattr(services, "llm", None)


def queue_depth(handler: Any) -> int | None:
    """Messages accepted by the engine (or the sharded engine) and not answered yet."""
    count = getattr(handler, "in_flight", None)
    return count if isinstance(count, int) else None


async def _storage_ok(state: HttpState) -> bool:
    try:
        await asyncio.wait_for(state.storage.ping(), STORAGE_TIMEOUT_S)
    except Exception as exc:
        log.warning("health: storage unreachable: %s", type(exc).__name__)
        return False
    return True


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    state = request.app[STATE]
    storage = await _storage_ok(state)
    breaker = metrics.breaker_state(_llm_of(state.handler))
    if breaker is None and metrics.multiprocess():
        breaker = "in workers"  # each worker has its own; /metrics has the worst of them
    adapters = {a.name: adapter_connected(a) for a in state.adapters}
    ok = storage and breaker != "open" and all(adapters.values())
    body = {
        "status": "ok" if ok else "degraded",
        "storage": "ok" if storage else "unreachable",
        "llm_breaker": breaker or "none",
        "adapters": {name: "connected" if up else "disconnected" for name, up in adapters.items()},
    }
    return web.json_response(body, status=200 if storage else 503)


@routes.get("/metrics")
async def metrics_endpoint(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        counts = await state.memories.counts()
        metrics.MEMORIES.labels("verified").set(counts.verified)
        metrics.MEMORIES.labels("unverified").set(counts.unverified)
    except Exception as exc:  # the scrape still answers: the counters do not need storage
        log.warning("metrics: memory counts unavailable: %s", type(exc).__name__)
    depth = queue_depth(state.handler)
    if depth is not None:
        metrics.QUEUE_DEPTH.set(depth)
    breaker = metrics.breaker_state(_llm_of(state.handler))
    if breaker is not None:
        metrics.BREAKER.set(metrics.BREAKER_VALUES.get(breaker, 0))
    body, content_type = metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})
