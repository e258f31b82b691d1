"""One person's messages handled by one process at a time, in the platform's order, when
several bot processes share a PostgreSQL database (webhook workers behind a load
balancer: a person's next message may reach another process while the first is being
answered).

Why a lock and not a queue: the processes already share PostgreSQL, whose advisory locks
are exactly "one holder per key, released when the holder's session ends" (a process
killed with ``kill -9`` lets go of its locks as its connection closes). A queue would need a consumer per person, redelivery after a crash,
and would move the reply away from the process holding the platform's request. The lock
costs one round trip when nobody else serves the person.

Messages that reach two processes at almost the same moment reach PostgreSQL in either
order, so the lock alone could let the later one first. So each message first registers
its arrival (``person_arrivals``: the person, the platform's time and message number) on
any pooled connection, before it waits for anything; the holder checks, under the lock, that no
earlier message of the person is still waiting, and if one is, lets go and tries again a
moment later. Waiters try again every few milliseconds (doubling up to 50 ms) rather
than wait in PostgreSQL's queue on a pooled connection: waiters holding the pool left the
holder none to finish with (seen: a load run that hung).

Arrivals are registered on a connection of their own, every arrival asked for while the
last batch was on its way in one statement: on a pooled connection a registration waited
for a free one behind the work of everyone being served, and the later message of a
person, registered meanwhile in the other process, went first. A registered row names
that connection's server process; a bot process killed with ``kill -9`` loses it, and its
rows are ignored at once (its messages were never answered and must not hold the person
up). Rows older than :data:`ARRIVAL_TTL_S` are ignored too, whoever registered them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime
from typing import TypeVar

import asyncpg

from core.storage.errors import StorageError
from core.storage.postgres.database import LOCK_NAMESPACE, PgDatabase, translated
from core.storage.postgres.pending import writes
from core.storage.postgres.profiles import KEPT_COUNTERS
from core.storage.records import USER_COLUMN_NAMES, to_ts

T = TypeVar("T")
log = logging.getLogger(__name__)

ARRIVAL_TTL_S = 60.0
USER_ROW = ", ".join(f"users.{name}" for name in USER_COLUMN_NAMES)
# How soon a waiting message tries the person's lock again, doubling up to the most.
RETRY_S = 0.005
MAX_RETRY_S = 0.05
_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StorageError)

# Registers a batch of arrivals, named by the registering connection's server process.
_ARRIVE = (
    "INSERT INTO person_arrivals(owner, sent_at, message_no, pid)"
    " SELECT o, s, n, pg_backend_pid() FROM unnest($1::text[], $2::float8[], $3::numeric[])"
    " AS a(o, s, n) RETURNING owner, sent_at, message_no, arrival"
)
# Tries the person's lock: NULL when another process holds it; else whether no earlier
# message of the person is still waiting (registered by a process that is still there).
# Once first, the message's arrival is the time the person was last seen, and their user
# row comes back with it, node version included: an UPDATE acts on the row's latest
# committed version, whatever the statement's snapshot, so it holds what the previous
# holder of the lock committed (core.storage.postgres.users.ensure takes the row from
# here instead of asking again). The person's learned-profile counters come too when
# their counters version is not the one this process keeps them at (``$6``; -1: none
# kept), read by a VOLATILE function with a snapshot taken after that UPDATE
# (core.storage.postgres.profiles).
_TRY_FIRST = f"""
WITH l AS (
    SELECT CASE WHEN pg_try_advisory_lock({LOCK_NAMESPACE}, $5) THEN NOT EXISTS (
        SELECT 1 FROM person_arrivals a
        WHERE owner = $1 AND (sent_at, message_no, arrival) < ($2, $3, $4)
          AND at > clock_timestamp() - make_interval(secs => {ARRIVAL_TTL_S})
          AND (a.pid IS NULL OR EXISTS (SELECT 1 FROM pg_stat_get_activity(a.pid))))
    END AS first OFFSET 0),
seen AS (
    UPDATE users SET last_seen_at = GREATEST(users.last_seen_at, $2) FROM l
    WHERE l.first AND users.key = $1
    RETURNING users.node_version, users.counters_version, {USER_ROW})
SELECT l.first, seen.*, CASE WHEN seen.counters_version IS DISTINCT FROM $6
    THEN akira_counters($1, {KEPT_COUNTERS}) END AS counters
FROM l LEFT JOIN seen ON true
"""
_UNLOCK = f"SELECT pg_advisory_unlock({LOCK_NAMESPACE}, $1)"
_FORGET = "DELETE FROM person_arrivals WHERE owner = $1 AND arrival = $2"
_DONE = (
    "WITH gone AS (DELETE FROM person_arrivals WHERE owner = $1 AND arrival = $2)"
    f" SELECT pg_advisory_unlock({LOCK_NAMESPACE}, $3)"
)
# The same with the person's pending writes (core.storage.postgres.pending), written
# before the lock is let go (the unlock reads what they wrote, so it runs after them).
_DONE_WRITING = (
    "WITH gone AS (DELETE FROM person_arrivals WHERE owner = $1 AND arrival = $2),"
    f" {writes(4)} SELECT p.swapped, p.node_version, p.emotions, p.counters_version,"
    f" pg_advisory_unlock({LOCK_NAMESPACE}, $3) AS unlocked"
    " FROM (SELECT 1) AS one LEFT JOIN person p ON true"
)


def person_key(owner: str) -> int:
    """The second int of the person's lock key (collisions only serialise two people)."""
    value = int.from_bytes(hashlib.blake2b(owner.encode(), digest_size=4).digest(), "big")
    return value - (1 << 31)  # a signed int4; 0 is the migration lock's, rarely hit


def message_number(message_id: str | None) -> int:
    """The platform's message number (Telegram's message id, a Discord snowflake): the
    order of two messages sent within the same second; 0 when it is not a number."""
    if message_id and message_id.isdigit() and len(message_id) < 30:
        return int(message_id)
    return 0


async def _to_the_end(step: Awaitable[T]) -> T:
    """Await a step of the lock that a cancellation must not cut short: whether the
    statement took or gave back a count of the lock decides what the message lets go
    of at the end, so a cancelled message waits for it (a round trip), then is cancelled."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task
        raise


SESSIONS = 4  # connections this process holds people's locks on (a person: always one)


class _Session:
    """A connection kept for locks, one query at a time."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.conn: asyncpg.Connection | None = None
        self.use = asyncio.Lock()

    async def fetchrow(self, sql: str, *args: object) -> asyncpg.Record:
        async with self.use:
            if self.conn is None or self.conn.is_closed():
                # A new session: whatever the old one held was released with it. What it
                # writes is arrivals (an unlogged table: gone with a crash anyway) and the
                # time a person was last seen, which SQLite too commits in the background
                # (a crash may lose the latest, never a message): its commits need not
                # wait for the disk, and the lock's statement does not wait for one.
                self.conn = await self.db.connect(wait_for_flush=False)
            with translated():
                row = await self.conn.fetchrow(sql, *args)
        assert row is not None
        return row

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        async with self.use:
            if self.conn is None or self.conn.is_closed():
                self.conn = await self.db.connect(wait_for_flush=False)
            with translated():
                rows: list[asyncpg.Record] = await self.conn.fetch(sql, *args)
        return rows

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.terminate()
            self.conn = None

    async def close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()


class _Arrivals:
    """Registers arrivals on a connection of its own: those asked for while a batch is
    on its way go together in the next statement."""

    def __init__(self, db: PgDatabase) -> None:
        self.session = _Session(db)
        self._pending: list[tuple[str, float, int, asyncio.Future[int]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def register(self, owner: str, when: float, number: int) -> int:
        """The arrival's number, once it is stored."""
        registered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((owner, when, number, registered))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send())
        return await registered

    async def _send(self) -> None:
        batch: list[tuple[str, float, int, asyncio.Future[int]]] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    rows = await self.session.fetch(
                        _ARRIVE,
                        [owner for owner, *_ in batch],
                        [when for _, when, *_ in batch],
                        [number for _, _, number, _ in batch],
                    )
                except Exception as exc:
                    self.session.drop()  # a new connection (and server process) next time
                    for *_, registered in batch:
                        if not registered.done():
                            registered.set_exception(exc)
                    continue
                numbers: dict[tuple[str, float, int], list[int]] = {}
                for row in rows:
                    numbers.setdefault((row[0], float(row[1]), int(row[2])), []).append(row[3])
                for owner, when, number, registered in batch:
                    if not registered.done():
                        registered.set_result(int(numbers[(owner, when, number)].pop()))
        finally:
            self._sending = None
            for *_, registered in (*batch, *self._pending):
                if not registered.done():  # cancelled (the storage is closing)
                    registered.set_exception(StorageError("the storage is closing"))


class _Here:
    """A person's messages in this process: only the earliest of them asks PostgreSQL
    for the person's lock, one at a time. Without this, a message waiting behind one of
    the person's own messages in the same process polled the lock (two round trips a
    try: the lock is counted up on the shared session, then given back, an earlier
    arrival waiting) for as long as the other was answered; its turn here comes the
    moment the other is done, without a poll's pause."""

    def __init__(self) -> None:
        self.waiting: set[tuple[float, int, int]] = set()
        self.asking = False  # one of them is trying, or holds, the person's lock
        self._wakers: list[asyncio.Future[None]] = []

    async def turn(self, mine: tuple[float, int, int]) -> None:
        """Wait until ``mine`` is the earliest waiting and nobody here asks; then ask."""
        while self.asking or min(self.waiting) != mine:
            woken = asyncio.get_running_loop().create_future()
            self._wakers.append(woken)
            await woken
        self.asking = True

    def step_aside(self) -> None:
        self.asking = False
        wakers, self._wakers = self._wakers, []
        for woken in wakers:
            if not woken.done():
                woken.set_result(None)


class PersonLocks:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._sessions = [_Session(db) for _ in range(SESSIONS)]
        self._arrivals = _Arrivals(db)
        self._here: dict[str, _Here] = {}
        self.waits = 0  # times another process was serving the person (observability)
        self.yielded = 0  # times an earlier message of the person was let go first

    @contextlib.asynccontextmanager
    async def serving(
        self, owner: str, *, sent_at: datetime | None = None, message_id: str | None = None
    ) -> AsyncIterator[None]:
        key = person_key(owner)
        session = self._sessions[key % SESSIONS]
        when = to_ts(sent_at) if sent_at is not None else time.time()
        number = message_number(message_id)
        arrival = await self._arrivals.register(owner, when, number)
        deadline = time.monotonic() + ARRIVAL_TTL_S
        granted = False
        # Whether this message holds a count of the person's lock: the person's messages
        # in this process share a session, where advisory locks count up, so a message
        # gives back only a count it took (one given up while waiting took and gave
        # back its own; letting go again would give back the holder's).
        held = False

        async def try_first() -> asyncpg.Record:
            nonlocal held
            kept = self.db.counters_kept(owner)
            row = await session.fetchrow(_TRY_FIRST, owner, when, number, arrival, key, kept)
            held = row[0] is not None
            return row

        async def let_go() -> None:
            nonlocal held
            await session.fetchrow(_UNLOCK, key)
            held = False

        # This process's earlier messages of the person go first (the order PostgreSQL
        # checks, (sent_at, message_no, arrival), so none of them is the earlier arrival
        # the statement finds), and one at a time.
        here = self._here.get(owner)
        if here is None:
            here = self._here[owner] = _Here()
        mine = (when, number, arrival)
        here.waiting.add(mine)
        asking = False
        pause = RETRY_S
        try:
            while True:
                await here.turn(mine)
                asking = True
                row = await _to_the_end(try_first())
                first = row[0]
                if first or (first is not None and time.monotonic() > deadline):
                    self.db.granted(owner)
                    granted = True
                    if first and row["key"] is not None:
                        self.db.served(owner, int(row["node_version"]), user=row)
                        self.db.counters_granted(
                            owner, int(row["counters_version"]), row["counters"]
                        )
                    else:
                        self.db.served(owner, None)
                    break
                if first is None:
                    self.waits += 1  # another process serves the person
                else:
                    # An earlier message of the person reached another process a moment
                    # later than this one: it goes first.
                    self.yielded += 1
                    await _to_the_end(let_go())
                # A message of the person that reached this process meanwhile may be
                # the earlier one: it may ask while this one waits.
                here.step_aside()
                asking = False
                # Waiting by trying again, never on a pooled connection: waiters holding
                # the pool would leave the holder none to finish with. Which waiter goes
                # next is the arrivals' order, not the lock's queue.
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_S)
            yield
        finally:
            try:
                await self._done(session, owner, arrival, key, granted=granted, held=held)
            finally:
                here.waiting.discard(mine)
                if not here.waiting:
                    if self._here.get(owner) is here:
                        del self._here[owner]
                elif asking or not here.asking:
                    here.step_aside()  # the next of the person's messages here asks

    async def _done(
        self,
        session: _Session,
        owner: str,
        arrival: int,
        key: int,
        *,
        granted: bool,
        held: bool,
    ) -> None:
        """Forget the arrival, write what waited for the release, let go of the lock
        (``held``: only when this message holds a count of it)."""
        if not held:
            await self._forget(owner, arrival)
            return
        # Only a message that was granted the lock lets go of what it held: one given up
        # while waiting (cancelled) leaves the holder's writes to the holder.
        pending = None
        if granted:
            self.db.granted_users.pop(owner, None)
            pending = self.db.releasing(owner)
        row = None
        try:
            if pending is None:
                await session.fetchrow(_DONE, owner, arrival, key)
            else:
                row = await session.fetchrow(_DONE_WRITING, owner, arrival, key, *pending.args())
        except _ERRORS as exc:
            # The session is gone (its locks with it) or the server is away (the engine
            # says so, once).
            log.debug("could not release a person's lock (%s)", type(exc).__name__)
            session.drop()  # closing the session lets go of its locks
            if pending is not None:
                await self.db.pending_written(owner, pending, None)  # lost, as in a crash
            # Its registering connection is still there, so the arrival would hold the
            # person up until ARRIVAL_TTL_S: forget it on any connection.
            await self._forget(owner, arrival)
            return
        if pending is not None:
            assert row is not None
            try:
                await self.db.pending_written(
                    owner, pending, row if row["node_version"] is not None else None
                )
            except _ERRORS as exc:
                log.debug("could not store a person's profile again (%s)", type(exc).__name__)

    async def _forget(self, owner: str, arrival: int) -> None:
        """Forget the arrival, on any connection."""
        try:
            await self.db.execute(_FORGET, owner, arrival)
        except _ERRORS:
            pass  # the server is away: it expires

    async def close(self) -> None:
        for session in (*self._sessions, self._arrivals.session):
            await session.close()
