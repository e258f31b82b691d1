"""``akira-bot storage migrate --to DSN``: the configured SQLite database copied into
PostgreSQL, losslessly and idempotently.

Every row of every table is copied as it is stored (times as epoch seconds, tags and
profiles as their JSON text, vectors as the same float32 values, in pgvector's
``vector``), in SQLite's insertion order, so
PostgreSQL's ``seq`` keeps SQLite's order of equal times. Each row is an upsert by its
key: running it again (or after the bot went on writing to SQLite) leaves one copy of
each row, with its latest values. Rows already in PostgreSQL that SQLite does not hold
are left alone (the target may be shared). The connection string is never printed."""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from akira_bot.errors import CLIError
from akira_bot.settings import Settings

BATCH = 1000


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    order: str  # SQLite's insertion order
    convert: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None

    def upsert(self) -> str:
        names = ", ".join(self.columns)
        marks = ", ".join(f"${i}" for i in range(1, len(self.columns) + 1))
        update = ", ".join(f"{c} = EXCLUDED.{c}" for c in self.columns if c not in self.key)
        conflict = f"ON CONFLICT ({', '.join(self.key)}) DO " + (
            f"UPDATE SET {update}" if update else "NOTHING"
        )
        return f"INSERT INTO {self.name}({names}) VALUES ({marks}) {conflict}"


def _verified_at(index: int) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """SQLite keeps booleans as 0/1; PostgreSQL as booleans."""

    def convert(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return (*row[:index], bool(row[index]), *row[index + 1 :])

    return convert


def _vector_at(index: int) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """SQLite keeps a vector as float32 bytes; PostgreSQL as pgvector's ``vector`` (the
    same float32 values)."""

    def convert(row: tuple[Any, ...]) -> tuple[Any, ...]:
        vector = np.frombuffer(row[index], dtype=np.float32)
        return (*row[:index], vector, *row[index + 1 :])

    return convert


def _columns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


_MEMORY_COLUMNS = _columns(
    "id owner category key content tags priority source verified verified_by verified_at"
    " confidence expires_at scope created_at updated_at version"
)
_HISTORY_COLUMNS = _columns(
    "memory_id owner version category key content tags priority source verified"
    " verified_by confidence expires_at scope valid_from replaced_at change"
)

TABLES = (
    Table(
        "users",
        _columns("key platform external_id display_name language created_at last_seen_at profile"),
        ("key",),
        "rowid",
    ),
    Table(
        "nodes",
        _columns(
            "id owner type content ts chat_id chat_kind scope platform_message_id reply_to"
            " tags emotion emotion_score source_id"
        ),
        ("id",),
        "rowid",
    ),
    Table("graph_meta", ("key", "value"), ("key",), "key"),
    Table(
        "graph_embeddings",
        ("node_id", "owner", "model", "dim", "vector"),
        ("node_id",),
        "rowid",
        _vector_at(4),
    ),
    # Second vectors (schema 16 / 81): another encoder's, keyed by node and model.
    Table(
        "graph_second_embeddings",
        ("node_id", "owner", "model", "dim", "vector"),
        ("node_id", "model"),
        "node_id, model",
        _vector_at(4),
    ),
    Table(
        "graph_connections",
        ("owner", "from_id", "to_id", "relation_type", "strength", "explanation"),
        ("owner", "from_id", "to_id", "relation_type"),
        "owner, from_id, to_id, relation_type",
    ),
    Table(
        "graph_tags",
        ("owner", "tag", "ts", "node_id", "ntags"),
        ("owner", "tag", "ts", "node_id"),
        "owner, tag, ts, node_id",
    ),
    Table(
        "graph_entities",
        ("owner", "entity", "ts", "node_id", "scope"),
        ("owner", "entity", "ts", "node_id"),
        "owner, entity, ts, node_id",
    ),
    Table(
        "structured_memories",
        _MEMORY_COLUMNS,
        ("owner", "category", "key"),
        "seq",
        _verified_at(_MEMORY_COLUMNS.index("verified")),
    ),
    Table(
        "structured_memory_history",
        _HISTORY_COLUMNS,
        ("memory_id", "version"),
        "memory_id, version",
        _verified_at(_HISTORY_COLUMNS.index("verified")),
    ),
    # Feedback (schema 70): the bot's messages per reply, ratings, mood corrections.
    Table(
        "feedback_replies",
        _columns("owner chat_id message_id node_id at"),
        ("owner", "chat_id", "message_id"),
        "rowid",
    ),
    Table(
        "feedback_ratings",
        _columns("owner node_id rating chat_id message_id emoji at"),
        ("owner", "node_id", "rating"),
        "rowid",
    ),
    Table(
        "mood_corrections",
        _columns("id owner node_id text predicted predicted_score corrected at"),
        ("id",),
        "rowid",
    ),
    Table(
        "profile_counters",
        ("owner", "kind", "name", "weight", "total", "first_at", "last_at"),
        ("owner", "kind", "name"),
        "owner, kind, name",
    ),
)


def _read(path: Path, table: Table, offset: int) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            f"SELECT {', '.join(table.columns)} FROM {table.name}"
            f" ORDER BY {table.order} LIMIT ? OFFSET ?",
            (BATCH, offset),
        ).fetchall()
    finally:
        conn.close()
    return [table.convert(r) if table.convert else tuple(r) for r in rows]


def _counts(path: Path, tables: Sequence[Table]) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            t.name: int(conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0])
            for t in tables
        }
    finally:
        conn.close()


async def migrate(path: Path, dsn: str, *, progress: bool = True) -> dict[str, int]:
    """Copy every table of the SQLite database at ``path`` into the PostgreSQL database
    at ``dsn``; returns the rows copied per table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from core.storage.postgres import PostgresStorage
    from core.storage.postgres.changes import notify
    from core.storage.records import EVERY_OWNER
    from core.storage.sqlite import SQLiteStorage

    if not await asyncio.to_thread(path.is_file):
        raise CLIError(f"no SQLite database at {path} (AKIRA_DATA_DIR)")
    async with SQLiteStorage(path):  # brings an older file up to the current schema
        pass
    counts = await asyncio.to_thread(_counts, path, TABLES)
    target = PostgresStorage(dsn, pool_size=2)
    copied: dict[str, int] = {}
    async with target:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            disable=not progress,
            transient=False,
        ) as bar:
            task = bar.add_task("copying", total=sum(counts.values()))
            for table in TABLES:
                bar.update(task, description=f"{table.name:<26}")
                sql = table.upsert()
                offset = 0
                while rows := await asyncio.to_thread(_read, path, table, offset):
                    async with target.db.transaction() as conn:
                        await conn.executemany(sql, rows)
                    offset += len(rows)
                    bar.advance(task, len(rows))
                copied[table.name] = offset
            # Sequences past the rows copied: new rows sort after them.
            async with target.db.transaction() as conn:
                for name in ("nodes", "structured_memories"):
                    await conn.execute(
                        f"SELECT setval(pg_get_serial_sequence('{name}', 'seq'),"
                        f" greatest((SELECT max(seq) FROM {name}), 1))"
                    )
                # Bots already running on the target drop what they keep of everyone:
                # the rows copied did not move anyone's node version.
                await notify(conn, EVERY_OWNER)
    return copied


async def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    dsn: str = args.to
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise CLIError("--to must be a postgresql:// connection string")
    copied = await migrate(settings.database_path, dsn, progress=not args.quiet)
    total = sum(copied.values())
    details = ", ".join(f"{name}: {n}" for name, n in copied.items())
    print(f"copied {total} row(s) from {settings.database_path} into PostgreSQL ({details})")
    return 0


def add_parser(sub: Any) -> None:
    storage = sub.add_parser(
        "storage",
        help="manage the database (move a community from SQLite to PostgreSQL)",
        description="Storage tools. The backend in use is AKIRA_STORAGE__BACKEND (sqlite|postgres).",
    )
    ssub = storage.add_subparsers(dest="storage_command", metavar="ACTION")
    move = ssub.add_parser(
        "migrate",
        help="copy the configured SQLite database into PostgreSQL",
        description="Copy every row of the SQLite database in AKIRA_DATA_DIR into the "
        "PostgreSQL database at DSN (created tables included). Lossless and idempotent: "
        "run it again and the target holds the same rows. Then set "
        "AKIRA_STORAGE__BACKEND=postgres and AKIRA_STORAGE__POSTGRES_DSN.",
    )
    move.add_argument("--to", required=True, metavar="DSN", help="postgresql://user@host:5432/db")
    move.add_argument("--quiet", action="store_true", help="no progress bar")
    move.set_defaults(handler=cmd_migrate)
