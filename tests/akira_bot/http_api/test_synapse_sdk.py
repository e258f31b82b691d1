"""AKIRA's memory API driven by Synapse's own client, ``synapse-memory-sdk``, with keys
and tokens made by the real ``akira-bot keys`` command beside the running bot."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from synapse_memory import SynapseError

from core.memory.structured import EXTRAS_KEY, render_recall
from core.types import utcnow
from tests.akira_bot.http_api.conftest import Bot, sdk
from tests.conftest import ask, make_message


async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    # The SDK is synchronous (requests): off the event loop that serves it.
    return await asyncio.to_thread(fn, *args, **kwargs)


async def test_the_synapse_client_stores_recalls_searches_and_deletes(http_bot: Bot) -> None:
    key = await http_bot.acli("keys", "mind", "telegram:42")
    assert key.startswith("akm_")
    client = sdk(http_bot, key)

    stored = await call(
        client.memory.store,
        category="fact",
        content="Mora no Porto, perto da Ribeira",
        key="home_city",
        tags=["home", "Porto"],
        priority="high",
    )
    assert stored["status"] == "created"
    assert stored["mind"] == "telegram:42"
    assert (stored["source"], stored["verified"], stored["confidence"]) == ("agent", False, 0.7)
    assert stored["tags"] == ["home", "porto"]

    # Upsert by key: the same memory, a new version; an agent cannot claim to be the user.
    again = await call(
        client.memory.store,
        category="fact",
        content="Mora em Lisboa agora",
        key="home_city",
        tags=["home"],
        source="user",
        confidence=0.9,
    )
    assert (again["status"], again["id"], again["version"]) == ("updated", stored["id"], 2)
    assert (again["source"], again["verified"], again["confidence"]) == ("agent", False, 0.9)

    soon = int(time.time()) + 600
    pizza = await call(
        client.memory.store,
        category="preference",
        content="Gosta de pizza de calabresa",
        tags=["food"],
        expires_at=soon,
    )
    assert pizza["key"].startswith("preference_")  # no key given: derived from the content
    assert pizza["expires_at"] is not None

    # Recall: AKIRA's own recall text, the one the prompt gets.
    text = await call(client.memory.recall)
    memories = http_bot.engine.services.extras[EXTRAS_KEY]
    active = await memories.active("telegram:42", at=utcnow())
    assert text == render_recall(active)
    assert "Mora em Lisboa agora" in text and "Gosta de pizza" in text
    assert "[unverified] home_city" in text

    found = await call(client.memory.search, "lisboa")
    assert [m["id"] for m in found["memories"]] == [stored["id"]]
    folded = await call(client.memory.search, "CALABRESA")
    assert [m["id"] for m in folded["memories"]] == [pizza["id"]]

    tagged = await call(client.memory.by_tag, "FOOD")
    assert [m["id"] for m in tagged["memories"]] == [pizza["id"]]

    expiring = await call(client.memory.expiring, within_seconds=3600)
    assert [m["id"] for m in expiring["memories"]] == [pizza["id"]]
    assert (await call(client.memory.expiring, within_seconds=60))["memories"] == []

    updated = await call(client.memory.update, pizza["id"], content="Gosta de pizza marguerita")
    assert updated["content"] == "Gosta de pizza marguerita" and updated["version"] == 2

    stats = await call(client.memory.stats)
    assert (stats["total"], stats["verified"], stats["unverified"]) == (2, 0, 2)
    assert stats["by_category"] == {"fact": 1, "preference": 1}

    listed = await call(client.memory.list, category="preference")
    assert [m["id"] for m in listed["memories"]] == [pizza["id"]]

    assert (await call(client.memory.delete, pizza["id"]))["deleted"] is True
    with pytest.raises(SynapseError) as gone:
        await call(client.memory.delete, pizza["id"])
    assert gone.value.status == 404
    assert [m["id"] for m in (await call(client.memory.list))["memories"]] == [stored["id"]]

    # What the API stored is what the bot itself remembers of the person.
    assert [m.id for m in await memories.all("telegram:42")] == [stored["id"]]


async def test_only_a_human_jwt_verifies(http_bot: Bot) -> None:
    key = await http_bot.acli("keys", "mind", "telegram:42")
    token = await http_bot.acli("keys", "jwt", "telegram:42", "--ttl", "10m")
    client = sdk(http_bot, key, jwt=token)
    memory = await call(
        client.memory.store, category="identity", content="Chama-se Ana", key="name"
    )
    path = f"/memory/{memory['id']}/verify"

    with pytest.raises(SynapseError) as refused:
        await call(client.request, "POST", path)  # the Mind Key
    assert refused.value.status == 403
    unchanged = await call(client.request, "GET", f"/memory/{memory['id']}")
    assert (unchanged["verified"], unchanged["version"], unchanged["verified_by"]) == (
        False,
        1,
        None,
    )

    verified = await call(client.request, "POST", path, token=client.jwt)
    assert (verified["verified"], verified["verified_by"], verified["confidence"]) == (
        True,
        "telegram:42",
        1.0,
    )
    assert "[verified] name" in await call(client.memory.recall)
    # The agent no longer changes what the person verified.
    with pytest.raises(SynapseError) as kept:
        await call(client.memory.store, category="identity", content="Chama-se Bia", key="name")
    assert kept.value.status == 409
    with pytest.raises(SynapseError) as kept_update:
        await call(client.memory.update, memory["id"], content="Chama-se Bia")
    assert kept_update.value.status == 409
    with pytest.raises(SynapseError) as kept_delete:
        await call(client.memory.delete, memory["id"])
    assert kept_delete.value.status == 403
    assert (await call(client.request, "GET", f"/memory/{memory['id']}"))[
        "content"
    ] == "Chama-se Ana"


async def test_memories_told_in_chat_are_in_the_api_and_back(http_bot: Bot) -> None:
    await ask(http_bot.engine, make_message("/remember fact/cidade: Recife", user="42"))
    key = await http_bot.acli("keys", "mind", "telegram:42")
    client = sdk(http_bot, key)
    listed = await call(client.memory.list)
    assert [(m["key"], m["content"], m["verified"]) for m in listed["memories"]] == [
        ("cidade", "Recife", True)
    ]
