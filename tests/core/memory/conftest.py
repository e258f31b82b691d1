"""Fixtures for the memory tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.storage import SQLiteStorage


@pytest.fixture
async def storage(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SQLiteStorage]:
    """A SQLite storage in the test's folder; the test module's ``OWNERS`` already users."""
    store = SQLiteStorage(tmp_path / "akira.db")
    async with store:
        for owner in getattr(request.module, "OWNERS", ()):
            await store.users.ensure(owner)
        yield store
