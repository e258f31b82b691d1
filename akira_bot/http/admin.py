"""The admin web view: a page per person with their memory graph, emotional timeline,
structured memories (verify / delete) and profile.

Rendered on the server (plain HTML, every value escaped); the graph and the plot are
drawn in the browser by two small libraries shipped in the package (static/vendor:
Cytoscape.js and uPlot, MIT), so nothing is fetched from elsewhere at run time.

Access: an admin JWT, as ``Authorization: Bearer`` or in the session cookie that a
one-time link from ``akira-bot admin-link USER`` sets (HttpOnly, SameSite=Strict,
8 hours). The verify and delete buttons are forms carrying a token derived from the
session, so another site cannot submit them in the admin's name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from akira_bot.http.auth import SESSION_COOKIE, Principal
from akira_bot.http.keys import issue_jwt
from akira_bot.http.keystore import digest
from akira_bot.http.state import STATE, HttpState
from core.storage.records import MemoryNode
from core.types import parse_user_key, utcnow

STATIC_DIR = Path(__file__).parent / "static"
SESSION_TTL = timedelta(hours=8)
GRAPH_NODES = 300  # the person's latest nodes drawn; older ones stay in the export
PEOPLE_LIMIT = 500

routes = web.RouteTableDef()


def setup(app: web.Application) -> None:
    app.add_routes(routes)
    app.router.add_static("/admin/static", STATIC_DIR, name="admin_static")


# --- access ---------------------------------------------------------------------------------


def _session_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(SESSION_COOKIE, "")


def _csrf(state: HttpState, request: web.Request) -> str:
    secret = state.auth.jwt_secret or ""
    token = _session_token(request)
    return hmac.new(secret.encode(), f"csrf:{token}".encode(), hashlib.sha256).hexdigest()[:40]


async def _admin(request: web.Request) -> tuple[HttpState, Principal]:
    state = request.app[STATE]
    principal = await state.auth.admin_session(request)
    if principal is None:
        raise web.HTTPUnauthorized(
            text=_page(
                "Sign in",
                "<p>This view needs an admin. On the bot's host run "
                "<code>akira-bot admin-link telegram:YOUR_ID</code> and open the link "
                "it prints (or send an admin JWT as <code>Authorization: Bearer</code>).</p>",
            ),
            content_type="text/html",
        )
    return state, principal


def _person(request: web.Request) -> str:
    user = request.match_info["user"]
    try:
        parse_user_key(user)
    except ValueError:
        raise web.HTTPNotFound(
            text=_page("Not found", "<p>No such person.</p>"), content_type="text/html"
        ) from None
    return user


@routes.get("/admin/login")
async def login(request: web.Request) -> web.Response:
    state = request.app[STATE]
    token = request.query.get("token", "")
    secret = state.auth.jwt_secret
    admin = await state.keys.use_login(digest(token), at=utcnow()) if token and secret else None
    if admin is None or not secret:
        return web.Response(
            status=403,
            text=_page(
                "Link not valid",
                "<p>This login link was used already, has expired or "
                "is not one. Ask the host for a new one (<code>akira-bot admin-link</code>).</p>",
            ),
            content_type="text/html",
        )
    session = issue_jwt(secret, admin, admin=True, ttl=SESSION_TTL)
    response = web.Response(status=303, headers={"Location": "/admin"})
    response.set_cookie(
        SESSION_COOKIE,
        session,
        max_age=int(SESSION_TTL.total_seconds()),
        httponly=True,
        samesite="Strict",
        path="/",
        secure=request.secure,
    )
    return response


# --- pages -----------------------------------------------------------------------------------


def _page(title: str, body: str, *, scripts: str = "") -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{escape(title)} · AKIRA admin</title>
<link rel="stylesheet" href="/admin/static/vendor/uPlot.min.css">
<link rel="stylesheet" href="/admin/static/admin.css">
</head><body>
<header><a href="/admin">AKIRA admin</a></header>
<main>
<h1>{escape(title)}</h1>
{body}
</main>
{scripts}
</body></html>"""


async def _people(state: HttpState) -> list[dict[str, Any]]:
    storage = state.storage
    rows = await storage.users.recently_seen(PEOPLE_LIMIT)
    people: list[dict[str, Any]] = [{"key": r[0], "name": r[1], "seen": r[2]} for r in rows]
    known = {p["key"] for p in people}
    # Minds that only the API wrote to have memories and no profile yet.
    for owner in await storage.memories.owners(PEOPLE_LIMIT):
        if owner not in known:
            people.append({"key": owner, "name": None, "seen": None})
    return people


@routes.get("/admin")
async def index(request: web.Request) -> web.Response:
    state, principal = await _admin(request)
    items = "".join(
        f'<li><a href="/admin/person/{quote(p["key"], safe=":")}">{escape(p["key"])}</a>'
        f"{' · ' + escape(p['name']) if p['name'] else ''}</li>"
        for p in await _people(state)
    )
    body = (
        f"<p>Signed in as {escape(principal.user)}.</p>"
        f'<ul class="people">{items or "<li>nobody yet</li>"}</ul>'
    )
    return web.Response(text=_page("People", body), content_type="text/html")


def graph_data(nodes: list[MemoryNode], edges: list[Any]) -> dict[str, Any]:
    ids = {n.id for n in nodes}
    return {
        "nodes": [
            {
                "id": n.id,
                "type": n.type.value,
                "emotion": n.emotion or "none",
                "label": n.content[:60],
                "time": n.timestamp.isoformat(),
            }
            for n in nodes
        ],
        "edges": [
            {
                "source": e.from_id,
                "target": e.to_id,
                "type": e.relation_type,
                "strength": round(float(e.strength), 3),
            }
            for e in edges
            if e.from_id in ids and e.to_id in ids
        ],
    }


def timeline_data(profile: dict[str, Any], nodes: list[MemoryNode]) -> list[dict[str, Any]]:
    """Emotion readings over time: the profile's history (core.emotion.state, kept under
    the profile's ``emotion`` key), else the nodes' own readings."""
    history = _emotion(profile).get("emotion_history") or []
    points = [
        {"time": h["timestamp"], "emotion": h["emotion"], "confidence": h["confidence"]}
        for h in history
        if isinstance(h, dict) and {"timestamp", "emotion", "confidence"} <= h.keys()
    ]
    if not points:
        points = [
            {
                "time": n.timestamp.isoformat(),
                "emotion": n.emotion,
                "confidence": n.emotion_score or 0.0,
            }
            for n in nodes
            if n.emotion
        ]
    return points


def _emotion(profile: dict[str, Any]) -> dict[str, Any]:
    state = profile.get("emotion")
    return state if isinstance(state, dict) else {}


def _script_json(data: Any) -> str:
    # Inside <script>: no "</script>" or "<!--" can be formed from people's text.
    return json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")


def _memory_rows(user: str, memories: list[Any], csrf: str) -> str:
    rows = []
    base = f"/admin/person/{quote(user, safe=':')}/memory"
    for m in memories:
        verify = (
            "verified"
            if m.verified
            else f'<form method="post" action="{base}/{escape(m.id)}/verify">'
            f'<input type="hidden" name="csrf" value="{csrf}">'
            f'<button class="verify" data-id="{escape(m.id)}">Verify</button></form>'
        )
        delete = (
            f'<form method="post" action="{base}/{escape(m.id)}/delete">'
            f'<input type="hidden" name="csrf" value="{csrf}">'
            f'<button class="delete" data-id="{escape(m.id)}">Delete</button></form>'
        )
        rows.append(
            f'<tr id="{escape(m.id)}" class="{"verified" if m.verified else "unverified"}">'
            f"<td>{escape(m.category.value)}</td><td><code>{escape(m.key)}</code></td>"
            f"<td>{escape(m.content)}</td><td>{escape(', '.join(m.tags))}</td>"
            f"<td>{escape(m.priority.value)}</td><td>{escape(m.source.value)}</td>"
            f"<td>{m.confidence:.2f}</td>"
            f"<td>{escape(m.expires_at.isoformat()[:16]) if m.expires_at else ''}</td>"
            f'<td class="status">{verify}</td><td>{delete}</td></tr>'
        )
    head = (
        "<tr><th>category</th><th>key</th><th>content</th><th>tags</th><th>priority</th>"
        "<th>source</th><th>confidence</th><th>expires</th><th>verified</th><th></th></tr>"
    )
    return f'<table class="memories">{head}{"".join(rows)}</table>' if rows else "<p>none</p>"


def _profile_html(record: Any) -> str:
    if record is None:
        return "<p>No profile yet (this mind was only written through the API).</p>"
    profile = dict(record.profile)
    emotion = _emotion(profile)
    facts: dict[str, Any] = {
        "name": record.display_name,
        "language": record.language,
        "first seen": record.created_at.isoformat()[:16] if record.created_at else None,
        "last seen": record.last_seen_at.isoformat()[:16] if record.last_seen_at else None,
        **{k: v for k, v in profile.items() if not isinstance(v, dict | list)},
        "emotional state": emotion.get("emotional_state"),
        "hostile": emotion.get("is_hostile"),
        "aggressive readings": emotion.get("aggressive_count"),
        "emotion readings": len(emotion.get("emotion_history") or []),
    }
    items = "".join(
        f"<dt>{escape(str(k))}</dt><dd>{escape(str(v))}</dd>"
        for k, v in facts.items()
        if v is not None
    )
    raw = escape(json.dumps(record.profile, ensure_ascii=False, indent=2, default=str))
    return (
        f'<dl class="profile">{items}</dl><details><summary>raw</summary><pre>{raw}</pre></details>'
    )


@routes.get("/admin/person/{user}")
async def person(request: web.Request) -> web.Response:
    state, _ = await _admin(request)
    user = _person(request)
    storage = state.storage
    record = await storage.users.get(user)
    nodes = await storage.nodes.recent(user, limit=GRAPH_NODES)
    edges = await storage.graph.edges(user, [n.id for n in nodes])
    memories = await state.memories.all(user)
    if record is None and not nodes and not memories:
        raise web.HTTPNotFound(
            text=_page("Not found", "<p>Nothing is stored about this person.</p>"),
            content_type="text/html",
        )
    graph = graph_data(nodes, edges)
    timeline = timeline_data(record.profile if record else {}, nodes)
    body = f"""
<section><h2>Memory graph</h2>
<p class="hint">{len(graph["nodes"])} nodes (latest {GRAPH_NODES}), {len(graph["edges"])} connections.
Scroll to zoom, drag to pan. Shape: ● message, ◆ AKIRA's reply, ■ observation; colour: emotion;
edge colour: relation, width: strength.</p>
<div id="graph" data-nodes="{len(graph["nodes"])}"></div>
<div id="graph-legend"></div></section>
<section><h2>Emotional timeline</h2><div id="timeline" data-points="{len(timeline)}"></div></section>
<section><h2>Structured memories</h2>{_memory_rows(user, memories, _csrf(state, request))}</section>
<section><h2>Profile</h2>{_profile_html(record)}</section>
<script type="application/json" id="graph-data">{_script_json(graph)}</script>
<script type="application/json" id="timeline-data">{_script_json(timeline)}</script>"""
    scripts = (
        '<script src="/admin/static/vendor/cytoscape.min.js"></script>'
        '<script src="/admin/static/vendor/uPlot.iife.min.js"></script>'
        '<script src="/admin/static/admin.js"></script>'
    )
    return web.Response(text=_page(user, body, scripts=scripts), content_type="text/html")


async def _form_action(request: web.Request) -> tuple[HttpState, Principal, str, str]:
    state, principal = await _admin(request)
    user = _person(request)
    form = await request.post()
    if not hmac.compare_digest(str(form.get("csrf", "")), _csrf(state, request)):
        raise web.HTTPForbidden(
            text=_page("Refused", "<p>The form is stale: reload the page.</p>"),
            content_type="text/html",
        )
    return state, principal, user, request.match_info["memory_id"]


def _back(user: str) -> web.HTTPSeeOther:
    return web.HTTPSeeOther(f"/admin/person/{quote(user, safe=':')}")


@routes.post("/admin/person/{user}/memory/{memory_id}/verify")
async def verify(request: web.Request) -> web.Response:
    from akira_bot.http import metrics

    state, principal, user, memory_id = await _form_action(request)
    memory = await state.memories.get(user, memory_id)
    if memory is not None and not memory.verified:
        await state.memories.verify(user, memory_id, verified_by=principal.user, at=utcnow())
        metrics.memory_verified("admin")
    raise _back(user)


@routes.post("/admin/person/{user}/memory/{memory_id}/delete")
async def delete(request: web.Request) -> web.Response:
    state, _, user, memory_id = await _form_action(request)
    await state.memories.delete(user, memory_id)
    raise _back(user)
