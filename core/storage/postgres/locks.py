"""One person's messages handled by one process at a time, in the platform's order, when
several bot processes share a PostgreSQL database (webhook workers behind a load
balancer: a person's next message may reach another process while the first is being
answered).

Why a lock and not a queue: the processes already share PostgreSQL, whose advisory locks
are exactly "one holder per key, released when the holder's session ends" (a process
killed with ``kill -9`` lets go of its locks as its connection closes). A queue would need a consumer per person, redelivery after a crash,
and would move the reply away from the process holding the platform's request.

Messages that reach two processes at almost the same moment reach PostgreSQL in either
order, so the lock alone could let the later one first. So each message registers its
arrival (``person_arrivals``: the person, the platform's time and message number) in the
same step that first tries the lock, before it waits for anything; the holder checks,
under the lock, that no earlier message of the person is still waiting, and if one is,
lets go and tries again a moment later. Waiters try again every few milliseconds (doubling
up to 50 ms) rather than wait in PostgreSQL's queue on a pooled connection: waiters
holding the pool left the holder none to finish with (seen: a load run that hung).

Each person's steps go to one of a few connections of their own (never a pooled one: a
registration waited there behind the work of everyone being served, and the later
message of a person, registered meanwhile in the other process, went first). What is
asked of a connection while its last batch is on its way goes in its next statement, in
order (``akira_person_locks``, schema 62): registering one message and trying its lock,
trying another's again, letting go of a third, in one round trip. A registered row names
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
from collections.abc import AsyncIterator
from datetime import datetime
from typing import NamedTuple

import asyncpg

from core.storage.errors import StorageError
from core.storage.postgres.database import PgDatabase, translated
from core.storage.records import to_ts

log = logging.getLogger(__name__)

ARRIVAL_TTL_S = 60.0
# How soon a waiting message tries the person's lock again, doubling up to the most.
RETRY_S = 0.005
MAX_RETRY_S = 0.05
_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StorageError)

# A batch of steps, in order (schema 62, core.storage.postgres.schema): 'a' registers an
# arrival (named by this connection's server process) and tries the person's lock, 't'
# tries it again, 'f' tries it and keeps it even when an earlier message is waiting (that
# one's arrival outlived ARRIVAL_TTL_S here), 'd' forgets the arrival and lets go, 'r'
# forgets the arrival only.
_STEPS = "SELECT arrival, first, version FROM akira_person_locks($1, $2, $3, $4, $5, $6, $7)"
_FORGET = "DELETE FROM person_arrivals WHERE owner = $1 AND arrival = $2"


class _Step(NamedTuple):
    op: str
    owner: str
    when: float
    number: int
    arrival: int
    key: int
    session: int = 0  # 'd': the session (connection) the lock was granted on


class _Answer(NamedTuple):
    arrival: int
    first: bool | None  # None: another session holds the lock
    version: int | None  # the person's node version, when first
    session: int  # the number of the session (connection) that answered


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


SESSIONS = 4  # connections this process holds people's locks on (a person: always one)


class _Session:
    """A connection kept for people's locks. What is asked of it while a batch is on its
    way goes together in the next statement, in the order it was asked for."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.conn: asyncpg.Connection | None = None
        self.opened = 0  # connections opened so far: the current one's number
        self._pending: list[tuple[_Step, asyncio.Future[_Answer]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def step(self, step: _Step) -> _Answer:
        answered: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._pending.append((step, answered))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send())
        return await answered

    async def _send(self) -> None:
        batch: list[tuple[_Step, asyncio.Future[_Answer]]] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    if self.conn is None or self.conn.is_closed():
                        # A new session: whatever the old one held was released with it.
                        self.conn = await self.db.connect()
                        self.opened += 1
                    # A lock granted on a session since closed went with it: letting go
                    # on this one would release another message's hold of the person.
                    steps = [
                        s._replace(op="r") if s.op == "d" and s.session != self.opened else s
                        for s, _ in batch
                    ]
                    with translated():
                        rows = await self.conn.fetch(
                            _STEPS,
                            [s.op for s in steps],
                            [s.owner for s in steps],
                            [s.when for s in steps],
                            [s.number for s in steps],
                            [s.arrival for s in steps],
                            [s.key for s in steps],
                            ARRIVAL_TTL_S,
                        )
                except Exception as exc:
                    self.drop()  # a new connection (and server process) next time
                    for _, answered in batch:
                        if not answered.done():
                            answered.set_exception(exc)
                    continue
                for (step, answered), row in zip(batch, rows, strict=True):
                    version = None if row[2] is None else int(row[2])
                    answer = _Answer(int(row[0]), row[1], version, self.opened)
                    if not answered.done():
                        answered.set_result(answer)
                    elif step.op != "d":
                        self._abandoned(step, answer)
        finally:
            self._sending = None
            for _, answered in (*batch, *self._pending):
                if not answered.done():  # cancelled (the storage is closing)
                    answered.set_exception(StorageError("the storage is closing"))

    def _abandoned(self, step: _Step, answer: _Answer) -> None:
        """The message that asked went away meanwhile (cancelled): what it was granted
        is let go, its arrival forgotten, so the person is not held up."""
        holds = answer.first or (answer.first is not None and step.op == "f")
        if holds or step.op == "a":
            self._pending.append(
                (
                    step._replace(
                        op="d" if holds else "r", arrival=answer.arrival, session=answer.session
                    ),
                    asyncio.get_running_loop().create_future(),
                )
            )

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.terminate()
            self.conn = None

    async def close(self) -> None:
        if self._sending is not None:
            self._sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, *_ERRORS):
                await self._sending
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()


class PersonLocks:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._sessions = [_Session(db) for _ in range(SESSIONS)]
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
        # Registered and tried in one step: the arrival is known to the other processes
        # when this batch commits, whether or not the lock was granted.
        answer = await session.step(_Step("a", owner, when, number, 0, key))
        step = _Step("t", owner, when, number, answer.arrival, key)
        deadline = time.monotonic() + ARRIVAL_TTL_S
        pause = RETRY_S
        try:
            while True:
                first = answer.first
                if first or (first is not None and step.op == "f"):
                    held_on = answer.session
                    self.db.served(owner, answer.version)
                    break
                if first is None:
                    self.waits += 1  # another process serves the person
                else:
                    # An earlier message of the person reached another process a moment
                    # later than this one: it goes first (the step let go of the lock).
                    self.yielded += 1
                # Waiting by trying again, never on a pooled connection: waiters holding
                # the pool would leave the holder none to finish with. Which waiter goes
                # next is the arrivals' order, not the lock's queue.
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_S)
                if time.monotonic() > deadline:
                    step = step._replace(op="f")
                answer = await session.step(step)
        except BaseException:
            await self._done(session, step._replace(op="r"))
            raise
        try:
            yield
        finally:
            await self._done(session, step._replace(op="d", session=held_on))

    async def _done(self, session: _Session, step: _Step) -> None:
        """Forget the arrival and, with 'd', let go of the lock."""
        try:
            await session.step(step)
        except _ERRORS as exc:
            # The session is gone (its locks with it) or the server is away (the engine
            # says so, once).
            log.debug("could not release a person's lock (%s)", type(exc).__name__)
            try:
                # Its registering connection may still be there, so the arrival would
                # hold the person up until ARRIVAL_TTL_S: forget it on any connection.
                await self.db.execute(_FORGET, step.owner, step.arrival)
            except _ERRORS:
                pass  # the server is away: it expires

    async def close(self) -> None:
        for session in self._sessions:
            await session.close()
