"""SQLite users (schema version 1): each person's row, kept in memory for the process
serving them, written in group commits."""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar

import aiosqlite

from core.background import BackgroundTasks
from core.storage.api import UserStore
from core.storage.database import Database
from core.storage.loading import LoadGuard
from core.storage.owner_changes import announced, record_change_in
from core.storage.records import UserRecord, to_ts, user_from_row, user_to_dict
from core.storage.sqlite_rows import (
    USER_COLUMNS,
    set_language,
    swap_profile,
    upsert_user,
    user_row,
)
from core.types import parse_user_key, utcnow

T = TypeVar("T")

LAST_SEEN_PRECISION_S = 60.0  # users.last_seen_at is rewritten at most this often
MAX_KEPT_USERS = 20_000  # users' rows kept in memory
# Writes in flight that nobody waits for (``wait=False``); more wait for a free place.
SETTLING_LIMIT = 10_000


class SQLiteUserStore(UserStore):
    def __init__(self, db: Database) -> None:
        self.db = db
        # Users' rows as stored (column -> value), least recently used first: every
        # message asks for its person. Every write to the table goes through this class,
        # which keeps them up to date.
        self._rows: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._loads = LoadGuard()  # a row read while a write landed may be stale: not kept
        # Profile changes made without waiting for their commit (wait=False), by person:
        # the person's next change waits for theirs. ``settle`` waits for them all.
        self._settling = BackgroundTasks(limit=SETTLING_LIMIT)
        self._settling_by_key: dict[str, asyncio.Task[None]] = {}

    @staticmethod
    def _from_row(row: aiosqlite.Row | dict[str, Any]) -> UserRecord:
        return user_from_row(row)

    def _keep(self, key: str, row: aiosqlite.Row | dict[str, Any]) -> dict[str, Any]:
        kept = user_row(row)
        self._rows[key] = kept
        self._rows.move_to_end(key)
        while len(self._rows) > MAX_KEPT_USERS:
            self._rows.popitem(last=False)
        return kept

    def _written(self, key: str, **values: Any) -> None:
        """A write to ``key``'s row committed: the kept row takes its new values."""
        self._loads.wrote(key)
        kept = self._rows.get(key)
        if kept is not None:
            kept.update(values)

    async def _row(self, key: str) -> dict[str, Any] | None:
        kept = self._rows.get(key)
        if kept is not None:
            self._rows.move_to_end(key)
            return kept
        row, raced = await self._loads.load(
            key,
            self.db.fetchone(
                f"SELECT {USER_COLUMNS} FROM users WHERE key = ?", (key,), lookup=True
            ),
        )
        if row is None:
            return None
        if raced:
            return user_row(row)
        return self._keep(key, row)

    async def ensure(
        self, key: str, *, display_name: str | None = None, seen_at: datetime | None = None
    ) -> UserRecord:
        platform, external_id = parse_user_key(key)
        seen = to_ts(seen_at or utcnow())
        # Every message calls this: a known person whose name is unchanged and who was
        # seen a moment ago costs no write (and, once kept, no read).
        await self._settled(key)  # the row as last changed
        row = await self._row(key)
        if (
            row is not None
            and (display_name is None or display_name == row["display_name"])
            and 0 <= seen - row["last_seen_at"] < LAST_SEEN_PRECISION_S
        ):
            return self._from_row(row)

        upsert = functools.partial(
            upsert_user,
            key=key,
            platform=platform,
            external_id=external_id,
            display_name=display_name,
            seen=seen,
        )
        if row is not None:
            # A known person's new name or time seen need not hold their message up: the
            # row is what the upsert makes of it, and it commits in the background (their
            # next read waits for it). A new person's row must exist before their message.
            self._behind(key, self._upsert_later(key, upsert), "last seen")
            return self._from_row(
                {
                    **row,
                    "display_name": row["display_name"] if display_name is None else display_name,
                    "last_seen_at": max(row["last_seen_at"], seen),
                }
            )
        # Upsert and read back in one round trip.
        self._rows.pop(key, None)
        stored = await self.db.run(upsert)
        assert stored is not None
        self._loads.wrote(key)
        return self._from_row(self._keep(key, stored))

    async def _upsert_later(
        self, key: str, upsert: Callable[[sqlite3.Connection], dict[str, Any]]
    ) -> None:
        try:
            stored = await self.db.run(upsert)
        except BaseException:
            self._rows.pop(key, None)  # committed or not: read it again
            raise
        self._loads.wrote(key)
        self._keep(key, stored)

    async def get(self, key: str) -> UserRecord | None:
        await self._settled(key)  # what was changed, committed
        row = await self._row(key)
        return self._from_row(row) if row else None

    async def change_profile_with(
        self,
        key: str,
        edit: Callable[[dict[str, Any]], T],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> T:
        """``edit(profile)`` changes the profile in place; returns what it returns.

        The edit is made here, on the row as kept or read, and stored only if the profile
        is still the one it started from (compare and set, in the group commit); when
        another write got there first, the row is read again and the edit made again. So
        ``edit`` must be quick, must not await, and may run more than once: it must only
        change the profile it is given. (Made in the write, it would tie the write to this
        process: the writes may run in another, see core.storage.writer_process.)

        ``announce``: record the change for the other processes sharing the database, in
        the same transaction (core.storage.owner_changes), so they drop the row they keep.
        For writes that do not come from the process serving the person (an import); the
        engine's own updates need not: only that process keeps this person's row fresh
        for reading, and a write from anywhere else finds the profile changed (compare and
        set) and reads it again.

        ``wait=False``: return once the edit is made and its write queued, not committed
        (a message's emotional state: the reply needs the new state, not its commit).
        The write then settles in the background; if another write got there first, the
        edit is made again on the row as stored (what was returned came from the row as
        kept). The person's next change, or read, waits for it: they stay in order."""
        await self._settled(key)
        return await self._change(key, edit, announce=announce, wait=wait)

    async def _change(
        self, key: str, edit: Callable[[dict[str, Any]], T], *, announce: bool, wait: bool
    ) -> T:
        while True:
            row = await self._row(key)
            if row is None:
                raise KeyError(key)
            before: str = row["profile"]
            profile = json.loads(before)
            result = edit(profile)
            after = json.dumps(profile, ensure_ascii=False)
            write = self.db.run(
                announced(
                    functools.partial(swap_profile, key=key, before=before, after=after),
                    key,
                    announce=announce,
                )
            )
            if not wait:
                self._behind(key, self._swap_later(key, write, after, edit, announce), "profile")
                return result
            if await self._swapped(key, write, after):
                return result

    async def _swapped(self, key: str, write: Awaitable[bool], after: str) -> bool:
        """Whether the compare-and-set ``write`` stored ``after``; else (changed
        meanwhile, or gone) the kept row is dropped, to be read again."""
        try:
            swapped = await write
        except BaseException:
            self._rows.pop(key, None)  # committed or not: read it again
            raise
        if swapped:
            self._written(key, profile=after)
        else:
            self._rows.pop(key, None)
        return swapped

    async def _swap_later(
        self,
        key: str,
        write: Awaitable[bool],
        after: str,
        edit: Callable[[dict[str, Any]], Any],
        announce: bool,
    ) -> None:
        if not await self._swapped(key, write, after):
            await self._change(key, edit, announce=announce, wait=True)  # on the stored row

    def _behind(self, key: str, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``work`` (a write of ``key``'s row) in the background, after the person's
        earlier such writes: one chain a person, awaited by their next change or read."""
        previous = self._settling_by_key.get(key)

        async def in_turn() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await work

        task = self._settling.spawn(in_turn(), name=f"{what} of {key}")
        self._settling_by_key[key] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._settling_by_key.get(key) is done:
                del self._settling_by_key[key]

        task.add_done_callback(forget)

    async def _settled(self, key: str) -> None:
        """Wait for ``key``'s background writes (their failures were logged)."""
        last = self._settling_by_key.get(key)
        if last is not None:
            await asyncio.wait([last])

    async def settle(self) -> None:
        """Wait for the writes made with ``wait=False`` to be committed (or to fail)."""
        await self._settling.wait_all()

    async def set_language(self, key: str, language: str, *, wait: bool = True) -> None:
        """``wait=False``: the write commits in the background (see change_profile_with)."""
        if not wait:
            self._behind(key, self._store_language(key, language), "language")
            return
        await self._settled(key)
        await self._store_language(key, language)

    async def _store_language(self, key: str, language: str) -> None:
        try:
            await self.db.run(functools.partial(set_language, key=key, language=language))
        except BaseException:
            self._rows.pop(key, None)
            raise
        self._written(key, language=language)

    async def count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM users")
        return int(row[0]) if row else 0

    async def recently_seen(self, limit: int) -> list[tuple[str, str | None, float]]:
        rows = await self.db.fetchall(
            "SELECT key, display_name, last_seen_at FROM users ORDER BY last_seen_at DESC LIMIT ?",
            (limit,),
        )
        return [(r[0], r[1], float(r[2])) for r in rows]

    async def export_owner(self, owner: str) -> Any:
        user = await self.get(owner)
        return None if user is None else user_to_dict(user)

    async def delete_owner(self, owner: str) -> int:
        await self._settled(owner)  # a write still to come would bring the row back
        self._rows.pop(owner, None)
        self._loads.wrote(owner)
        try:
            async with self.db.transaction() as conn:
                cur = await conn.execute("DELETE FROM users WHERE key = ?", (owner,))
                await record_change_in(conn, owner)
                return cur.rowcount or 0
        finally:
            self._rows.pop(owner, None)

    def drop_cached(self, owner: str | None) -> None:
        """The kept row of ``owner`` (None: every kept row) is read again when asked for;
        a read of it in flight is not kept."""
        if owner is None:
            self._rows.clear()
        else:
            self._rows.pop(owner, None)
        self._loads.wrote(owner)
