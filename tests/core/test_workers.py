"""The engine in worker processes (``core.workers``): real processes, each a whole engine
on one real SQLite file, a scripted model that says which process answered."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from akira_bot.app import build_engine, build_handler
from akira_bot.settings import Settings
from core.llm import ChatMessage, ScriptedProvider
from core.storage import StorageError
from core.types import RecordingResponder, ReplyKind
from core.workers import ShardedEngine, worker_index
from tests.conftest import make_message

# Several processes on PostgreSQL: tests/reliability/test_postgres_processes.py.
pytestmark = pytest.mark.sqlite_itself("the engine workers share one SQLite file (an flock)")

REPO = Path(__file__).resolve().parents[2]


def answer_with_pid(messages: Sequence[ChatMessage]) -> str:
    """Module-level, so it pickles into the workers. ``slow`` keeps the worker busy."""
    last = messages[-1].content
    if "slow" in last:
        time.sleep(1.5)
    return f"pid={os.getpid()} said={last.split()[-1]}"


@asynccontextmanager
async def sharded(settings: Settings, workers: int = 2) -> AsyncIterator[ShardedEngine]:
    bot = settings.bot.model_copy(update={"workers": workers})
    handler = build_handler(
        settings.model_copy(update={"bot": bot}), llm=ScriptedProvider(answer_with_pid)
    )
    assert isinstance(handler, ShardedEngine)
    await handler.start()
    try:
        yield handler
    finally:
        await handler.close(timeout=5)


def users_on_each_worker(engine: ShardedEngine, per_worker: int) -> list[str]:
    """User ids (telegram platform) so that every worker gets ``per_worker`` of them."""
    found: dict[int, list[str]] = {i: [] for i in range(engine.workers)}
    candidate = 100
    while any(len(v) < per_worker for v in found.values()):
        index = engine.worker_for(f"telegram:{candidate}")
        if len(found[index]) < per_worker:
            found[index].append(str(candidate))
        candidate += 1
    return [user for users in found.values() for user in users]


async def typing_shown(responder: RecordingResponder) -> None:
    """Until the typing indicator arrives: it comes from the worker, which then has the
    message."""
    for _ in range(250):
        if responder.typing_count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("no typing indicator: the worker never got the message")


def stored_user_texts(db: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT owner, content FROM nodes WHERE type = 'user_message' ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()
    out: dict[str, list[str]] = {}
    for owner, content in rows:
        out.setdefault(owner, []).append(content)
    return out


async def test_each_person_is_served_by_one_worker_in_order(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    async with sharded(settings) as engine:
        pids = engine.worker_pids
        assert len(set(pids)) == 2 and os.getpid() not in pids
        users = users_on_each_worker(engine, 3)
        responders = {user: RecordingResponder() for user in users}

        async def person(user: str) -> None:
            for i in range(4):
                await engine.handle(make_message(f"hello w{i}", user=user), responders[user])

        # Everybody at once; each person's messages queued at once too.
        await asyncio.gather(*(person(u) for u in users))

    for user, responder in responders.items():
        texts = responder.texts
        assert [t.split("said=")[1] for t in texts] == ["w0", "w1", "w2", "w3"], texts
        expected_pid = pids[worker_index(f"telegram:{user}", 2)]
        assert {t.split()[0] for t in texts} == {f"pid={expected_pid}"}
        assert responder.typing_count == 4
    stored = stored_user_texts(settings.database_path)
    for user in users:
        assert stored[f"telegram:{user}"] == [f"hello w{i}" for i in range(4)]
    assert engine.worker_pids == [None, None]  # closed and reaped


async def test_commands_are_the_engines_and_run_in_a_worker(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    in_process = build_engine(settings)
    async with sharded(settings) as engine:
        assert [c.name for c in engine.commands] == [c.name for c in in_process.commands]
        responder = RecordingResponder()
        await engine.handle(make_message("estou muito feliz hoje!"), responder)
        await engine.handle(make_message("/mood"), responder)
    assert responder.sent[-1].kind is ReplyKind.COMMAND
    assert "feliz" in responder.texts[-1]


class FailingResponder(RecordingResponder):
    async def send(self, reply: Any) -> None:
        raise ConnectionError("platform said no")


async def test_a_failed_delivery_reaches_the_worker_as_in_one_process(
    settings_factory: Callable[..., Settings],
) -> None:
    """In one process a reply the adapter could not deliver is not stored as said, and
    the adapter's error comes out of ``handle``. The worker learns of the failure from
    the parent and does the same."""
    settings = settings_factory()
    async with sharded(settings) as engine:
        with pytest.raises(RuntimeError, match="platform said no"):
            await engine.handle(make_message("hi there", user="7"), FailingResponder())
        works = RecordingResponder()
        await engine.handle(make_message("and now?", user="7"), works)
    assert len(works.texts) == 1 and works.texts[0].endswith("said=now?")
    conn = sqlite3.connect(settings.database_path)
    try:
        replies = [
            row[0]
            for row in conn.execute(
                "SELECT content FROM nodes WHERE owner = 'telegram:7' AND type = 'akira_response'"
            )
        ]
    finally:
        conn.close()
    assert replies == works.texts


async def test_a_killed_worker_answers_politely_and_is_replaced(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    async with sharded(settings) as engine:
        user = users_on_each_worker(engine, 1)[0]
        victim = engine.worker_pids[engine.worker_for(f"telegram:{user}")]
        assert victim is not None
        waiting = RecordingResponder()
        task = asyncio.create_task(engine.handle(make_message("slow one", user=user), waiting))
        await typing_shown(waiting)
        os.kill(victim, signal.SIGKILL)
        await asyncio.wait_for(task, 10)
        assert [r.kind for r in waiting.sent] == [ReplyKind.FALLBACK]

        after = RecordingResponder()
        await engine.handle(make_message("still there?", user=user), after)
        new_pid = engine.worker_pids[engine.worker_for(f"telegram:{user}")]
        assert new_pid not in (None, victim)
        assert after.texts == [f"pid={new_pid} said=there?"]
    # Stored before the model was asked: the killed worker's message is not lost.
    assert "slow one" in stored_user_texts(settings.database_path)[f"telegram:{user}"]


async def test_workers_ignore_a_ctrl_c_to_the_group_and_close_finishes_in_flight(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    async with sharded(settings) as engine:
        pids = [p for p in engine.worker_pids if p is not None]
        for pid in pids:
            os.kill(pid, signal.SIGINT)
            os.kill(pid, signal.SIGTERM)
        user = users_on_each_worker(engine, 1)[0]
        in_flight = RecordingResponder()
        task = asyncio.create_task(engine.handle(make_message("slow reply", user=user), in_flight))
        await typing_shown(in_flight)
        await engine.close(timeout=10)
        await task
        with pytest.raises(RuntimeError, match="shutting down"):
            await engine.handle(make_message("too late", user=user), RecordingResponder())
    assert [r.kind for r in in_flight.sent] == [ReplyKind.ANSWER]
    assert "said=reply" in in_flight.texts[0]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped: gone


async def test_a_worker_that_cannot_start_fails_start_clearly(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    settings = settings_factory(data_dir=blocker / "data", bot={"workers": 2})
    handler = build_handler(settings)
    assert isinstance(handler, ShardedEngine)
    # The worker's own reason, as one process would give it (it used to be "engine
    # worker 0 stopped", the reason left in the worker's stderr).
    with pytest.raises(StorageError, match="cannot open database"):
        await handler.start()
    assert handler.worker_pids == [None, None]
    await handler.close(timeout=1)


def test_one_worker_is_the_engine_itself(settings_factory: Callable[..., Settings]) -> None:
    from core.engine import Engine

    assert isinstance(build_handler(settings_factory()), Engine)
    sharded_handler = build_handler(settings_factory(bot={"workers": 3, "max_concurrent": 64}))
    assert isinstance(sharded_handler, ShardedEngine) and sharded_handler.workers == 3


def saw_the_secret(messages: Sequence[ChatMessage]) -> str:
    """Module-level (it pickles into the workers): whether the prompt holds the secret."""
    prompt = "\n".join(m.content for m in messages)
    return "SEEN" if "Thor" in prompt.replace(messages[-1].content, "") else "CLEAN"


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_forget_from_another_process_reaches_the_running_bot(
    settings_factory: Callable[..., Settings], workers: int
) -> None:
    """``akira-bot memory forget`` run beside the bot: the person's next message must not
    bring their forgotten turns back from what the engine keeps in memory."""
    settings = settings_factory(bot={"workers": workers})
    handler = build_handler(settings, llm=ScriptedProvider(saw_the_secret))
    await handler.start()
    try:
        first = RecordingResponder()
        await handler.handle(make_message("meu cachorro se chama Thor", user="5"), first)
        again = RecordingResponder()
        await handler.handle(make_message("lembra do meu cachorro?", user="5"), again)
        assert again.texts == ["SEEN"]  # the turn is kept, and reaches the prompt

        env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
        env |= {
            "AKIRA_DATA_DIR": str(settings.data_dir),
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_LLM__PROVIDER": "scripted",
            "PYTHONPATH": str(REPO),
        }
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "akira_bot.cli",
            "memory",
            "forget",
            "telegram:5",
            env=env,
            cwd=settings.data_dir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await cli.communicate()
        assert cli.returncode == 0, err.decode()
        assert "forgot telegram:5" in out.decode()

        after = RecordingResponder()
        await handler.handle(make_message("lembra do meu cachorro?", user="5"), after)
    finally:
        await handler.close(timeout=5)
    assert after.texts == ["CLEAN"]


async def test_a_worker_that_cannot_start_again_gets_a_polite_reply_not_an_error(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    engine = ShardedEngine(
        functools.partial(build_engine, settings, llm=ScriptedProvider(answer_with_pid)), 1
    )
    await engine.start()
    try:
        first = RecordingResponder()
        await engine.handle(make_message("hello there", user="9"), first)
        assert first.texts and first.texts[0].endswith("said=there")
        pid = engine.worker_pids[0]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # ...and the database can no longer be opened: a directory where the file was.
        db = settings.database_path
        for leftover in db.parent.glob(db.name + "*"):
            leftover.rename(leftover.with_name("moved-" + leftover.name))
        db.mkdir()
        for _ in range(100):
            if engine.worker_pids == [None]:
                break
            await asyncio.sleep(0.05)
        after = RecordingResponder()
        await engine.handle(make_message("anyone?", user="9"), after)
        assert [r.kind for r in after.sent] == [ReplyKind.FALLBACK]
    finally:
        await engine.close(timeout=5)
