"""What storage raises, whatever the backend: callers (the engine, the CLI) tell a full
disk or a database server that is away from a bug by these classes, not by a driver's."""

from __future__ import annotations

import errno
import sqlite3


class StorageError(RuntimeError):
    """The database could not be opened, migrated or written (disk full, corrupt...)."""


class StorageFullError(StorageError):
    """A commit failed because the disk (or the database's size cap) is full. A class of
    its own, not only a cause: it crosses from the writer process, where the cause does
    not."""


class StorageUnavailableError(StorageError):
    """The database server cannot be reached (down, restarting, the network between):
    nothing of the failed call was stored. Its message never holds the connection string
    (it may carry a password)."""


def _causes(exc: BaseException) -> list[BaseException]:
    seen: set[int] = set()
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def is_storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the disk or the database being full: the
    message was not stored, and nothing else is wrong with it."""
    for current in _causes(exc):
        if isinstance(current, StorageFullError):
            return True
        if isinstance(current, sqlite3.Error) and current.sqlite_errorcode == sqlite3.SQLITE_FULL:
            return True  # a statement that failed on a full disk (its error pickles whole)
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
    return False


def is_storage_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the database server being out of reach:
    the message was not stored; it will be once the server is back."""
    return any(isinstance(current, StorageUnavailableError) for current in _causes(exc))
