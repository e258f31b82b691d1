"""The storage the settings ask for: SQLite in AKIRA_DATA_DIR (the default, no server) or
PostgreSQL at AKIRA_STORAGE__POSTGRES_DSN (several processes or machines)."""

from __future__ import annotations

from akira_bot.errors import CLIError
from akira_bot.settings import Settings
from core.storage.api import Storage
from core.storage.sqlite import SQLiteStorage


def build_storage(settings: Settings) -> Storage:
    storage = settings.storage
    if storage.backend == "postgres":
        if storage.postgres_dsn is None:  # the settings refuse this; kept for type's sake
            raise CLIError("AKIRA_STORAGE__POSTGRES_DSN is not set")
        try:
            from core.storage.postgres import PostgresStorage
        except ImportError as exc:  # asyncpg: the "postgres" extra
            raise CLIError(
                f"the postgres backend needs asyncpg (pip install 'akira-bot[postgres]'): {exc}"
            ) from None
        return PostgresStorage(
            storage.postgres_dsn.get_secret_value(), pool_size=storage.postgres_pool_size
        )
    return SQLiteStorage(settings.database_path, writer_process=storage.writer == "process")
