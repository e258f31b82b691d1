"""Storage interfaces. Every method that reads or writes a person's data takes the owner
key and filters by it inside the implementation, so no caller can forget to."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from core.storage.records import MemoryNode, UserRecord

T = TypeVar("T")


class OwnedData(ABC):
    """A part of storage that holds data about people: it can export and erase it.
    The storage facade asks every registered part on export and on forget-me."""

    section: str  # name of this part in an export ("messages", "memories", ...)

    @abstractmethod
    async def export_owner(self, owner: str) -> Any: ...

    @abstractmethod
    async def delete_owner(self, owner: str) -> int: ...

    def drop_cached(self, owner: str | None) -> None:
        """Forget what this process keeps in memory about ``owner`` (None: about
        everyone): another process changed it (see core.storage.owner_changes). A load
        of it still running must not be kept either. Nothing is kept by default."""


class UserStore(OwnedData):
    section = "profile"

    @abstractmethod
    async def ensure(
        self, key: str, *, display_name: str | None = None, seen_at: datetime | None = None
    ) -> UserRecord: ...

    @abstractmethod
    async def get(self, key: str) -> UserRecord | None: ...

    @abstractmethod
    async def update_profile(self, key: str, **fields: Any) -> None:
        """Merge ``fields`` into the JSON profile (emotional state, preferences...)."""

    @abstractmethod
    async def change_profile(
        self, key: str, field: str, change: Callable[[Any], T], *, wait: bool = True
    ) -> T:
        """Replace one profile field with ``change(current value or None)``, atomically
        (no concurrent update of the field is lost); returns the new value. ``wait=False``:
        returns before the commit, which follows in the background."""

    @abstractmethod
    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        """Store the person's language; ``wait=False``: commit in the background."""

    @abstractmethod
    async def count(self) -> int: ...


class NodeStore(OwnedData):
    section = "messages"

    @abstractmethod
    async def add(self, node: MemoryNode) -> bool:
        """Store a node; False when its ``source_id`` was already stored for the owner."""

    @abstractmethod
    async def get(self, owner: str, node_id: str) -> MemoryNode | None: ...

    @abstractmethod
    async def get_many(self, owner: str, node_ids: Sequence[str]) -> list[MemoryNode]: ...

    @abstractmethod
    async def recent(
        self,
        owner: str,
        *,
        limit: int = 10,
        scopes: Sequence[str] | None = None,
        chat_id: str | None = None,
        before: datetime | None = None,
    ) -> list[MemoryNode]:
        """The owner's latest nodes, oldest first; ``scopes`` limits privacy scopes."""

    @abstractmethod
    async def count(self, owner: str | None = None) -> int:
        """Nodes of one owner; with ``owner=None`` the total (admin statistics only)."""

    @abstractmethod
    async def known_sources(self, owner: str, source_ids: Sequence[str]) -> set[str]:
        """Which of ``source_ids`` the owner already has (imports skip them early)."""

    @abstractmethod
    async def set_emotion(
        self, owner: str, node_id: str, label: str, score: float, *, wait: bool = True
    ) -> None:
        """Store the emotion read in a node; ``wait=False``: commit in the background."""

    @abstractmethod
    async def by_platform_message(
        self, owner: str, platform_message_id: str
    ) -> MemoryNode | None: ...
