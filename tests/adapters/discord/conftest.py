"""The fake Discord (REST and gateway) the Discord tests talk to over loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from akira_bot.testing.discord_api import FakeDiscord


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord(heartbeat_interval_ms=1000)
    await server.start()
    try:
        yield server
    finally:
        await server.close()
