"""Fixtures shared by the core tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.storage import SQLiteStorage


@pytest.fixture
async def storage(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SQLiteStorage]:
    """A real storage on a SQLite file in the test's folder, the test module's ``OWNERS``
    already users (the memory and storage tests; the contract suite has its own, over
    every backend)."""
    store = SQLiteStorage(tmp_path / "akira.db")
    async with store:
        for owner in getattr(request.module, "OWNERS", ()):
            await store.users.ensure(owner)
        yield store
