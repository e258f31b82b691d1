"""The memory API, compatible with Synapse's own client (``synapse-memory-sdk``).

A mind is one person's structured memories (``platform:id``). Every route reads and
writes the caller's mind only (an admin JWT names it with ``?mind=``, or reaches a memory
by its id); a memory of another mind is answered 404, exactly as a missing one.

Who may do what:

* Mind Key (an agent): store (always source ``agent``, unverified, confidence 0.7 unless
  given), update and delete the agent's own unverified memories, read everything in its
  mind. A person's memory is never changed by an agent key (409), and never verified (403).
* Human JWT (the person, or an admin): everything, including ``POST /memory/{id}/verify``.
  A person's writes are theirs: source ``user`` unless given, verified by them.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from aiohttp import web

from akira_bot.http import metrics
from akira_bot.http.auth import Forbidden, NotFound, Principal, mind_for_listing
from akira_bot.http.schemas import (
    MAX_LIMIT,
    MAX_WITHIN_S,
    FieldError,
    StoreMemory,
    UpdateMemory,
    memories_json,
    memory_json,
    parse_body,
    parse_expiry,
    query_int,
)
from akira_bot.http.state import STATE, HttpState
from core.memory.structured import render_recall
from core.storage.sqlite_memories import (
    MAX_QUERY_CHARS,
    MemoryValidationError,
    Source,
    StoreOutcome,
    StructuredMemory,
    normalise_tags,
    parse_category,
)
from core.types import utcnow

routes = web.RouteTableDef()

DEFAULT_EXPIRING_S = 7 * 86400


async def _caller(request: web.Request) -> tuple[HttpState, Principal]:
    state = request.app[STATE]
    return state, await state.auth.principal(request)


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise FieldError("body", "the body is not valid JSON") from None


async def _memory(state: HttpState, principal: Principal, memory_id: str) -> StructuredMemory:
    """The memory ``memory_id`` if the caller's mind holds it (an admin: any mind)."""
    owner: str | None = principal.user
    if principal.admin:
        owner = await state.memories.store.owner_of(memory_id)
    found = await state.memories.get(owner, memory_id) if owner else None
    if found is None:
        raise NotFound()
    return found


def _agent_may_change(memory: StructuredMemory) -> bool:
    return memory.source is Source.AGENT and not memory.verified


def _kept(memory: StructuredMemory) -> web.Response:
    return web.json_response(
        {
            "error": "a person stated or verified this memory: an agent key does not change it",
            "field": "key",
            "memory": memory_json(memory),
        },
        status=409,
    )


@routes.post("/memory")
async def store(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    body = parse_body(StoreMemory, await _json_body(request))
    if principal.human:
        source = Source(body.source or Source.USER)
    else:
        source = Source.AGENT  # whatever the agent claims: only people verify
    memory, outcome = await state.memories.store_memory(
        mind,
        body.category,
        body.memory_key(),
        body.content,
        tags=body.tags,
        priority=body.priority,
        source=source,
        confidence=body.confidence,
        expires_at=parse_expiry(body.expires_at),
        at=utcnow(),
    )
    if outcome is StoreOutcome.KEPT:
        return _kept(memory)
    metrics.memory_stored(source.value, outcome.value)
    status = 201 if outcome is StoreOutcome.CREATED else 200
    return web.json_response({**memory_json(memory), "status": outcome.value}, status=status)


@routes.get("/memory")
async def list_memories(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    limit = query_int(request.query, "limit", 100, low=1, high=MAX_LIMIT)
    offset = query_int(request.query, "offset", 0, low=0, high=1_000_000)
    category = request.query.get("category")
    tag = request.query.get("tag")
    if category is None and tag is None:
        found = await state.memories.all(mind, limit=limit, offset=offset)
        return web.json_response(memories_json(found))
    wanted_category = _category(category) if category is not None else None
    everything = (
        await state.memories.by_tag(mind, _tag(tag))
        if tag is not None
        else await state.memories.all(mind)
    )
    kept = [m for m in everything if wanted_category in (None, m.category.value)]
    return web.json_response(memories_json(kept[offset : offset + limit]))


def _category(value: str) -> str:
    try:
        return parse_category(value).value
    except MemoryValidationError as exc:
        raise FieldError("category", str(exc)) from None


def _tag(value: str | None) -> str:
    if value is None or not value.strip():
        raise FieldError("tag", "give a tag: ?tag=...")
    try:
        tags = normalise_tags([value])
    except MemoryValidationError as exc:
        raise FieldError("tag", str(exc)) from None
    if not tags:
        raise FieldError("tag", "a tag needs letters or digits")
    return tags[0]


@routes.get("/memory/recall")
async def recall(request: web.Request) -> web.Response:
    """The recall text the prompt gets: every unexpired memory, by priority then recency."""
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    active = await state.memories.active(mind, at=utcnow())
    return web.Response(text=render_recall(active), content_type="text/plain", charset="utf-8")


@routes.get("/memory/search")
async def search(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    query = request.query.get("q", "")
    if len(query) > MAX_QUERY_CHARS:
        raise FieldError("q", f"q has at most {MAX_QUERY_CHARS} characters")
    tags = [_tag(t) for t in request.query.getall("tag", [])]
    if not query.strip() and not tags:
        raise FieldError("q", "give something to search for: ?q=...")
    limit = query_int(request.query, "limit", 20, low=1, high=MAX_LIMIT)
    found = await state.memories.search(mind, query, tags=tags, at=utcnow(), limit=limit)
    return web.json_response({**memories_json(found), "query": query})


@routes.get("/memory/by-tag")
async def by_tag(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    tag = _tag(request.query.get("tag"))
    found = await state.memories.by_tag(mind, tag, at=utcnow())
    return web.json_response({**memories_json(found), "tag": tag})


@routes.get("/memory/expiring")
async def expiring(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    within = _within(request.query.get("within"))
    found = await state.memories.expiring(mind, within_days=within / 86400, at=utcnow())
    return web.json_response({**memories_json(found), "within": within})


def _within(raw: str | None) -> float:
    if raw is None:
        return DEFAULT_EXPIRING_S
    try:
        value = float(raw)
    except ValueError:
        raise FieldError("within", "within is a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_WITHIN_S:
        raise FieldError("within", f"within is between 1 and {MAX_WITHIN_S} seconds")
    return value


@routes.get("/memory/unverified")
async def unverified(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    limit = query_int(request.query, "limit", 100, low=1, high=MAX_LIMIT)
    found = [m for m in await state.memories.all(mind) if not m.verified][:limit]
    return web.json_response(memories_json(found))


@routes.get("/memory/stats")
async def stats(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    mind = mind_for_listing(principal, request)
    now = utcnow()
    counts = await state.memories.counts(mind, at=now)
    everything = await state.memories.all(mind)
    return web.json_response(
        {
            "mind": mind,
            "total": counts.total,
            "verified": counts.verified,
            "unverified": counts.unverified,
            "expired": counts.expired,
            "by_category": dict(Counter(m.category.value for m in everything)),
            "by_source": dict(Counter(m.source.value for m in everything)),
            "by_priority": dict(Counter(m.priority.value for m in everything)),
        }
    )


@routes.get("/memory/{memory_id}")
async def get_memory(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    memory = await _memory(state, principal, request.match_info["memory_id"])
    return web.json_response(memory_json(memory))


@routes.put("/memory/{memory_id}")
async def update(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    memory = await _memory(state, principal, request.match_info["memory_id"])
    body = parse_body(UpdateMemory, await _json_body(request))
    if not principal.human and not _agent_may_change(memory):
        return _kept(memory)
    clear_expiry = "expires_at" in body.model_fields_set and body.expires_at is None
    updated = await state.memories.store.update(
        memory.owner,
        memory.id,
        content=body.content,
        tags=body.tags,
        priority=body.priority,
        expires_at=parse_expiry(body.expires_at),
        clear_expiry=clear_expiry,
        source=Source.USER if principal.human else Source.AGENT,
        at=utcnow(),
    )
    if updated is None:  # deleted meanwhile
        raise NotFound()
    return web.json_response(memory_json(updated))


@routes.delete("/memory/{memory_id}")
async def delete(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    memory = await _memory(state, principal, request.match_info["memory_id"])
    if not principal.human and not _agent_may_change(memory):
        raise Forbidden("an agent key deletes only the agent's own unverified memories")
    if not await state.memories.delete(memory.owner, memory.id):
        raise NotFound()
    return web.json_response({"deleted": True, "id": memory.id})


@routes.post("/memory/{memory_id}/verify")
async def verify(request: web.Request) -> web.Response:
    state, principal = await _caller(request)
    memory = await _memory(state, principal, request.match_info["memory_id"])
    if not principal.human:
        raise Forbidden("only a person verifies: use a human JWT, not a Mind Key")
    was_verified = memory.verified
    verified = await state.memories.verify(
        memory.owner, memory.id, verified_by=principal.user, at=utcnow()
    )
    if verified is None:
        raise NotFound()
    if not was_verified:
        metrics.memory_verified("admin" if principal.admin else "user")
    return web.json_response(memory_json(verified))
