"""Property tests over the memory API (hypothesis): whatever method, path, query, body and
credential a client sends, the server never answers 5xx, every refusal is JSON, and one
mind's credential never reads or changes another mind's memory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akira_bot.http.keys import issue_jwt
from akira_bot.http.openapi import document
from tests.akira_bot.http_api.conftest import SECRET, Bot

ANA, BIA = "telegram:1", "telegram:2"
SECRET_WORD = "ANASECRETWORD"

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["fact", "identity", "note", "high", "user", "agent", "", " ", "2030-01-01"]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = ["category", "content", "key", "tags", "priority", "source", "confidence", "expires_at"]
bodies = st.one_of(
    st.dictionaries(st.sampled_from([*FIELDS, "mind", "owner", "id"]), json_value, max_size=8),
    json_value,
    st.binary(max_size=64),
)
query_values = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.sampled_from(["nan", "inf", "-1", "0", "1e400", "3600", ANA, BIA, "telegram:1 "]),
)


def _paths() -> list[str]:
    return list(document()["paths"])


async def _seed(bot: Bot) -> dict[str, Any]:
    ana_key = await bot.acli("keys", "mind", ANA)
    bia_key = await bot.acli("keys", "mind", BIA)
    ana_jwt = issue_jwt(SECRET, ANA)
    headers = {"Authorization": f"Bearer {ana_jwt}"}

    def store() -> list[dict[str, Any]]:
        out = []
        for body in (
            {"category": "fact", "content": f"{SECRET_WORD} one", "tags": ["x"], "key": "a"},
            {"category": "note", "content": f"{SECRET_WORD} two", "expires_at": 4102444800},
        ):
            resp = requests.post(bot.url + "/memory", json=body, headers=headers, timeout=20)
            assert resp.status_code == 201, resp.text
            out.append(resp.json())
        return out

    ana_memories = await asyncio.to_thread(store)
    return {
        "ana_ids": [m["id"] for m in ana_memories],
        "ana_memories": ana_memories,
        "credentials": {
            "ana_key": ana_key,
            "ana_jwt": ana_jwt,
            "bia_key": bia_key,
            "bia_jwt": issue_jwt(SECRET, BIA),
            "none": "",
            "junk": "akm_junk",
        },
    }


async def test_no_5xx_no_cross_mind_whatever_is_sent(http_bot: Bot) -> None:
    seed = await _seed(http_bot)
    ana_ids: list[str] = seed["ana_ids"]
    creds: dict[str, str] = seed["credentials"]
    paths = _paths()

    @settings(
        max_examples=250,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(
        method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
        template=st.sampled_from(paths),
        memory_id=st.one_of(st.sampled_from(ana_ids), st.text(max_size=20)),
        query=st.dictionaries(
            st.sampled_from(["q", "tag", "limit", "offset", "within", "mind", "category"]),
            query_values,
            max_size=3,
        ),
        body=st.one_of(st.none(), bodies),
        who=st.sampled_from(sorted(creds)),
    )
    def check(
        method: str,
        template: str,
        memory_id: str,
        query: dict[str, str],
        body: Any,
        who: str,
    ) -> None:
        path = template.replace("{memory_id}", requests.utils.quote(memory_id, safe="") or "x")
        headers = {"Authorization": f"Bearer {creds[who]}"} if creds[who] else {}
        kwargs: dict[str, Any] = {"params": query, "headers": headers, "timeout": 20}
        if isinstance(body, bytes):
            kwargs["data"] = body
        elif body is not None:
            try:
                kwargs["data"] = json.dumps(body, allow_nan=True)
            except ValueError:
                kwargs["data"] = "{"
            headers["Content-Type"] = "application/json"
        resp = requests.request(method, http_bot.url + path, **kwargs)
        assert resp.status_code < 500, (method, path, query, body, resp.text)
        if resp.status_code >= 400 and path not in ("/metrics",):
            assert resp.headers["Content-Type"].startswith("application/json"), resp.text
            assert "error" in resp.json()
        if who.startswith("bia") or who in ("none", "junk"):
            assert SECRET_WORD not in resp.text, (method, path, query, resp.text)
            for ana_id in ana_ids:
                assert ana_id not in resp.text

    await asyncio.to_thread(check)

    # Nothing Bia (or nobody) sent changed Ana's memories; Ana's own requests may have.
    def ana_view() -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {creds['ana_jwt']}"}
        resp = requests.get(http_bot.url + "/memory", headers=headers, timeout=20)
        return resp.json()["memories"]

    memories = await asyncio.to_thread(ana_view)
    assert all(m["mind"] == ANA for m in memories)


async def test_a_mind_key_never_verifies_whatever_it_sends(http_bot: Bot) -> None:
    seed = await _seed(http_bot)
    key = seed["credentials"]["ana_key"]

    def agent_writes() -> None:
        @settings(
            max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        @given(
            body=st.fixed_dictionaries(
                {
                    "category": st.sampled_from(["fact", "note", "skill"]),
                    "content": st.text(min_size=1, max_size=50),
                },
                optional={
                    "source": st.sampled_from(["user", "system", "tool", "agent"]),
                    "confidence": st.floats(min_value=0, max_value=1),
                    "key": st.sampled_from(["a", "b", "c"]),
                },
            )
        )
        def write(body: dict[str, Any]) -> None:
            resp = requests.post(
                http_bot.url + "/memory",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
                timeout=20,
            )
            assert resp.status_code in (200, 201, 400, 409), resp.text
            if resp.status_code in (200, 201):
                assert resp.json()["verified"] is False and resp.json()["source"] == "agent"
                verify = requests.post(
                    http_bot.url + f"/memory/{resp.json()['id']}/verify",
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=20,
                )
                assert verify.status_code == 403

        write()

    await asyncio.to_thread(agent_writes)
