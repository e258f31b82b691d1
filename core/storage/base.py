"""The storage interfaces, kept importable from here: they live in :mod:`core.storage.api`."""

from core.storage.api import GraphStore, MemoryStore, NodeStore, OwnedData, Storage, UserStore

__all__ = ["GraphStore", "MemoryStore", "NodeStore", "OwnedData", "Storage", "UserStore"]
