"""Where the HTTP side's credentials are kept: a small protocol, its SQLite and
PostgreSQL versions, and :func:`key_store_for` (the one for the storage in use).

Only hashes are stored (:func:`digest`). Each store keeps one table,
``http_credentials``, in the bot's own database, created if missing (beside the schema
the storage layer migrates, so it needs no schema version of its own); PostgreSQL's has
the same columns (times as ``DOUBLE PRECISION`` epoch seconds), so ``storage migrate``
could carry it, and every process sharing the database sees the same keys.

It is also a part of the person's data (:class:`~core.storage.base.OwnedData`): the
export lists their keys (when made, whether revoked; never a hash), and forgetting the
person deletes them, so an agent's key stops working with the rest of their data.
Importing it needs nothing of the ``http`` extra.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core.storage import Database, from_ts, to_ts
from core.storage.base import OwnedData
from core.types import utcnow

if TYPE_CHECKING:
    from core.storage.api import Storage
    from core.storage.postgres.database import PgDatabase

KeyKind = Literal["mind", "login", "revoked_jwt"]


def digest(secret: str) -> str:
    """What is stored instead of a secret. Keys are random (256 bits), so a plain hash is
    enough: there is nothing to guess that a slow hash would protect."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class KeyStore(Protocol):
    """Where credentials live. Every secret is passed in already hashed (:func:`digest`)."""

    async def setup(self) -> None: ...

    async def add(
        self, kind: KeyKind, key_hash: str, owner: str, *, expires_at: datetime | None = None
    ) -> None: ...

    async def mind_of(self, key_hash: str) -> str | None:
        """The mind an unrevoked Mind Key opens, None for any other hash."""
        ...

    async def revoke(self, key_hash: str) -> bool:
        """Revoke a Mind Key; False when no such (unrevoked) key exists."""
        ...

    async def is_revoked_jwt(self, jti: str) -> bool: ...

    async def use_login(self, token_hash: str, *, at: datetime) -> str | None:
        """The admin a login link was for, once: the first use consumes it."""
        ...

    async def minds(self, owner: str) -> int:
        """How many unrevoked Mind Keys open ``owner``'s mind."""
        ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS http_credentials (
    key_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    used_at REAL,
    revoked_at REAL
)
"""


def _exported(rows: list[Any]) -> list[dict[str, Any]] | None:
    """The export's section: each key when made, whether revoked or used; never a hash.
    No section at all when the person has no credentials."""
    if not rows:
        return None
    return [
        {
            "kind": "mind_key" if r[0] == "mind" else "admin_login_link",
            "created_at": from_ts(r[1]).isoformat(),
            "revoked": r[2] is not None,
            "used": r[3] is not None,
        }
        for r in rows
    ]


class SQLiteKeyStore(OwnedData):
    """:class:`KeyStore` in the bot's SQLite database (table ``http_credentials``)."""

    section = "api_keys"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def setup(self) -> None:
        async with self.db.transaction() as conn:
            await conn.execute(_SCHEMA)
            await conn.execute(
                "CREATE INDEX IF NOT EXISTS http_credentials_owner ON http_credentials(owner, kind)"
            )

    async def add(
        self, kind: KeyKind, key_hash: str, owner: str, *, expires_at: datetime | None = None
    ) -> None:
        now = to_ts(utcnow())
        async with self.db.transaction() as conn:
            # Used-up links and revocations of expired tokens mean nothing any more.
            await conn.execute(
                "DELETE FROM http_credentials WHERE kind IN ('login', 'revoked_jwt')"
                " AND expires_at < ?",
                (now,),
            )
            await conn.execute(
                "INSERT OR IGNORE INTO http_credentials(key_hash, kind, owner, created_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?)",
                (
                    key_hash,
                    kind,
                    owner,
                    now,
                    to_ts(expires_at) if expires_at is not None else None,
                ),
            )

    async def mind_of(self, key_hash: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT owner FROM http_credentials"
            " WHERE key_hash = ? AND kind = 'mind' AND revoked_at IS NULL",
            (key_hash,),
        )
        return str(row[0]) if row else None

    async def revoke(self, key_hash: str) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE http_credentials SET revoked_at = ?"
                " WHERE key_hash = ? AND kind = 'mind' AND revoked_at IS NULL",
                (to_ts(utcnow()), key_hash),
            )
            return (cur.rowcount or 0) > 0

    async def is_revoked_jwt(self, jti: str) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM http_credentials WHERE key_hash = ? AND kind = 'revoked_jwt'",
            (digest(jti),),
        )
        return row is not None

    async def use_login(self, token_hash: str, *, at: datetime) -> str | None:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE http_credentials SET used_at = ? WHERE key_hash = ? AND kind = 'login'"
                " AND used_at IS NULL AND expires_at > ?",
                (to_ts(at), token_hash, to_ts(at)),
            )
            if not cur.rowcount:
                return None
            async with conn.execute(
                "SELECT owner FROM http_credentials WHERE key_hash = ?", (token_hash,)
            ) as rows:
                row = await rows.fetchone()
            return str(row[0]) if row else None

    async def minds(self, owner: str) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) FROM http_credentials"
            " WHERE owner = ? AND kind = 'mind' AND revoked_at IS NULL",
            (owner,),
        )
        return int(row[0]) if row else 0

    # --- the person's data -------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        await self.setup()
        rows = await self.db.fetchall(
            "SELECT kind, created_at, revoked_at, used_at FROM http_credentials"
            " WHERE owner = ? AND kind IN ('mind', 'login') ORDER BY created_at",
            (owner,),
        )
        return _exported(list(rows))

    async def delete_owner(self, owner: str) -> int:
        await self.setup()
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM http_credentials WHERE owner = ?", (owner,))
            return cur.rowcount or 0


# Table and index as SQLite's (times as epoch seconds).
_PG_SCHEMA = (
    _SCHEMA.replace(" REAL", " DOUBLE PRECISION"),
    "CREATE INDEX IF NOT EXISTS http_credentials_owner ON http_credentials(owner, kind)",
)
_PG_SETUP_LOCK = 2  # advisory-lock key (the storage's namespace): one process creates it


class PostgresKeyStore(OwnedData):
    """:class:`KeyStore` in the bot's PostgreSQL database (table ``http_credentials``),
    shared by every process on it: a key made or revoked on one works, or stops working,
    on all of them at once (each check reads the table)."""

    section = "api_keys"

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._ready = False

    async def setup(self) -> None:
        if self._ready:
            return
        from core.storage.postgres.database import LOCK_NAMESPACE

        async with self.db.transaction() as conn:
            # Processes starting together: CREATE ... IF NOT EXISTS alone may still race.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_NAMESPACE, _PG_SETUP_LOCK
            )
            for statement in _PG_SCHEMA:
                await conn.execute(statement)
        self._ready = True

    async def add(
        self, kind: KeyKind, key_hash: str, owner: str, *, expires_at: datetime | None = None
    ) -> None:
        now = to_ts(utcnow())
        await self.setup()
        async with self.db.transaction() as conn:
            # Used-up links and revocations of expired tokens mean nothing any more.
            await conn.execute(
                "DELETE FROM http_credentials WHERE kind IN ('login', 'revoked_jwt')"
                " AND expires_at < $1",
                now,
            )
            await conn.execute(
                "INSERT INTO http_credentials(key_hash, kind, owner, created_at, expires_at)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                key_hash,
                kind,
                owner,
                now,
                to_ts(expires_at) if expires_at is not None else None,
            )

    async def mind_of(self, key_hash: str) -> str | None:
        await self.setup()
        owner = await self.db.fetchval(
            "SELECT owner FROM http_credentials"
            " WHERE key_hash = $1 AND kind = 'mind' AND revoked_at IS NULL",
            key_hash,
        )
        return str(owner) if owner is not None else None

    async def revoke(self, key_hash: str) -> bool:
        from core.storage.postgres.database import affected

        await self.setup()
        status = await self.db.execute(
            "UPDATE http_credentials SET revoked_at = $1"
            " WHERE key_hash = $2 AND kind = 'mind' AND revoked_at IS NULL",
            to_ts(utcnow()),
            key_hash,
        )
        return affected(status) > 0

    async def is_revoked_jwt(self, jti: str) -> bool:
        await self.setup()
        found = await self.db.fetchval(
            "SELECT 1 FROM http_credentials WHERE key_hash = $1 AND kind = 'revoked_jwt'",
            digest(jti),
        )
        return found is not None

    async def use_login(self, token_hash: str, *, at: datetime) -> str | None:
        await self.setup()
        # One statement: of two processes given the same link at once, one gets it.
        owner = await self.db.fetchval(
            "UPDATE http_credentials SET used_at = $1 WHERE key_hash = $2 AND kind = 'login'"
            " AND used_at IS NULL AND expires_at > $1 RETURNING owner",
            to_ts(at),
            token_hash,
        )
        return str(owner) if owner is not None else None

    async def minds(self, owner: str) -> int:
        await self.setup()
        count = await self.db.fetchval(
            "SELECT count(*) FROM http_credentials"
            " WHERE owner = $1 AND kind = 'mind' AND revoked_at IS NULL",
            owner,
        )
        return int(count or 0)

    # --- the person's data -------------------------------------------------------------

    async def export_owner(self, owner: str) -> Any:
        await self.setup()
        rows = await self.db.fetch(
            "SELECT kind, created_at, revoked_at, used_at FROM http_credentials"
            " WHERE owner = $1 AND kind IN ('mind', 'login') ORDER BY created_at",
            owner,
        )
        return _exported(list(rows))

    async def delete_owner(self, owner: str) -> int:
        from core.storage.postgres.database import affected

        await self.setup()
        status = await self.db.execute("DELETE FROM http_credentials WHERE owner = $1", owner)
        return affected(status)


def key_store_for(storage: Storage) -> SQLiteKeyStore | PostgresKeyStore:
    """The key store in ``storage``'s own database, whichever the backend."""
    if storage.backend == "postgres":
        from core.storage.postgres import PostgresStorage

        assert isinstance(storage, PostgresStorage)
        return PostgresKeyStore(storage.db)
    from core.storage.sqlite import SQLiteStorage

    assert isinstance(storage, SQLiteStorage)
    return SQLiteKeyStore(storage.db)
