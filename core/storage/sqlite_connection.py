"""Raw SQLite connections and the group transaction, without asyncio: what both the
event loop's :class:`core.storage.database.Database` and the writer process
(:mod:`core.storage.writer_process`) run. Imports no store, so the writer process loads
it (and the write functions of :mod:`core.storage.sqlite_rows`) without the rest of
storage."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.storage import owner_words
from core.storage.errors import StorageError, StorageFullError

log = logging.getLogger("core.storage.database")

# A log longer than this is cut back to it when it starts over (see Database._checkpoint).
WAL_SIZE_LIMIT = 64 * 1024 * 1024

# The SQL function our triggers call, on every connection we open (see owner_words).
SQL_FUNCTION = (owner_words.SQL_FUNCTION, 2, owner_words.owner_words)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _write_connection(
    path: Path, *, busy_timeout_ms: int = 0, wal_size_limit: int = WAL_SIZE_LIMIT
) -> sqlite3.Connection:
    """A write connection that never checkpoints. The event loop's never waits for a
    lock (``busy_timeout_ms=0``); the writer process's may (another process writing):
    nobody else waits on its thread."""
    return _connect(
        path,
        "PRAGMA foreign_keys=ON",
        "PRAGMA synchronous=NORMAL",
        f"PRAGMA busy_timeout={int(busy_timeout_ms)}",
        "PRAGMA wal_autocheckpoint=0",
        f"PRAGMA journal_size_limit={int(wal_size_limit)}",
    )


def _read_connection(path: Path, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """A read-only (``query_only``) connection; under WAL it sees every committed write."""
    return _connect(path, "PRAGMA query_only=ON", f"PRAGMA busy_timeout={int(busy_timeout_ms)}")


def _connect(path: Path, *pragmas: str) -> sqlite3.Connection:
    """A raw connection usable from any one thread at a time, rows as aiosqlite's (the
    same functions run on both), with ``pragmas`` applied; closed again if one fails."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        conn.create_function(*SQL_FUNCTION, deterministic=True)
        for pragma in pragmas:
            conn.execute(pragma)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _group_transaction(
    raw: sqlite3.Connection,
    fns: Sequence[Callable[[sqlite3.Connection], Any]],
    *,
    begun: bool = False,
) -> list[tuple[bool, Any]]:
    """Several callers' writes in one transaction on the database thread. Returns (ok,
    result or exception) for each.

    First they all run straight through (the usual case: none fails). When one raises,
    that transaction is rolled back and the batch runs again with a savepoint around each
    write, so only the failing caller's writes are lost. Savepoints on every write would
    cost two more statements each, and each statement is a round of the GIL between this
    thread and the event loop. So a write function may run twice: it must only write
    through ``raw``, with no effect elsewhere. ``begun``: the caller has begun the
    transaction."""
    if not begun:
        raw.execute("BEGIN IMMEDIATE")
    try:
        values = [fn(raw) for fn in fns]
    except Exception:
        _rollback(raw)
        return _savepointed_transaction(raw, fns)
    except BaseException:
        _rollback(raw)
        raise
    _commit(raw)
    return [(True, value) for value in values]


def _savepointed_transaction(
    raw: sqlite3.Connection, fns: Sequence[Callable[[sqlite3.Connection], Any]]
) -> list[tuple[bool, Any]]:
    """The batch again, each write in a savepoint, rolled back alone when it raises."""
    out: list[tuple[bool, Any]] = []
    raw.execute("BEGIN IMMEDIATE")
    try:
        for fn in fns:
            raw.execute("SAVEPOINT akira_write")
            try:
                value = fn(raw)
            except Exception as exc:
                raw.execute("ROLLBACK TO akira_write")
                raw.execute("RELEASE akira_write")
                out.append((False, exc))
            else:
                raw.execute("RELEASE akira_write")
                out.append((True, value))
    except BaseException:
        _rollback(raw)
        raise
    _commit(raw)
    return out


def _commit(raw: sqlite3.Connection) -> None:
    try:
        raw.execute("COMMIT")
    except sqlite3.Error as exc:
        _rollback(raw)
        if exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
            raise StorageFullError(f"commit failed: {exc}") from exc
        raise StorageError(f"commit failed: {exc}") from exc


def _rollback(raw: sqlite3.Connection) -> None:
    if not raw.in_transaction:
        return  # SQLite already rolled back (a commit that failed on a full disk does)
    try:
        raw.execute("ROLLBACK")
    except sqlite3.Error:  # an I/O error on the rollback itself
        log.exception("rollback failed")
