"""The OpenAPI 3.1 document of the HTTP side (``/openapi.json``).

Request bodies come from the pydantic models that validate them (akira_bot.http.schemas),
so the document cannot drift from what the server accepts; the routes are listed here.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from akira_bot.http.schemas import (
    CATEGORIES,
    MAX_LIMIT,
    MAX_WITHIN_S,
    PRIORITIES,
    StoreMemory,
    UpdateMemory,
)

routes = web.RouteTableDef()

_REF = "#/components/schemas/{model}"

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "mind", "category", "key", "content", "verified", "source"],
    "properties": {
        "id": {"type": "string"},
        "mind": {"type": "string", "description": "platform:id of the person"},
        "category": {"type": "string", "enum": CATEGORIES},
        "key": {"type": "string"},
        "content": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "priority": {"type": "string", "enum": PRIORITIES},
        "source": {"type": "string", "enum": ["user", "agent", "tool", "system"]},
        "verified": {"type": "boolean"},
        "verified_by": {"type": ["string", "null"]},
        "verified_at": {"type": ["string", "null"], "format": "date-time"},
        "confidence": {"type": "number"},
        "expires_at": {"type": ["string", "null"], "format": "date-time"},
        "scope": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
        "version": {"type": "integer"},
        "status": {"type": "string", "enum": ["created", "updated", "unchanged"]},
    },
}


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=schema)}}}


def _response(description: str, schema: str = "Error") -> dict[str, Any]:
    return {"description": description, "content": _json(schema)}


def _query(name: str, description: str, schema: dict[str, Any], *, required: bool = False):
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


MIND = _query(
    "mind", "admin tokens: the mind (platform:id); others: their own only", {"type": "string"}
)
LIMIT = _query(
    "limit", "at most this many", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
)
MEMORY_ID = {"name": "memory_id", "in": "path", "required": True, "schema": {"type": "string"}}

_ERRORS = {
    "400": _response("a bad value; `field` names it"),
    "401": _response("no valid Mind Key or JWT"),
    "404": _response("no such memory in the caller's mind"),
}


def _op(summary: str, ok: dict[str, Any], *, params=(), body: str | None = None, extra=None):
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": list(params),
        "responses": {**ok, **_ERRORS, **(extra or {})},
        "security": [{"bearer": []}],
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(body)}
    return op


def document() -> dict[str, Any]:
    listing = {"200": _response("memories", "MemoryList")}
    one = {"200": _response("the memory", "Memory")}
    forbidden = {"403": _response("not allowed with this credential")}
    conflict = {"409": _response("a person's memory; an agent key does not change it")}
    schemas: dict[str, Any] = {
        "Memory": MEMORY_SCHEMA,
        "MemoryList": {
            "type": "object",
            "required": ["memories", "count"],
            "properties": {
                "memories": {"type": "array", "items": {"$ref": _REF.format(model="Memory")}},
                "count": {"type": "integer"},
            },
        },
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
        },
        "StoreMemory": StoreMemory.model_json_schema(ref_template=_REF),
        "UpdateMemory": UpdateMemory.model_json_schema(ref_template=_REF),
    }
    tag = _query("tag", "a tag", {"type": "string"}, required=True)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "AKIRA memory API",
            "version": "1",
            "description": "Synapse-compatible structured memories, one mind per person. "
            "Authorization: Bearer <Mind Key> (an agent) or <JWT> (a person; admin "
            "tokens reach every mind).",
        },
        "paths": {
            "/memory": {
                "get": _op(
                    "list memories",
                    listing,
                    params=[
                        MIND,
                        _query("category", "only this category", {"type": "string"}),
                        _query("tag", "only with this tag", {"type": "string"}),
                        LIMIT,
                        _query("offset", "skip this many", {"type": "integer", "minimum": 0}),
                    ],
                ),
                "post": _op(
                    "store a memory, or update the one with the same category and key",
                    {"200": _response("updated", "Memory"), "201": _response("created", "Memory")},
                    params=[MIND],
                    body="StoreMemory",
                    extra=conflict,
                ),
            },
            "/memory/recall": {
                "get": _op(
                    "every unexpired memory as the recall text the prompt gets",
                    {
                        "200": {
                            "description": "recall text",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                    params=[MIND],
                )
            },
            "/memory/search": {
                "get": _op(
                    "full-text search (accents folded) over key, content and tags",
                    listing,
                    params=[
                        _query("q", "words to find", {"type": "string", "maxLength": 500}),
                        _query("tag", "required tag(s)", {"type": "string"}),
                        LIMIT,
                        MIND,
                    ],
                )
            },
            "/memory/by-tag": {"get": _op("memories with a tag", listing, params=[tag, MIND])},
            "/memory/expiring": {
                "get": _op(
                    "memories expiring within a time",
                    listing,
                    params=[
                        _query(
                            "within",
                            "seconds (default 7 days)",
                            {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WITHIN_S},
                        ),
                        MIND,
                    ],
                )
            },
            "/memory/unverified": {
                "get": _op("memories no person verified yet", listing, params=[LIMIT, MIND])
            },
            "/memory/stats": {
                "get": _op(
                    "counts: total, verified, unverified, expired, by category/source/priority",
                    {"200": {"description": "statistics"}},
                    params=[MIND],
                )
            },
            "/memory/{memory_id}": {
                "get": _op("one memory", one, params=[MEMORY_ID]),
                "put": _op(
                    "change a memory (the earlier version is kept)",
                    one,
                    params=[MEMORY_ID],
                    body="UpdateMemory",
                    extra=conflict,
                ),
                "delete": _op(
                    "delete a memory and its history",
                    {"200": {"description": "deleted"}},
                    params=[MEMORY_ID],
                    extra=forbidden,
                ),
            },
            "/memory/{memory_id}/verify": {
                "post": _op(
                    "a person verifies a memory (human JWT only)",
                    one,
                    params=[MEMORY_ID],
                    extra=forbidden,
                )
            },
            "/health": {
                "get": {
                    "summary": "storage, LLM breaker and adapters",
                    "responses": {
                        "200": {"description": "ok or degraded"},
                        "503": {"description": "storage unreachable"},
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {"200": {"description": "text exposition format"}},
                }
            },
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a Mind Key (akm_...) or a JWT from `akira-bot keys`",
                }
            },
        },
    }


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(document())
