"""Credentials of the HTTP side: Mind Keys, human JWTs, one-time admin login links.

* A **Mind Key** (``akm_...``) lets an agent read and write one person's structured
  memories (their "mind", ``platform:id``). Only its SHA-256 is stored; revoking it marks
  the row. Writes with it are the agent's: unverified, never verifying.
* A **human JWT** (HS256, signed with ``AKIRA_HTTP__JWT_SECRET``) is a person: the user
  themself (``sub``) or, with ``adm``, an admin over every mind. Only people verify.
  A token can be revoked by its ``jti`` before it expires.
* A **login link** token is single-use and short-lived: ``akira-bot admin-link USER``
  prints it; opening it sets the admin view's session (an admin JWT in a cookie).

Where they are kept: :mod:`akira_bot.http.keystore`.
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt

from core.storage import from_ts
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


class CredentialError(ValueError):
    """A key or token that cannot be used; the message is safe to show (no secret)."""


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
