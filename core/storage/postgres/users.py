"""PostgreSQL users: nothing of a user is trusted from memory (another process may serve
the person next); each profile change is a compare-and-set of the profile as last seen
here, read again only when another write got there first."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from core.storage.api import UserStore
from core.storage.postgres.changes import CHANNEL, notify
from core.storage.postgres.database import PgDatabase, affected
from core.storage.records import USER_COLUMNS, UserRecord, to_ts, user_from_row, user_to_dict
from core.types import parse_user_key, utcnow

T = TypeVar("T")


# Profiles remembered as last read or written, for this many people at most.
MAX_KEPT_PROFILES = 10_000


class PgUserStore(UserStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        # The profile text each person had when this process last read or wrote it: the
        # first guess of a compare-and-set (a wrong guess costs the read it saves).
        self._profiles: OrderedDict[str, str] = OrderedDict()

    def _seen(self, key: str, profile: str) -> None:
        self._profiles[key] = profile
        self._profiles.move_to_end(key)
        if len(self._profiles) > MAX_KEPT_PROFILES:
            self._profiles.popitem(last=False)

    def drop_cached(self, owner: str | None) -> None:
        if owner is None:
            self._profiles.clear()
            self.db.granted_users.clear()
        else:
            self._profiles.pop(owner, None)
            self.db.granted_users.pop(owner, None)

    async def ensure(
        self, key: str, *, display_name: str | None = None, seen_at: datetime | None = None
    ) -> UserRecord:
        platform, external_id = parse_user_key(key)
        seen = to_ts(seen_at or utcnow())
        granted = self.db.granted_users.pop(key, None)
        if (
            granted is not None
            and display_name in (None, granted["display_name"])
            and granted["last_seen_at"] >= seen
        ):
            # The person's lock was just granted with this message's time stored as the
            # time last seen (core.storage.postgres.locks): that row is this one.
            self._seen(key, granted["profile"])
            return user_from_row(granted)
        row = await self.db.fetchrow(
            "INSERT INTO users(key, platform, external_id, display_name, created_at,"
            " last_seen_at) VALUES ($1, $2, $3, $4, $5, $5)"
            " ON CONFLICT (key) DO UPDATE SET"
            "  display_name = COALESCE(EXCLUDED.display_name, users.display_name),"
            "  last_seen_at = GREATEST(users.last_seen_at, EXCLUDED.last_seen_at)"
            f" RETURNING {USER_COLUMNS}",
            key,
            platform,
            external_id,
            display_name,
            seen,
        )
        assert row is not None
        self._seen(key, row["profile"])
        return user_from_row(row)

    async def get(self, key: str) -> UserRecord | None:
        row = await self.db.fetchrow(f"SELECT {USER_COLUMNS} FROM users WHERE key = $1", key)
        if row is None:
            return None
        self._seen(key, row["profile"])
        return user_from_row(row)

    async def change_profile_with(
        self,
        key: str,
        edit: Callable[[dict[str, Any]], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """``edit(profile)`` on the stored profile: the profile as last seen here (else
        read), edited here, stored only if it is still that profile (compare and set);
        when another write got there first, read and edited again. So ``edit`` may run
        more than once and must only change the profile it is given. Every change waits
        for its commit (``wait`` is accepted for the protocol's sake)."""
        before: str | None = self._profiles.pop(key, None)
        while True:
            if before is None:
                before = await self.db.fetchval("SELECT profile FROM users WHERE key = $1", key)
            if before is None:
                raise KeyError(key)
            profile = json.loads(before)
            result = edit(profile)
            swapped = await self.db.fetchval(
                "WITH swapped AS (UPDATE users SET profile = $3 WHERE key = $1 AND profile = $2"
                " RETURNING 1), said AS (SELECT pg_notify($5, $1) FROM swapped WHERE $4)"
                " SELECT count(*) FROM swapped, (SELECT count(*) FROM said) AS s",
                key,
                before,
                after := json.dumps(profile, ensure_ascii=False),
                announce,
                CHANNEL,
            )
            if swapped:
                self._seen(key, after)
                return result
            before = None

    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        await self.db.execute("UPDATE users SET language = $2 WHERE key = $1", key, language)

    async def count(self) -> int:
        return int(await self.db.fetchval("SELECT count(*) FROM users"))

    async def recently_seen(self, limit: int) -> list[tuple[str, str | None, float]]:
        rows = await self.db.fetch(
            "SELECT key, display_name, last_seen_at FROM users ORDER BY last_seen_at DESC LIMIT $1",
            limit,
        )
        return [(r[0], r[1], float(r[2])) for r in rows]

    async def export_owner(self, owner: str) -> Any:
        user = await self.get(owner)
        return None if user is None else user_to_dict(user)

    async def delete_owner(self, owner: str) -> int:
        self.drop_cached(owner)
        async with self.db.transaction() as conn:
            removed = affected(await conn.execute("DELETE FROM users WHERE key = $1", owner))
            await notify(conn, owner)
        return removed
