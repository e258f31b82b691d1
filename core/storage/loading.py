"""Which cache loads raced a write: a per-owner cache read from SQLite while a write for
that owner committed may lack the write, and must then be used once, not kept."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class LoadGuard:
    """``token = guard.begin(owner)`` before reading an owner's rows, ``guard.wrote(owner)``
    after every committed write of that owner, ``guard.end(owner, token)`` after the read:
    True when a write landed in between (do not keep what was read)."""

    def __init__(self) -> None:
        self._writes = 0
        self._loading: dict[str, int] = {}  # owners being read -> how many reads
        self._written: dict[str, int] = {}  # of those, the last write each one got

    def wrote(self, owner: str | None) -> None:
        """A write of ``owner`` committed; None: one that may have touched every owner
        (another process's, seen by ``SQLiteStorage.catch_up``), so no load running now
        may be kept."""
        self._writes += 1
        if owner is None:
            for loading in self._loading:
                self._written[loading] = self._writes
        elif owner in self._loading:
            self._written[owner] = self._writes

    def begin(self, owner: str) -> int:
        self._loading[owner] = self._loading.get(owner, 0) + 1
        return self._writes

    async def load(self, owner: str, read: Awaitable[T]) -> tuple[T, bool]:
        """Await ``read`` (the owner's rows from SQLite) between :meth:`begin` and
        :meth:`end`: (what it gave, whether a write of that owner committed meanwhile)."""
        token = self.begin(owner)
        try:
            value = await read
        finally:
            raced = self.end(owner, token)
        return value, raced

    def end(self, owner: str, token: int) -> bool:
        self._loading[owner] -= 1
        if self._loading[owner]:
            written = self._written.get(owner, 0)
        else:
            del self._loading[owner]
            written = self._written.pop(owner, 0)
        return written > token
