"""Two ``akira-bot run`` processes (the console adapter, piped) against one PostgreSQL
database serve one person's interleaved messages in order, each seeing the turns the
other stored; a ``/forgetme`` on one is honoured by the other at once. The LLM is the
fake OpenAI-compatible server (it records every prompt)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg

from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import postgres_database

ROOT = Path(__file__).resolve().parents[2]
OWNER = "console:ana"
TURNS = ("primeiro violão", "segundo piano", "terceiro tambor", "quarto trompete")


class Bot:
    """One ``akira-bot run --user ana`` process: a line in, its reply line out."""

    def __init__(self, dsn: str, llm_url: str, data_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
        env.update(
            {
                "AKIRA_DATA_DIR": str(data_dir),
                "AKIRA_STORAGE__BACKEND": "postgres",
                "AKIRA_STORAGE__POSTGRES_DSN": dsn,
                "AKIRA_LLM__PROVIDER": "openai",
                "AKIRA_LLM__BASE_URL": llm_url,
                "AKIRA_LLM__MODEL": "fake-model",
                "AKIRA_EMBEDDING__BACKEND": "hashing",
                "AKIRA_EMOTION__DETECTOR": "lexicon",
                "AKIRA_MEMORY__EXTRACTION": "false",
                "AKIRA_BOT__RATE_LIMIT_MESSAGES": "0",
            }
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "akira_bot.cli", "run", "--user", "ana"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )

    async def say(self, text: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        line = await asyncio.wait_for(asyncio.to_thread(self.process.stdout.readline), 60)
        assert line, f"the bot exited: {self.stop()}"
        return line.strip()

    def stop(self) -> str:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stderr is not None
        return self.process.stderr.read()


def _messages_of(fake: FakeOpenAI, text: str) -> list[dict[str, Any]]:
    """The messages the model was given with the last request that ended with ``text``."""
    for request in reversed(fake.completion_requests):
        messages = request.messages
        if messages and text in str(messages[-1].get("content", "")):
            return list(messages)
    raise AssertionError(f"no prompt for {text!r}")


def _prompt_of(fake: FakeOpenAI, text: str) -> str:
    """Everything the model was given with that request, as one text."""
    return json.dumps(_messages_of(fake, text), ensure_ascii=False)


async def test_two_processes_one_person_in_order_and_forgetme_everywhere(tmp_path: Path) -> None:
    async with postgres_database() as dsn:
        with FakeOpenAI.in_thread() as fake:
            first = Bot(dsn, fake.url, tmp_path / "a")
            second = Bot(dsn, fake.url, tmp_path / "b")
            try:
                bots = (first, second)
                for i, text in enumerate(TURNS):  # interleaved: a, b, a, b
                    assert await bots[i % 2].say(text) == f"Eco: {text}"
                # The last prompt (second process) holds the person's earlier turns in its
                # chat history, in order, whichever process stored them. (The other
                # process's last reply is stored after it is delivered, so it may reach
                # this prompt as a recalled line instead of a history turn.)
                said = [m["content"] for m in _messages_of(fake, TURNS[3]) if m["role"] == "user"]
                assert said == list(TURNS), said

                # Asked on one process, confirmed on the other (the code is stored).
                asked = await first.say("/forgetme")
                code = re.search(r"/forgetme\s+(\S+)", asked)
                assert code is not None, asked
                done = await second.say(f"/forgetme {code.group(1)}")
                assert re.search(r"\d", done), done
                after = await first.say("quinto oboé")
                assert after == "Eco: quinto oboé"
                prompt = _prompt_of(fake, "quinto oboé")
                assert not any(text in prompt for text in TURNS), prompt
            finally:
                errors = [bot.stop() for bot in (first, second)]
            assert all("Traceback" not in err for err in errors), errors
            conn = await asyncpg.connect(dsn)
            try:
                stored = await conn.fetch(
                    "SELECT content FROM nodes WHERE owner = $1 ORDER BY seq", OWNER
                )
            finally:
                await conn.close()
            assert [r[0] for r in stored] == ["quinto oboé", "Eco: quinto oboé"]
