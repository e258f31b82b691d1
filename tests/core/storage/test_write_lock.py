"""The lock that serialises writers across processes (``core.storage.write_lock``), on a
real file, with the other process played by a second open of the lock file."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from core.storage.database import Database, Migration
from core.storage.write_lock import ProcessWriteLock

MIGRATION = Migration(1, "items", "CREATE TABLE items (k TEXT PRIMARY KEY);")


@contextmanager
def held_elsewhere(lock_path: Path) -> Iterator[int]:
    """The lock as another process holds it (another open file description)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def put(key: str) -> Callable[[sqlite3.Connection], object]:
    return lambda raw: raw.execute("INSERT INTO items VALUES (?)", (key,))


async def test_a_write_waits_for_the_other_process_and_goes_on_when_it_lets_go(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "t.db")
    await db.open([MIGRATION])
    try:
        lock_path = tmp_path / "t.db-writelock"
        assert lock_path.exists()
        with held_elsewhere(lock_path) as fd:
            write = asyncio.create_task(db.run(put("a")))
            await asyncio.sleep(0.3)
            assert not write.done()  # held back while the other process writes
            # ...and it has not begun a transaction meanwhile: SQLite's lock is free.
            other = sqlite3.connect(tmp_path / "t.db", timeout=0)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            other.close()
            released = asyncio.get_running_loop().time()
            fcntl.flock(fd, fcntl.LOCK_UN)
            await asyncio.wait_for(write, 5)
            # Woken by the kernel, not after a sleep-and-retry round.
            assert asyncio.get_running_loop().time() - released < 0.25
        assert (await db.fetchall("SELECT k FROM items"))[0][0] == "a"
        assert db._process_lock is not None and db._process_lock.waits == 1
    finally:
        await db.close()


async def test_a_cancelled_wait_does_not_keep_the_lock(tmp_path: Path) -> None:
    lock = ProcessWriteLock(tmp_path / "x.db")
    lock.open()
    try:
        with held_elsewhere(lock.path) as fd:
            waiting = asyncio.create_task(lock.acquire())
            await asyncio.sleep(0.1)
            waiting.cancel()
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                await waiting
            except asyncio.CancelledError:
                pass
            # The thread got the lock after the cancel; it must let go of it again.
            for _ in range(100):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(0.02)
            else:
                raise AssertionError("the cancelled waiter kept the lock")
    finally:
        lock.close()


async def test_two_databases_on_one_file_write_in_turn(tmp_path: Path) -> None:
    """Two writers on one file (as two engine workers): every write of both is kept."""
    path = tmp_path / "t.db"
    first, second = Database(path), Database(path)
    await first.open([MIGRATION])
    await second.open([MIGRATION])
    try:
        await asyncio.gather(
            *(db.run(put(f"{n}-{i}")) for i in range(300) for n, db in enumerate((first, second)))
        )
        assert (await first.fetchall("SELECT count(*) FROM items"))[0][0] == 600
    finally:
        await first.close()
        await second.close()
