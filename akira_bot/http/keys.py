"""Credentials of the HTTP side: Mind Keys, human JWTs, one-time admin login links.

* A **Mind Key** (``akm_...``) lets an agent read and write one person's structured
  memories (their "mind", ``platform:id``). Only its SHA-256 is stored; revoking it marks
  the row. Writes with it are the agent's: unverified, never verifying.
* A **human JWT** (HS256, signed with ``AKIRA_HTTP__JWT_SECRET``) is a person: the user
  themself (``sub``) or, with ``adm``, an admin over every mind. Only people verify.
  A token can be revoked by its ``jti`` before it expires.
* A **login link** token is single-use and short-lived: ``akira-bot admin-link USER``
  prints it; opening it sets the admin view's session (an admin JWT in a cookie).

The store is a small protocol with a SQLite implementation on the bot's own database
(one table, created if missing, beside the schema the storage layer migrates). A
PostgreSQL version needs the same table (``REAL`` -> ``DOUBLE PRECISION``) and
``ON CONFLICT DO NOTHING`` for the insert; nothing else is SQLite-specific.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

import jwt

from core.storage import Database, from_ts, to_ts
from core.types import parse_user_key, utcnow

MIND_KEY_PREFIX = "akm_"
LOGIN_TOKEN_PREFIX = "akl_"
JWT_ISSUER = "akira-bot"
JWT_ALGORITHM = "HS256"
DEFAULT_JWT_TTL = timedelta(hours=1)
MAX_JWT_TTL = timedelta(days=366)
LOGIN_LINK_TTL = timedelta(minutes=15)
# HS256 keys shorter than the hash (32 bytes) are weak; PyJWT warns below that too.
MIN_SECRET_CHARS = 32

KeyKind = Literal["mind", "login", "revoked_jwt"]


class CredentialError(ValueError):
    """A key or token that cannot be used; the message is safe to show (no secret)."""


def digest(secret: str) -> str:
    """What is stored instead of a secret. Keys are random (256 bits), so a plain hash is
    enough: there is nothing to guess that a slow hash would protect."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_mind_key() -> str:
    return MIND_KEY_PREFIX + secrets.token_urlsafe(32)


def new_login_token() -> str:
    return LOGIN_TOKEN_PREFIX + secrets.token_urlsafe(32)


_TTL = re.compile(r"^\s*(\d{1,7})\s*([smhdw]?)\s*$")
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_ttl(text: str) -> timedelta:
    """``"90"``, ``"30m"``, ``"1h"``, ``"7d"``, ``"2w"`` -> a positive timedelta."""
    match = _TTL.match(text)
    if match is None:
        raise CredentialError(f"not a duration: {text[:20]!r} (use e.g. 30m, 1h, 7d)")
    ttl = timedelta(seconds=int(match.group(1)) * _TTL_UNITS[match.group(2)])
    if ttl <= timedelta(0):
        raise CredentialError("a duration must be more than zero")
    if ttl > MAX_JWT_TTL:
        raise CredentialError("a token lives at most 366 days")
    return ttl


@dataclass(frozen=True, slots=True)
class HumanToken:
    """A verified JWT's claims."""

    user: str  # platform:id of the person
    admin: bool
    jti: str
    expires_at: datetime


def issue_jwt(
    secret: str, user: str, *, admin: bool = False, ttl: timedelta = DEFAULT_JWT_TTL
) -> str:
    parse_user_key(user)
    if len(secret) < MIN_SECRET_CHARS:
        raise CredentialError(
            f"AKIRA_HTTP__JWT_SECRET must have at least {MIN_SECRET_CHARS} characters"
        )
    now = utcnow()
    claims: dict[str, Any] = {
        "iss": JWT_ISSUER,
        "sub": user,
        "adm": admin,
        "iat": int(now.timestamp()),
        "exp": int((now + ttl).timestamp()),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, secret, algorithm=JWT_ALGORITHM)


def decode_jwt(secret: str, token: str) -> HumanToken:
    """The claims of a token we signed; CredentialError for anything else (bad signature,
    expired, another algorithm, missing claims)."""
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[JWT_ALGORITHM],
            issuer=JWT_ISSUER,
            options={"require": ["exp", "iat", "sub", "jti", "iss"]},
        )
    except jwt.ExpiredSignatureError:
        raise CredentialError("the token has expired") from None
    except jwt.PyJWTError:
        raise CredentialError("the token is not valid") from None
    user, jti, admin = claims.get("sub"), claims.get("jti"), claims.get("adm", False)
    if not isinstance(user, str) or not isinstance(jti, str) or not isinstance(admin, bool):
        raise CredentialError("the token is not valid")
    try:
        parse_user_key(user)
    except ValueError:
        raise CredentialError("the token is not valid") from None
    return HumanToken(user, admin, jti, from_ts(float(claims["exp"])))


def unverified_jti(token: str) -> tuple[str, datetime] | None:
    """The id and expiry of a JWT whose signature cannot be checked here (``keys revoke``
    without the secret is still useful: revoking never grants anything)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    jti, exp = claims.get("jti"), claims.get("exp")
    if not isinstance(jti, str) or not isinstance(exp, int | float):
        return None
    return jti, from_ts(float(exp))


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


class SQLiteKeyStore:
    """:class:`KeyStore` in the bot's SQLite database (table ``http_credentials``)."""

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
