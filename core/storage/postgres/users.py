"""PostgreSQL users: nothing of a user is trusted from memory (another process may serve
the person next); each profile change is a compare-and-set of the profile as last seen
here, read again only when another write got there first."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from core.storage.api import UserStore
from core.storage.postgres.changes import CHANNEL, notify
from core.storage.postgres.database import PgDatabase, affected
from core.storage.postgres.pending import PendingWrites
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
        db.pending_hooks.append(self._pending_written)

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
        await self.db.flush_pending(key)
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
        await self.db.flush_pending(key)
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
        more than once and must only change the profile it is given. With ``wait=False``
        while this process holds the person's lock, the compare-and-set rides on the
        lock's release (core.storage.postgres.pending); otherwise it is sent now."""
        if not wait and not announce and self.db.defers(key):
            return await self._defer(key, edit)
        await self.db.flush_pending(key)
        before: str | None = self._profiles.pop(key, None)
        while True:
            if before is None:
                before = await self._stored_profile(key)
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

    async def _stored_profile(self, key: str) -> str:
        """The person's profile as stored (KeyError: no such person)."""
        profile: str | None = await self.db.fetchval(
            "SELECT profile FROM users WHERE key = $1", key
        )
        if profile is None:
            raise KeyError(key)
        return profile

    async def _defer(self, key: str, edit: Callable[[dict[str, Any]], T]) -> T:
        pending = self.db.pending.get(key)
        before = pending.after if pending is not None and pending.after is not None else None
        if before is None:
            before = self._profiles.get(key)
        if before is None:
            before = await self._stored_profile(key)
        profile = json.loads(before)
        result = edit(profile)
        pending = self.db.pending_for(key)
        if pending.before is None:
            pending.before = before
        pending.after = json.dumps(profile, ensure_ascii=False)
        pending.edits.append(edit)
        self._seen(key, pending.after)
        return result

    async def _pending_written(
        self, key: str, pending: PendingWrites, row: Mapping[str, Any] | None
    ) -> None:
        if pending.after is None:
            return
        if row is None:
            self._profiles.pop(key, None)  # not stored: read it next time
            return
        if row["swapped"]:
            return
        # Another write changed the profile first (an import, a command elsewhere): the
        # edits again, on the stored profile.
        self._profiles.pop(key, None)
        edits = pending.edits

        def again(profile: dict[str, Any]) -> None:
            for edit in edits:
                edit(profile)

        try:
            await self.change_profile_with(key, again)
        except KeyError:
            pass  # forgotten meanwhile: nothing to change

    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        if not wait and self.db.defers(key):
            self.db.pending_for(key).language = language
            return
        await self.db.flush_pending(key)
        await self.db.execute("UPDATE users SET language = $2 WHERE key = $1", key, language)

    async def settle(self) -> None:
        await self.db.flush_pending()

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
        self.db.pending.pop(owner, None)  # nothing of them is written after this
        async with self.db.transaction() as conn:
            removed = affected(await conn.execute("DELETE FROM users WHERE key = $1", owner))
            await notify(conn, owner)
        return removed
