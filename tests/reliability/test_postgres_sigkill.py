"""``kill -9`` of one of two bot processes sharing a PostgreSQL database, under load: nothing
acknowledged is lost, nothing is stored twice or out of order, and the surviving process
goes on serving the same people at once (the killed process's locks and the messages it
had registered do not hold them up).

Two real bot processes (``load_driver.py --stdin``: the application's engine on one real
PostgreSQL database) get the messages from this test, which plays the load balancer: each
person's messages alternate between the two processes, one at a time (the next once the
answer to the last came back, as an ``ACK`` line). Once a third of the answers are in, one
process is killed with SIGKILL; from then on every message goes to the other one.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

import asyncpg

from tests.postgres import postgres_database
from tests.reliability.load_driver import PLATFORM, message_text
from tests.reliability.test_sigkill import DRIVER, bot_env

USERS, MESSAGES = 12, 24
# The survivor must answer each person's next message well within this: the arrivals
# the killed process registered expire only after ARRIVAL_TTL_S.
AFTER_KILL_BOUND_S = 20.0


class BotProcess:
    """One driver process: a message in as a line, its answer out as an ``ACK`` line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: dict[tuple[int, int], asyncio.Future[bool]] = {}
        self.ready = asyncio.get_running_loop().create_future()
        self.alive = True
        self.errors = b""
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, dsn: str, data_dir: Path) -> BotProcess:
        env = bot_env(data_dir)
        env.update({"AKIRA_STORAGE__BACKEND": "postgres", "AKIRA_STORAGE__POSTGRES_DSN": dsn})
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(DRIVER),
            "--stdin",
            env=env,
            cwd=data_dir,  # no akira.toml from the checkout
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := (await self.proc.stdout.readline()).decode():
            if line.startswith("READY") and not self.ready.done():
                self.ready.set_result(None)
            elif line.startswith("ACK "):
                _, user, index = line.split()
                answered = self.waiting.pop((int(user), int(index)), None)
                if answered is not None and not answered.done():
                    answered.set_result(True)
        # The process is gone: what it had not answered never will be.
        self.alive = False
        if not self.ready.done():
            assert self.proc.stderr is not None
            errors = (await self.proc.stderr.read()).decode()[-3000:]
            self.ready.set_exception(RuntimeError(f"the bot exited before READY: {errors}"))
        for pending in self.waiting.values():
            if not pending.done():
                pending.set_result(False)
        self.waiting.clear()

    async def ask(self, user: int, index: int) -> bool:
        """True once answered; False when the process died first."""
        if not self.alive:
            return False
        answered = asyncio.get_running_loop().create_future()
        self.waiting[(user, index)] = answered
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{user} {index}\n".encode())
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self.waiting.pop((user, index), None)
            return False
        return await answered

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)

    async def finish(self) -> int:
        """End of input: the process finishes what it has and exits."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(60):
                await self.reader
                assert self.proc.stderr is not None
                self.errors = await self.proc.stderr.read()
                return await self.proc.wait()
        except TimeoutError:
            self.kill()
            raise


async def test_sigkill_of_one_of_two_processes_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    async with postgres_database() as dsn:
        bots = [await BotProcess.start(dsn, tmp_path / name) for name in ("a", "b")]
        survivor, victim = bots
        try:
            async with asyncio.timeout(90):
                await asyncio.gather(*(bot.ready for bot in bots))
            acked: set[tuple[int, int]] = set()
            lost: set[tuple[int, int]] = set()
            killed = asyncio.Event()
            after_kill_s: list[float] = []

            async def person(user: int) -> None:
                for index in range(MESSAGES):
                    bot = bots[(user + index) % 2] if victim.alive else survivor
                    started = time.monotonic()
                    if await bot.ask(user, index):
                        acked.add((user, index))
                        if killed.is_set() and bot is survivor:
                            after_kill_s.append(time.monotonic() - started)
                    else:
                        lost.add((user, index))
                    if len(acked) >= USERS * MESSAGES // 3 and not killed.is_set():
                        victim.kill()
                        killed.set()

            async with asyncio.timeout(180):
                await asyncio.gather(*(person(user) for user in range(USERS)))
            assert killed.is_set()
            assert not victim.alive
            assert await survivor.finish() == 0, survivor.errors.decode()[-3000:]
        finally:
            for bot in bots:
                bot.kill()
                with contextlib.suppress(ProcessLookupError):
                    await bot.proc.wait()
        assert b"Traceback" not in survivor.errors, survivor.errors.decode()[-3000:]
        assert await victim.proc.wait() == -signal.SIGKILL
        # Only messages in flight on the killed process went unanswered.
        assert len(lost) <= USERS, lost
        assert len(acked) + len(lost) == USERS * MESSAGES
        # The survivor served everyone right after the kill, not once the killed
        # process's registrations expired.
        assert after_kill_s and max(after_kill_s) < AFTER_KILL_BOUND_S, max(after_kill_s)

        conn = await asyncpg.connect(dsn)
        try:
            stored: dict[str, list[str]] = {}
            for owner, content in await conn.fetch(
                "SELECT owner, content FROM nodes WHERE type = 'user_message' ORDER BY seq"
            ):
                stored.setdefault(owner, []).append(content)
            # A message's row is stored first, its vector after it (one statement each):
            # the kill may leave the person's latest message without one, which their
            # next message completes (on whichever process serves it).
            orphans = await conn.fetchval(
                "SELECT count(*) FROM nodes n LEFT JOIN graph_embeddings e"
                " ON e.node_id = n.id WHERE e.node_id IS NULL AND (n.type <> 'user_message'"
                " OR EXISTS (SELECT 1 FROM nodes l WHERE l.owner = n.owner AND l.seq > n.seq))"
            )
            dangling = await conn.fetchval(
                "SELECT count(*) FROM graph_connections c WHERE NOT EXISTS"
                " (SELECT 1 FROM nodes WHERE id = c.to_id AND owner = c.owner)"
            )
        finally:
            await conn.close()
        assert orphans == 0
        assert dangling == 0
        for user, index in acked:
            assert message_text(user, index) in stored.get(f"{PLATFORM}:{user}", []), (user, index)
        for user in range(USERS):
            contents = stored.get(f"{PLATFORM}:{user}", [])
            # Whatever is stored is whole, in the person's order, and never twice; the
            # messages lost with the killed process may be missing.
            expected = [message_text(user, i) for i in range(MESSAGES)]
            positions = [expected.index(text) for text in contents]
            assert positions == sorted(set(positions)), (user, positions)
