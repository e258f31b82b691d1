"""Schemathesis against the server's own ``/openapi.json``: for every operation, cases
generated from the document (valid and invalid) never get a 5xx, and every answer has a
documented status, content type and shape."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from akira_bot.http.keys import issue_jwt, new_mind_key
from akira_bot.http.keystore import SQLiteKeyStore, digest
from akira_bot.http.openapi import document
from akira_bot.http.server import HttpServer, build_app, make_state
from core.storage import SQLiteStorage
from core.types import utcnow
from tests.akira_bot.http_api.conftest import SECRET

schema = schemathesis.openapi.from_dict(document())
CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


class LiveServer:
    """The HTTP side over a real SQLite file, on its own event loop in a thread (the
    schemathesis test calls it synchronously)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.tokens: list[str] = []

    def run(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)  # type: ignore[arg-type]

    async def _start(self) -> None:
        self.storage = SQLiteStorage(self.path)
        await self.storage.open()
        keys = SQLiteKeyStore(self.storage.db)
        state = await make_state(self.storage, jwt_secret=SECRET, keys=keys)
        self.server = HttpServer(build_app(state), "127.0.0.1", 0)
        await self.server.start()
        for mind in ("telegram:1", "telegram:2"):
            # Something in each mind, so listings answer memories to check the shape of.
            await state.memories.store_memory(mind, "fact", "city", "Porto", tags=["home"])
            await state.memories.store_memory(
                mind, "note", "soon", "prova", expires_at=utcnow() + timedelta(hours=1)
            )
            key = new_mind_key()
            await keys.add("mind", digest(key), mind)
            self.tokens += [key, issue_jwt(SECRET, mind)]
        self.tokens.append(issue_jwt(SECRET, "discord:9", admin=True))

    async def _stop(self) -> None:
        await self.server.stop()
        await self.storage.close()

    def __enter__(self) -> LiveServer:
        self.thread.start()
        self.run(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(tmp_path / "akira.db") as server:
        yield server


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_answers_as_documented(case: schemathesis.Case, live: LiveServer) -> None:
    token = next(_rotation(live))
    response = case.call(
        base_url=live.server.url, headers={"Authorization": f"Bearer {token}"}, timeout=20
    )
    case.validate_response(response, checks=CHECKS)


_rotations: dict[int, Iterator[str]] = {}


def _rotation(live: LiveServer) -> Iterator[str]:
    """Each case with the next credential: agents, people and an admin, two minds."""
    return _rotations.setdefault(id(live), itertools.cycle(live.tokens))
