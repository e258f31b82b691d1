"""Who is calling: a Mind Key (an agent of one mind) or a human JWT (a person, or an
admin over every mind), from ``Authorization: Bearer ...``.

Refusals say only what is wrong with the credential, never whether a mind or a memory
exists: a credential for one mind asking for another's memory gets the same 404 as for
a memory that does not exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from akira_bot.http.keys import MIND_KEY_PREFIX, CredentialError, decode_jwt
from akira_bot.http.keystore import KeyStore, digest
from akira_bot.http.schemas import FieldError
from core.types import parse_user_key

SESSION_COOKIE = "akira_admin"


@dataclass(frozen=True, slots=True)
class Principal:
    kind: Literal["agent", "human"]
    user: str  # the mind of a Mind Key; the person of a JWT
    admin: bool = False

    @property
    def human(self) -> bool:
        return self.kind == "human"


class Unauthorized(web.HTTPUnauthorized):
    def __init__(self, message: str) -> None:
        super().__init__(
            text=json.dumps({"error": message}),
            content_type="application/json",
            headers={"WWW-Authenticate": 'Bearer realm="akira"'},
        )


class Forbidden(web.HTTPForbidden):
    def __init__(self, message: str) -> None:
        super().__init__(text=json.dumps({"error": message}), content_type="application/json")


class NotFound(web.HTTPNotFound):
    def __init__(self) -> None:
        super().__init__(text='{"error": "not found"}', content_type="application/json")


class Authenticator:
    def __init__(self, keys: KeyStore, jwt_secret: str | None) -> None:
        self.keys = keys
        self.jwt_secret = jwt_secret

    async def principal(self, request: web.Request) -> Principal:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("send Authorization: Bearer <Mind Key or JWT>")
        if token.startswith(MIND_KEY_PREFIX):
            mind = await self.keys.mind_of(digest(token))
            if mind is None:
                raise Unauthorized("unknown or revoked Mind Key")
            return Principal("agent", mind)
        return await self.human(token)

    async def human(self, token: str) -> Principal:
        if not self.jwt_secret:
            raise Unauthorized("JWTs are off here (no AKIRA_HTTP__JWT_SECRET)")
        try:
            claims = decode_jwt(self.jwt_secret, token)
        except CredentialError as exc:
            raise Unauthorized(str(exc)) from None
        if await self.keys.is_revoked_jwt(claims.jti):
            raise Unauthorized("the token was revoked")
        return Principal("human", claims.user, claims.admin)

    async def admin_session(self, request: web.Request) -> Principal | None:
        """The admin view's caller: an admin JWT as Bearer or in the session cookie."""
        token = request.cookies.get(SESSION_COOKIE, "")
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
        if not token or token.startswith(MIND_KEY_PREFIX):
            return None
        try:
            principal = await self.human(token)
        except web.HTTPUnauthorized:
            return None
        return principal if principal.admin else None


def mind_for_listing(principal: Principal, request: web.Request) -> str:
    """The mind a collection request (list, search, recall...) reads. A Mind Key or a
    person's JWT reads their own mind; ``?mind=`` naming another is answered as if that
    mind were empty of anything for them: 404. An admin names the mind with ``?mind=``."""
    asked = request.query.get("mind")
    if principal.admin:
        if not asked:
            raise FieldError("mind", "an admin token names the mind: ?mind=platform:id")
        try:
            parse_user_key(asked)
        except ValueError:
            raise FieldError("mind", "mind is platform:id, e.g. telegram:42") from None
        return asked
    if asked is not None and asked != principal.user:
        raise NotFound()
    return principal.user
