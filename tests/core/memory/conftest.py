"""Fixtures for the memory tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path

import pytest

from core.memory.graph import GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage


@pytest.fixture
async def storage(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SQLiteStorage]:
    """A SQLite storage in the test's folder; the test module's ``OWNERS`` already users."""
    store = SQLiteStorage(tmp_path / "akira.db")
    async with store:
        for owner in getattr(request.module, "OWNERS", ()):
            await store.users.ensure(owner)
        yield store


async def store_lines(
    memory: GraphMemory, owner: str, chat_id: str, lines: Sequence[tuple[datetime, str, str]]
) -> None:
    """Stores (time, id, text) as the person's messages, through the store path."""
    for at, node_id, text in lines:
        node = MemoryNode(node_id, owner, text, NodeType.USER_MESSAGE, at, chat_id=chat_id)
        await memory.store(node)
