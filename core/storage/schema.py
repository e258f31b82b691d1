"""A versioned schema step, for every backend: each applies the steps it has not applied
yet, in order, when it opens (see ``schema_migrations`` in each database)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """A schema step. Versions are global and unique: 1-9 core, 10-19 memory graph,
    20-29 emotion, 30-39 structured memories, 40-49 learned profile, 60-69 several
    processes (PostgreSQL), 70-79 feedback, 80-89
    vectors (pgvector, PostgreSQL)."""

    version: int
    name: str
    sql: str
