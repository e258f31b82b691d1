"""Storage behind protocols (core.storage.api): SQLite (aiosqlite, WAL) is the embedded
default; PostgreSQL (core.storage.postgres, asyncpg + pgvector) for several processes or
machines sharing one database. :func:`open_storage` builds the configured one."""

from core.storage.api import (
    GraphStore,
    MemoryStore,
    NodeStore,
    OwnedData,
    Storage,
    UserStore,
)
from core.storage.database import Database
from core.storage.errors import (
    StorageError,
    StorageFullError,
    StorageUnavailableError,
    is_storage_full,
    is_storage_unavailable,
)
from core.storage.graph_records import Edge, EmbeddingModelMismatch, NodePlace
from core.storage.records import (
    EVERY_OWNER,
    Connection,
    MemoryNode,
    NodeType,
    UserRecord,
    from_ts,
    to_ts,
)
from core.storage.schema import Migration
from core.storage.sqlite import SQLiteStorage

__all__ = [
    "EVERY_OWNER",
    "Connection",
    "Database",
    "Edge",
    "EmbeddingModelMismatch",
    "GraphStore",
    "MemoryNode",
    "MemoryStore",
    "Migration",
    "NodePlace",
    "NodeStore",
    "NodeType",
    "OwnedData",
    "SQLiteStorage",
    "Storage",
    "StorageError",
    "StorageFullError",
    "StorageUnavailableError",
    "UserRecord",
    "UserStore",
    "from_ts",
    "is_storage_full",
    "is_storage_unavailable",
    "to_ts",
]
