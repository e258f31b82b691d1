"""The storage settings: sqlite by default (no server), postgres with a DSN that is a
secret (never echoed, kept out of log lines with its password)."""

from __future__ import annotations

import logging

import pytest

from akira_bot.cli import RedactSecrets, secret_values
from akira_bot.settings import SettingsError, load_settings
from akira_bot.storage import build_storage
from core.storage.postgres import PostgresStorage
from core.storage.sqlite import SQLiteStorage

DSN = "postgresql://akira:s3cret-pass@db.example:5432/akira"


def test_sqlite_is_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.delenv("AKIRA_STORAGE__BACKEND", raising=False)
    monkeypatch.delenv("AKIRA_STORAGE__POSTGRES_DSN", raising=False)
    settings = load_settings(data_dir=tmp_path)
    assert settings.storage.backend == "sqlite"
    assert isinstance(build_storage(settings), SQLiteStorage)


def test_postgres_needs_a_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_STORAGE__BACKEND", "postgres")
    monkeypatch.delenv("AKIRA_STORAGE__POSTGRES_DSN", raising=False)
    with pytest.raises(SettingsError, match="AKIRA_STORAGE__POSTGRES_DSN"):
        load_settings()


def test_the_dsn_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_STORAGE__BACKEND", "postgres")
    monkeypatch.setenv("AKIRA_STORAGE__POSTGRES_DSN", DSN)
    settings = load_settings()
    assert "s3cret-pass" not in repr(settings) and "s3cret-pass" not in str(settings.storage)
    storage = build_storage(settings)
    assert isinstance(storage, PostgresStorage) and "s3cret" not in repr(storage)
    assert "s3cret" not in repr(storage.db)
    # Log lines lose the DSN, and its password alone.
    redact = RedactSecrets(secret_values(settings))
    for text in (f"connecting to {DSN}", "password was s3cret-pass"):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, text, None, None)
        redact.filter(record)
        assert "s3cret-pass" not in record.getMessage()


def test_a_bad_dsn_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_STORAGE__BACKEND", "postgres")
    monkeypatch.setenv("AKIRA_STORAGE__POSTGRES_DSN", "mysql://root:hunter2@x/db")
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert "hunter2" not in str(raised.value)
    assert "AKIRA_STORAGE__POSTGRES_DSN" in str(raised.value)
