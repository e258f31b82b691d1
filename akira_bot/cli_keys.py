"""``akira-bot keys ...`` and ``akira-bot admin-link``: credentials of the HTTP side.

Whoever runs these on the host can read the database anyway: they are the trust root.
Secrets are printed once, to stdout, and never logged; only hashes are stored.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from akira_bot.cli_memory import USER
from akira_bot.errors import CLIError
from akira_bot.settings import Settings


def _ttl(value: str) -> timedelta:
    from akira_bot.http.keys import CredentialError, parse_ttl

    try:
        return parse_ttl(value)
    except CredentialError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _secret(settings: Settings) -> str:
    from akira_bot.http.keys import MIN_SECRET_CHARS

    secret = settings.http.jwt_secret
    if secret is None or not secret.get_secret_value():
        raise CLIError("set AKIRA_HTTP__JWT_SECRET first (the server checks tokens with it)")
    value = secret.get_secret_value()
    if len(value) < MIN_SECRET_CHARS:
        raise CLIError(f"AKIRA_HTTP__JWT_SECRET must have at least {MIN_SECRET_CHARS} characters")
    return value


@asynccontextmanager
async def _key_store(settings: Settings) -> AsyncIterator[Any]:
    from akira_bot.http.keystore import key_store_for
    from akira_bot.storage import build_storage

    storage = build_storage(settings)
    await storage.open()
    try:
        keys = key_store_for(storage)
        await keys.setup()
        yield keys
    finally:
        await storage.close()


async def cmd_mind(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.http.keys import new_mind_key
    from akira_bot.http.keystore import digest

    key = new_mind_key()
    async with _key_store(settings) as keys:
        await keys.add("mind", digest(key), args.user)
    print(key)
    return 0


async def cmd_jwt(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.http.keys import issue_jwt

    print(issue_jwt(_secret(settings), args.user, admin=args.admin, ttl=args.ttl))
    return 0


async def cmd_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.http.keys import MIND_KEY_PREFIX, unverified_jti
    from akira_bot.http.keystore import digest

    key: str = args.key.strip()
    async with _key_store(settings) as keys:
        if key.startswith(MIND_KEY_PREFIX):
            if not await keys.revoke(digest(key)):
                raise CLIError("no such Mind Key (or it was revoked already)")
            print("revoked the Mind Key")
            return 0
        token = unverified_jti(key)
        if token is None:
            raise CLIError("not a Mind Key (akm_...) nor a JWT from `akira-bot keys jwt`")
        jti, expires_at = token
        await keys.add("revoked_jwt", digest(jti), "-", expires_at=expires_at)
    print("revoked the token")
    return 0


async def cmd_admin_link(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.http.keys import LOGIN_LINK_TTL, new_login_token
    from akira_bot.http.keystore import digest
    from core.types import utcnow

    _secret(settings)  # the session the link opens is a signed token
    http = settings.http
    if http.public_url:
        base = http.public_url.rstrip("/")
    elif http.port:
        host = f"[{http.host}]" if ":" in http.host else http.host
        base = f"http://{host}:{http.port}"
    else:
        raise CLIError("set AKIRA_HTTP__PORT (or AKIRA_HTTP__PUBLIC_URL): the link points there")
    token = new_login_token()
    async with _key_store(settings) as keys:
        await keys.add("login", digest(token), args.user, expires_at=utcnow() + LOGIN_LINK_TTL)
    minutes = int(LOGIN_LINK_TTL.total_seconds() // 60)
    print(f"{base}/admin/login?token={token}")
    print(f"(opens the admin view once, within {minutes} minutes)")
    return 0


def add_parser(sub: Any) -> None:
    keys = sub.add_parser(
        "keys",
        help="credentials of the HTTP API: Mind Keys (agents) and JWTs (people)",
        description="Credentials for the HTTP memory API (AKIRA_HTTP__PORT). A Mind Key lets "
        "an agent read and write one person's memories (never verify); a JWT is a person, "
        "or with --admin an admin over every mind.",
    )
    actions = keys.add_subparsers(dest="keys_command", metavar="ACTION")

    mind = actions.add_parser(
        "mind",
        help="print a new Mind Key for USER's memories",
        description="Print a new Mind Key for USER's mind (platform:id). Only its hash is "
        "stored: keep it, it cannot be shown again. Revoke it with `akira-bot keys revoke`.",
    )
    mind.add_argument("user", type=USER, metavar="USER", help="platform:id, e.g. telegram:42")
    mind.set_defaults(handler=cmd_mind)

    token = actions.add_parser(
        "jwt",
        help="print a human JWT for USER (or an admin's, --admin)",
        description="Print a JWT (HS256, signed with AKIRA_HTTP__JWT_SECRET) for the person "
        "USER: their own memories, including verifying them. With --admin: every mind, and "
        "the admin view.",
    )
    token.add_argument("user", type=USER, metavar="USER", help="platform:id of the person")
    token.add_argument("--admin", action="store_true", help="an admin over every mind")
    token.add_argument(
        "--ttl", type=_ttl, default=timedelta(hours=1), help="lifetime: 30m, 1h (default), 7d"
    )
    token.set_defaults(handler=cmd_jwt)

    revoke = actions.add_parser(
        "revoke",
        help="revoke a Mind Key or a JWT",
        description="Revoke a Mind Key (akm_...) or a JWT before it expires.",
    )
    revoke.add_argument("key", metavar="KEY", help="the Mind Key or JWT")
    revoke.set_defaults(handler=cmd_revoke)

    link = sub.add_parser(
        "admin-link",
        help="print a one-time login link to the admin web view",
        description="Print a link that opens the admin view as USER (an admin, platform:id) "
        "once, within 15 minutes. Needs AKIRA_HTTP__PORT and AKIRA_HTTP__JWT_SECRET.",
    )
    link.add_argument("user", type=USER, metavar="USER", help="the admin, platform:id")
    link.set_defaults(handler=cmd_admin_link)
