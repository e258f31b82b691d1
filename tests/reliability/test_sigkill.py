"""``kill -9`` in the middle of load loses no persisted message and leaves a clean database.

A real bot process (``load_driver.py``: the application's engine on a real SQLite file)
serves 20 people at once. Each answer is printed as an ACK line, and the engine answers
only after it stored the message, so every ACKed message must be in the database after
the kill — complete, byte for byte — and the database must open clean, with no half-written
node (every node has its embedding, or is the person's latest message whose embedding the
kill interrupted and their next message completes; the full-text index agrees with the
table).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.llm import ScriptedProvider
from core.types import ReplyKind
from tests.conftest import ask, make_message
from tests.reliability.load_driver import PLATFORM, message_text

pytestmark = pytest.mark.sqlite_itself(
    "reads SQLite's file after kill -9; PostgreSQL's: tests/reliability/test_postgres_sigkill.py"
)

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("load_driver.py")
USERS, MESSAGES = 20, 40


def bot_env(data_dir: Path, writer: str = "loop", workers: int = 1) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_STORAGE__WRITER": writer,
            "AKIRA_BOT__WORKERS": str(workers),
            "AKIRA_LLM__PROVIDER": "scripted",
            "AKIRA_EMBEDDING__BACKEND": "hashing",
            "AKIRA_EMOTION__DETECTOR": "lexicon",
            "PYTHONPATH": str(REPO),
        }
    )
    return env


async def run_and_kill(
    data_dir: Path, kill_after_acks: int, writer: str = "loop", workers: int = 1
) -> tuple[set[tuple[int, int]], bool]:
    """Start the driver, SIGKILL it once ``kill_after_acks`` answers arrived (its engine
    worker processes too, at the same moment, as the OOM killer or a power cut would);
    the ACKs read (including any already in the pipe) and whether it finished before
    the kill."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DRIVER),
        "--users",
        str(USERS),
        "--messages",
        str(MESSAGES),
        env=bot_env(data_dir, writer, workers),
        cwd=data_dir.parent,  # no akira.toml from the checkout
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    acks: set[tuple[int, int]] = set()
    finished = False
    worker_pids: list[int] = []
    try:
        async with asyncio.timeout(90):
            while len(acks) < kill_after_acks:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    break
                if line.startswith("READY"):
                    worker_pids = [int(pid) for pid in line.split()[1:]]
                if line.startswith("ACK "):
                    _, user, index = line.split()
                    acks.add((int(user), int(index)))
                finished = finished or line.strip() == "DONE"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        for pid in worker_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        out, err = await proc.communicate()
    # Lines the process wrote before it died are evidence too.
    for line in out.decode().splitlines():
        if line.startswith("ACK "):
            _, user, index = line.split()
            acks.add((int(user), int(index)))
        finished = finished or line.strip() == "DONE"
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    assert len(worker_pids) == (workers if workers > 1 else 0)
    return acks, finished


def waiting_for_vectors(conn: sqlite3.Connection) -> dict[str, str]:
    """Owner -> node of the nodes stored without a vector (a message's row is stored
    first, its vector after it, off the person's path: a kill in between leaves one).
    Only a person's latest node can be one: their next message waits for the vector."""
    waiting = {
        owner: node_id
        for node_id, owner in conn.execute(
            "SELECT n.id, n.owner FROM nodes n LEFT JOIN graph_embeddings e"
            " ON e.node_id = n.id WHERE e.node_id IS NULL"
        )
    }
    for owner, node_id in waiting.items():
        latest = conn.execute(
            "SELECT id, type FROM nodes WHERE owner = ? ORDER BY rowid DESC LIMIT 1", (owner,)
        ).fetchone()
        assert latest == (node_id, "user_message"), (owner, node_id, latest)
    return waiting


def check_clean(conn: sqlite3.Connection, *, waiting: bool = False) -> None:
    """The file is consistent: no corruption, no half-written node (``waiting``: but for
    messages whose vector had not come yet, see :func:`waiting_for_vectors`)."""
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # Full-text indexes agree with their tables (raises on a mismatch).
    conn.execute("INSERT INTO nodes_words(nodes_words) VALUES ('integrity-check')")
    # A node's vector, tags and edges are written in one transaction, after its row.
    found = waiting_for_vectors(conn)
    assert waiting or not found, found
    # Edges carry no foreign keys (schema 13): both ends must still be nodes of the
    # edge's owner.
    dangling = conn.execute(
        "SELECT count(*) FROM graph_connections c WHERE NOT EXISTS"
        " (SELECT 1 FROM nodes WHERE id = c.from_id AND owner = c.owner) OR NOT EXISTS"
        " (SELECT 1 FROM nodes WHERE id = c.to_id AND owner = c.owner)"
    ).fetchone()[0]
    assert dangling == 0


def check_database(db_path: Path, acks: set[tuple[int, int]]) -> dict[str, list[str]]:
    conn = sqlite3.connect(db_path)
    try:
        check_clean(conn, waiting=True)
        stored: dict[str, list[str]] = {}
        for owner, content in conn.execute(
            "SELECT owner, content FROM nodes WHERE type = 'user_message' ORDER BY rowid"
        ):
            stored.setdefault(owner, []).append(content)
    finally:
        conn.close()
    for user, index in acks:
        assert message_text(user, index) in stored.get(f"{PLATFORM}:{user}", []), (user, index)
    for owner, contents in stored.items():
        user = int(owner.split(":")[1])
        # Whatever is stored is whole, in the person's order, and never twice.
        assert contents == [message_text(user, i) for i in range(len(contents))], owner
    return stored


@pytest.mark.parametrize(("writer", "workers"), [("loop", 1), ("process", 1), ("loop", 2)])
async def test_sigkill_under_load_loses_no_persisted_message(
    tmp_path: Path, writer: str, workers: int
) -> None:
    """``process``: the writes commit in the writer process, which outlives the killed
    bot only until it reads the end of its socket. ``workers`` 2: two engine processes
    writing the one file, all killed at once."""
    data_dir = tmp_path / "data"
    acks, finished = await run_and_kill(
        data_dir, kill_after_acks=USERS * MESSAGES // 3, writer=writer, workers=workers
    )
    assert not finished, "the driver finished before the kill: nothing was in flight"
    assert len(acks) >= USERS * MESSAGES // 3
    stored = check_database(data_dir / "akira.db", acks)
    total_stored = sum(len(v) for v in stored.values())
    assert total_stored >= len(acks)

    # The application itself opens the killed database (migrations, WAL recovery) and
    # carries on: a new message is stored and answered, the old ones are still there.
    settings = Settings(
        data_dir=data_dir,
        llm={"provider": "scripted"},
        embedding={"backend": "hashing"},
        emotion={"detector": "lexicon"},
    )
    conn = sqlite3.connect(data_dir / "akira.db")
    try:
        waiting = waiting_for_vectors(conn)
    finally:
        conn.close()
    engine = build_engine(settings, llm=ScriptedProvider(["de volta!"]))
    await engine.start()
    try:
        responder = await ask(engine, make_message("voltei", user="0", platform=PLATFORM))
        assert [r.kind for r in responder.sent] == [ReplyKind.ANSWER]
        assert responder.texts == ["de volta!"]
        assert await engine.storage.nodes.count(f"{PLATFORM}:0") >= len(stored[f"{PLATFORM}:0"])
        # The messages the kill left without a vector get it with their person's next.
        for owner in waiting:
            user = owner.split(":")[1]
            await ask(engine, make_message("voltei", user=user, platform=PLATFORM))
    finally:
        await engine.close()
    conn = sqlite3.connect(data_dir / "akira.db")
    try:
        check_clean(conn)
    finally:
        conn.close()
