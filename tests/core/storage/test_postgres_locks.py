"""A person's lock across processes (core.storage.postgres.locks): the earlier message of
a person goes first, whichever process registered it and whichever was waiting longer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from core.storage.postgres import PostgresStorage

A = "telegram:1"
OWNERS = [A]
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@dataclass
class Served:
    """Messages of person A served in turn: message "2" holds the lock until released."""

    order: list[str] = field(default_factory=list)
    holding: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self, store: PostgresStorage, name: str, minutes: int) -> None:
        async with store.serving(A, sent_at=T0 + timedelta(minutes=minutes), message_id=name):
            self.order.append(name)
            if name == "2":
                self.holding.set()
                await self.release.wait()

    async def hold(self, store: PostgresStorage) -> asyncio.Task[None]:
        """Message "2" served by ``store``: it holds the lock until ``release``."""
        holder = asyncio.create_task(self.serve(store, "2", 2))
        await self.holding.wait()
        return holder


async def test_the_earlier_message_goes_first_whichever_process_has_it(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    served = Served()
    holder = await served.hold(first)
    # Both wait while "2" is served: "3" in the holder's process, "1" (sent earlier,
    # registered later) in the other's.
    later = asyncio.create_task(served.serve(first, "3", 3))
    await asyncio.sleep(0.05)
    earlier = asyncio.create_task(served.serve(second, "1", 1))
    await asyncio.sleep(0.05)
    assert served.order == ["2"]
    served.release.set()
    await asyncio.wait_for(asyncio.gather(holder, later, earlier), 10)
    # In order whichever asks first once "2" lets go: "3" (waiting in its process,
    # asking at once) is granted and lets "1" go first, or "1"'s poll comes first.
    assert served.order == ["2", "1", "3"]
    assert await first.db.fetchval("SELECT count(*) FROM person_arrivals") == 0


async def test_a_later_message_in_the_holders_process_waits_there_without_asking(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    """A person's second message in the process serving their first waits in the
    process, not by trying the lock in PostgreSQL (which it used to: the lock counts up
    on the shared session, an earlier arrival waits, let go, try again), and goes the
    moment the first is done."""
    first, _ = two_processes
    served = Served()
    holder = await served.hold(first)
    later = asyncio.create_task(served.serve(first, "3", 3))
    await asyncio.sleep(0.3)  # a waiter polling PostgreSQL would have tried ~8 times
    assert served.order == ["2"]
    assert (first.locks.yielded, first.locks.waits) == (0, 0)
    served.release.set()
    await asyncio.wait_for(asyncio.gather(holder, later), 10)
    assert served.order == ["2", "3"]
    assert (first.locks.yielded, first.locks.waits) == (0, 0)
    assert await first.db.fetchval("SELECT count(*) FROM person_arrivals") == 0


async def test_the_lock_stores_the_time_seen_and_hands_ensure_the_current_user_row(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    first, second = two_processes
    # Another process changed the person's profile while nobody served them.
    await second.users.change_profile_with(A, lambda profile: profile.update(pet="Thor"))
    at = datetime.now(UTC) + timedelta(days=1)
    async with first.serving(A, sent_at=at, message_id="7"):
        assert A in first.db.granted_users
        stored = await first.db.fetchval("SELECT last_seen_at FROM users WHERE key = $1", A)
        assert stored == at.timestamp()  # stored by the lock's statement
        user = await first.users.ensure(A, display_name=None, seen_at=at)
        assert user.profile.get("pet") == "Thor" and user.last_seen_at == at
        assert A not in first.db.granted_users  # taken once
        # A new display name is stored as before.
        renamed = await first.users.ensure(A, display_name="Ana", seen_at=at)
        assert renamed.display_name == "Ana"
    assert await first.db.fetchval("SELECT display_name FROM users WHERE key = $1", A) == "Ana"
    # Not kept beyond the lock, and a person without a user row gets none.
    assert first.db.granted_users == {}
    async with first.serving("telegram:2", sent_at=at):
        assert "telegram:2" not in first.db.granted_users
        assert (await first.users.ensure("telegram:2", seen_at=at)).last_seen_at == at


async def test_a_waiter_given_up_does_not_let_go_of_the_holders_lock(
    two_processes: tuple[PostgresStorage, PostgresStorage],
) -> None:
    # A person's messages in one process share a session, where advisory locks count
    # up: a waiter that took and gave back its count, then is cancelled, must not give
    # back the holder's.
    first, second = two_processes
    served = Served()
    holder = await served.hold(first)
    waiter = asyncio.create_task(served.serve(first, "3", 3))
    await asyncio.sleep(0.1)  # it has tried the lock (and yielded to "2") at least once
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    # An earlier message reaching the other process now: it goes next, not while "2" is
    # still being served.
    earlier = asyncio.create_task(served.serve(second, "1", 1))
    await asyncio.sleep(0.5)
    assert served.order == ["2"]
    served.release.set()
    await asyncio.wait_for(asyncio.gather(holder, earlier), timeout=10)
    assert served.order == ["2", "1"]
