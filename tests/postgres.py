"""Throwaway PostgreSQL databases for tests: one per test, created on the local server
(127.0.0.1:5432, user postgres, trust auth; override with AKIRA_TEST_POSTGRES), named
``akira23_<random>`` and dropped afterwards."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import asyncpg

SERVER = os.environ.get("AKIRA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


def dsn_of(name: str) -> str:
    return f"{SERVER}/{name}"


async def create_database(prefix: str = "akira23") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(dsn_of("postgres"))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return name


async def drop_database(name: str) -> None:
    admin = await asyncpg.connect(dsn_of("postgres"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def postgres_database(prefix: str = "akira23") -> AsyncIterator[str]:
    """The DSN of a new, empty database; dropped (connections and all) afterwards."""
    name = await create_database(prefix)
    try:
        yield dsn_of(name)
    finally:
        await drop_database(name)
