"""Credentials and bad input: who may read, write and verify what; refusals are JSON
naming the field, and nothing is stored by a refused request."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import aiohttp
import jwt as pyjwt
import pytest

from akira_bot.http.keys import issue_jwt
from akira_bot.http.keystore import digest
from core.memory.structured import EXTRAS_KEY
from tests.akira_bot.http_api.conftest import SECRET, Bot


async def req(
    bot: Bot, method: str, path: str, token: str | None = None, **kwargs: Any
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, bot.url + path, headers=headers, **kwargs) as resp:
            body = await resp.text()
            if resp.content_type == "application/json":
                return resp.status, json.loads(body)
            return resp.status, body


async def _count(bot: Bot, mind: str) -> int:
    return len(await bot.engine.services.extras[EXTRAS_KEY].all(mind))


async def test_no_or_bad_credentials_are_401(http_bot: Bot) -> None:
    for token in (None, "akm_not-a-key", "garbage", issue_jwt("x" * 40, "telegram:42")):
        status, body = await req(http_bot, "GET", "/memory", token)
        assert status == 401 and "error" in body
    expired = pyjwt.encode(
        {"iss": "akira-bot", "sub": "telegram:42", "iat": 1, "exp": 2, "jti": "j"},
        SECRET,
        algorithm="HS256",
    )
    status, body = await req(http_bot, "GET", "/memory", expired)
    assert (status, body["error"]) == (401, "the token has expired")
    unsigned = pyjwt.encode(
        {"iss": "akira-bot", "sub": "telegram:42", "iat": 1, "exp": 2**40, "jti": "j"},
        None,
        algorithm="none",
    )
    assert (await req(http_bot, "GET", "/memory", unsigned))[0] == 401


async def test_one_mind_never_reaches_another(http_bot: Bot) -> None:
    ana = await http_bot.acli("keys", "mind", "telegram:1")
    bia = await http_bot.acli("keys", "mind", "telegram:2")
    bia_jwt = issue_jwt(SECRET, "telegram:2")
    status, memory = await req(
        http_bot, "POST", "/memory", ana, json={"category": "fact", "content": "segredo da Ana"}
    )
    assert status == 201
    path = f"/memory/{memory['id']}"
    for token in (bia, bia_jwt):
        for method, sub in (("GET", ""), ("PUT", ""), ("DELETE", ""), ("POST", "/verify")):
            status, body = await req(http_bot, method, path + sub, token, json={"content": "x"})
            assert (status, body) == (404, {"error": "not found"}), (method, sub)
        assert (await req(http_bot, "GET", "/memory?mind=telegram:1", token))[0] == 404
        _, found = await req(http_bot, "GET", "/memory/search?q=segredo", token)
        assert found["memories"] == []
        _, text = await req(http_bot, "GET", "/memory/recall", token)
        assert "segredo" not in text
    # Unchanged, unverified, still there.
    _, still = await req(http_bot, "GET", path, ana)
    assert (still["content"], still["verified"], still["version"]) == ("segredo da Ana", False, 1)


async def test_an_admin_token_reaches_every_mind_by_name_or_id(http_bot: Bot) -> None:
    ana = await http_bot.acli("keys", "mind", "telegram:1")
    admin = await http_bot.acli("keys", "jwt", "discord:99", "--admin")
    _, memory = await req(
        http_bot, "POST", "/memory", ana, json={"category": "skill", "content": "toca violão"}
    )
    status, body = await req(http_bot, "GET", "/memory", admin)
    assert (status, body["field"]) == (400, "mind")
    _, listed = await req(http_bot, "GET", "/memory?mind=telegram:1", admin)
    assert [m["id"] for m in listed["memories"]] == [memory["id"]]
    status, verified = await req(http_bot, "POST", f"/memory/{memory['id']}/verify", admin)
    assert (status, verified["verified_by"]) == (200, "discord:99")


async def test_revoked_keys_and_tokens_stop_working(http_bot: Bot) -> None:
    key = await http_bot.acli("keys", "mind", "telegram:5")
    token = await http_bot.acli("keys", "jwt", "telegram:5", "--ttl", "2h")
    assert (await req(http_bot, "GET", "/memory", key))[0] == 200
    assert (await req(http_bot, "GET", "/memory", token))[0] == 200
    assert await http_bot.acli("keys", "revoke", key) == "revoked the Mind Key"
    assert await http_bot.acli("keys", "revoke", token) == "revoked the token"
    assert (await req(http_bot, "GET", "/memory", key))[0] == 401
    assert (await req(http_bot, "GET", "/memory", token))[0] == 401
    again = http_bot.cli("keys", "revoke", key)
    assert again.returncode == 1 and "no such Mind Key" in again.stderr
    assert key not in again.stderr


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"category": "hobby", "content": "x"}, "category"),
        ({"category": "fact"}, "content"),
        ({"category": "fact", "content": "   "}, "content"),
        ({"category": "fact", "content": "x" * 2001}, "content"),
        ({"category": "fact", "content": 5}, "content"),
        (
            {"category": "fact", "content": "x", "tags": ["t"] * 0 + [f"t{i}" for i in range(11)]},
            "tags",
        ),
        ({"category": "fact", "content": "x", "tags": "a,b"}, "tags"),
        ({"category": "fact", "content": "x", "priority": "urgent"}, "priority"),
        ({"category": "fact", "content": "x", "confidence": 1.5}, "confidence"),
        ({"category": "fact", "content": "x", "confidence": "0.5"}, "confidence"),
        ({"category": "fact", "content": "x", "expires_at": "tomorrow"}, "expires_at"),
        ({"category": "fact", "content": "x", "expires_at": -5}, "expires_at"),
        ({"category": "fact", "content": "x", "key": "!!!"}, "key"),
        ({"category": "fact", "content": "x", "source": "god"}, "source"),
        ({"category": "fact", "content": "x", "mood": "happy"}, "mood"),
        ([1, 2], "body"),
    ],
)
async def test_bad_bodies_are_400_naming_the_field_and_store_nothing(
    http_bot: Bot, body: Any, field: str
) -> None:
    token = issue_jwt(SECRET, "telegram:9")
    status, answer = await req(http_bot, "POST", "/memory", token, json=body)
    assert status == 400, answer
    assert answer["field"] == field and answer["error"]
    assert await _count(http_bot, "telegram:9") == 0


async def test_bad_json_and_bad_query_values_are_400(http_bot: Bot) -> None:
    token = issue_jwt(SECRET, "telegram:9")
    status, answer = await req(http_bot, "POST", "/memory", token, data=b'{"category": "fact",')
    assert (status, answer["field"]) == (400, "body")
    status, answer = await req(http_bot, "POST", "/memory", token, data=b"\xff\xfe")
    assert (status, answer["field"]) == (400, "body")
    for query, field in [
        ("/memory/expiring?within=soon", "within"),
        ("/memory/expiring?within=-1", "within"),
        ("/memory/expiring?within=nan", "within"),
        ("/memory/expiring?within=inf", "within"),
        ("/memory/expiring?within=1e300", "within"),
        ("/memory/search", "q"),
        ("/memory/search?q=" + "a" * 501, "q"),
        ("/memory/search?q=x&limit=0", "limit"),
        ("/memory/by-tag", "tag"),
        ("/memory/by-tag?tag=" + "t" * 40, "tag"),
        ("/memory?category=hobby", "category"),
        ("/memory?offset=-1", "offset"),
    ]:
        status, answer = await req(http_bot, "GET", query, token)
        assert (status, answer.get("field")) == (400, field), query
    big = {"category": "fact", "content": "x" * 300_000}
    status, answer = await req(http_bot, "POST", "/memory", token, json=big)
    assert status == 413 and answer["field"] == "body"
    assert await _count(http_bot, "telegram:9") == 0


async def test_a_person_updates_and_clears_expiry_with_their_jwt(http_bot: Bot) -> None:
    token = issue_jwt(SECRET, "telegram:9", ttl=timedelta(minutes=5))
    _, memory = await req(
        http_bot,
        "POST",
        "/memory",
        token,
        json={"category": "project", "content": "TCC", "expires_at": "2999-01-01T00:00:00"},
    )
    assert memory["verified"] is True and memory["source"] == "user"
    status, updated = await req(
        http_bot, "PUT", f"/memory/{memory['id']}", token, json={"expires_at": None}
    )
    assert (status, updated["expires_at"], updated["version"]) == (200, None, 2)
    status, answer = await req(
        http_bot, "PUT", f"/memory/{memory['id']}", token, json={"content": ""}
    )
    assert (status, answer["field"]) == (400, "content")


async def test_keys_cli_refuses_bad_input_in_one_line(http_bot: Bot) -> None:
    bad_user = http_bot.cli("keys", "mind", "nobody")
    assert bad_user.returncode == 2
    no_secret = http_bot.cli("keys", "jwt", "telegram:1", AKIRA_HTTP__JWT_SECRET="")
    assert no_secret.returncode == 1
    assert no_secret.stderr.strip().splitlines() == [
        "akira-bot: set AKIRA_HTTP__JWT_SECRET first (the server checks tokens with it)"
    ]
    bad_ttl = http_bot.cli("keys", "jwt", "telegram:1", "--ttl", "forever")
    assert bad_ttl.returncode == 2 and "not a duration" in bad_ttl.stderr
    not_a_key = http_bot.cli("keys", "revoke", "hello")
    assert not_a_key.returncode == 1 and "Traceback" not in not_a_key.stderr


async def test_forgetting_a_person_deletes_their_keys_and_the_export_lists_them(
    http_bot: Bot,
) -> None:
    key = await http_bot.acli("keys", "mind", "telegram:6")
    assert (await req(http_bot, "POST", "/memory", key, json={"category": "fact", "content": "x"}))[
        0
    ] == 201
    exported = json.loads(http_bot.cli("memory", "export", "telegram:6").stdout)
    assert [k["kind"] for k in exported["api_keys"]] == ["mind_key"]
    assert key not in json.dumps(exported) and digest(key) not in json.dumps(exported)
    forgot = http_bot.cli("memory", "forget", "telegram:6")
    assert forgot.returncode == 0, forgot.stderr
    assert (await req(http_bot, "GET", "/memory", key))[0] == 401
    assert await _count(http_bot, "telegram:6") == 0
