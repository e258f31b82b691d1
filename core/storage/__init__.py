"""Storage behind interfaces; SQLite (aiosqlite, WAL) is the shipped backend."""

from core.storage.base import NodeStore, OwnedData, UserStore
from core.storage.database import (
    Database,
    Migration,
    StorageError,
    StorageFullError,
    is_storage_full,
)
from core.storage.records import Connection, MemoryNode, NodeType, UserRecord, from_ts, to_ts
from core.storage.sqlite import SQLiteStorage

__all__ = [
    "Connection",
    "Database",
    "MemoryNode",
    "Migration",
    "NodeStore",
    "NodeType",
    "OwnedData",
    "SQLiteStorage",
    "StorageError",
    "StorageFullError",
    "UserRecord",
    "UserStore",
    "from_ts",
    "is_storage_full",
    "to_ts",
]
