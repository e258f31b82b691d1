"""A bot process under load, for the SIGKILL test (not a test module itself).

Builds the real application engine from the ``AKIRA_*`` environment (``build_handler``, a
real SQLite file under ``AKIRA_DATA_DIR``, or the PostgreSQL database it names), with a scripted model that answers after a
random 5-40 ms, and lets ``--users`` people send ``--messages`` messages each, all at once.
Every time a person receives the answer to a message it prints ``ACK <user> <index>`` and
flushes: the engine only answers after the message was persisted, so an ACK line is the
evidence that the message is in the database. The test kills this process with SIGKILL
somewhere in the middle and checks the database against the ACK lines. With ``--stdin``
the test sends the messages itself (``<user> <index>`` lines), as a load balancer in front
of two such processes would.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from akira_bot.app import build_handler  # noqa: E402
from akira_bot.settings import Settings  # noqa: E402
from core.engine import Engine  # noqa: E402
from core.llm import ChatMessage, Generation, GenerationOptions, ScriptedProvider  # noqa: E402
from core.types import (  # noqa: E402
    ChatKind,
    ChatRef,
    IncomingMessage,
    Reply,
    ReplyKind,
    UserRef,
    utcnow,
)

PLATFORM = "load"


def message_text(user: int, index: int) -> str:
    # Distinctive, multi-byte and long enough that a torn write would show.
    return f"mensagem {index} de {user} " + "x" * (index % 7) * 40 + " — coração ção ü 🙂"


class JitteryProvider(ScriptedProvider):
    def __init__(self, seed: int) -> None:
        super().__init__(self._answer)
        self._rng = random.Random(seed)

    @staticmethod
    def _answer(messages: Sequence[ChatMessage]) -> str:
        return "<think>hmm</think>Entendi: " + messages[-1].content[:40]

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        await asyncio.sleep(self._rng.uniform(0.005, 0.04))
        if options is not None and options.json_mode:
            return Generation(text='{"memories": []}', model=self.model)
        result = await super().generate(messages, options)
        self.prompts.clear()
        return result


class AckResponder:
    def __init__(self, user: int, index: int) -> None:
        self.user, self.index = user, index

    async def send(self, reply: Reply) -> None:
        if reply.kind is ReplyKind.ANSWER:
            sys.stdout.write(f"ACK {self.user} {self.index}\n")
            sys.stdout.flush()

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            yield

        return _typing()


def message_of(user: int, index: int) -> IncomingMessage:
    return IncomingMessage(
        platform=PLATFORM,
        chat=ChatRef(PLATFORM, f"dm-{user}", ChatKind.DM),
        author=UserRef(PLATFORM, str(user), display_name=f"user {user}"),
        text=message_text(user, index),
        message_id=f"{user}-{index}",
        sent_at=utcnow(),
    )


async def person(engine: object, user: int, messages: int) -> None:
    for index in range(messages):
        await engine.handle(message_of(user, index), AckResponder(user, index))  # type: ignore[attr-defined]


async def from_stdin(engine: object) -> None:
    """Messages as the test sends them, one ``<user> <index>`` line each, every one
    handled as it comes (a bot process behind a load balancer); ends at end of input."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    handling: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        user, index = (int(part) for part in line.split())
        task = asyncio.create_task(
            engine.handle(message_of(user, index), AckResponder(user, index))  # type: ignore[attr-defined]
        )
        handling.add(task)
        task.add_done_callback(handling.discard)
    await asyncio.gather(*handling)


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument(
        "--stdin", action="store_true", help="the messages come from standard input"
    )
    args = parser.parse_args(argv)
    settings = Settings(bot={"rate_limit_messages": 0})
    engine = build_handler(settings, llm=JitteryProvider(seed=1))
    await engine.start()
    workers: list[int | None] = []
    if isinstance(engine, Engine):
        if engine.storage.backend == "sqlite":
            await engine.storage.db.wait_writer()  # with AKIRA_STORAGE__WRITER=process
    else:  # AKIRA_BOT__WORKERS: the engine's processes, for the test to kill as well
        workers = list(engine.worker_pids)
    sys.stdout.write(f"READY {' '.join(str(pid) for pid in workers)}\n")
    sys.stdout.flush()
    if args.stdin:
        await from_stdin(engine)
    else:
        await asyncio.gather(*(person(engine, u, args.messages) for u in range(args.users)))
    sys.stdout.write("DONE\n")
    sys.stdout.flush()
    await engine.close()


if __name__ == "__main__":
    asyncio.run(main())
