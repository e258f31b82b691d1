"""The console adapter, the first adapter and the pattern for the others.

Interactive mode (a terminal): a prompt with line editing and history; Ctrl-D or Ctrl-C
exits cleanly. Pipe mode (stdin is not a terminal): every input line gets exactly one
output line on stdout — the replies for that line joined, newlines folded — so the bot
can be scripted.
"""

from __future__ import annotations

import asyncio
import getpass
import signal
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import Any, TextIO

from adapters.base import Adapter
from core.types import (
    ChatKind,
    ChatRef,
    Command,
    IncomingMessage,
    MessageHandler,
    Reply,
    UserRef,
    utcnow,
)

PLATFORM = "console"


@dataclass(frozen=True)
class ConsoleConfig:
    user: str = field(default_factory=lambda: _default_user())
    # The person at the terminal runs the bot, so they are its admin.
    admin: bool = True
    bot_name: str = "AKIRA"


def _default_user() -> str:
    try:
        return getpass.getuser() or "you"
    except Exception:  # no passwd entry in some containers
        return "you"


@dataclass
class _ConsoleResponder:
    replies: list[Reply] = field(default_factory=list)
    echo: TextIO | None = None  # interactive: print as replies arrive
    bot_name: str = "AKIRA"

    async def send(self, reply: Reply) -> None:
        self.replies.append(reply)
        if self.echo is not None:
            text = reply.text
            if reply.attachment is not None:
                text += f"\n[{reply.attachment.filename}, {len(reply.attachment.data)} bytes]"
            self.echo.write(f"{self.bot_name}: {text}\n")
            self.echo.flush()

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            yield

        return _typing()


class ConsoleAdapter(Adapter):
    name = "console"

    def __init__(
        self,
        handler: MessageHandler,
        config: ConsoleConfig | None = None,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
    ) -> None:
        super().__init__(handler)
        self.config = config or ConsoleConfig()
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self._ids = count(1)
        # Message ids must be unique across runs: the engine drops a repeated
        # (chat, message id) as a duplicate platform delivery.
        self._session = uuid.uuid4().hex[:12]
        self._stopped = asyncio.Event()

    def _message(self, text: str) -> IncomingMessage:
        user = UserRef(
            PLATFORM, self.config.user, display_name=self.config.user, is_admin=self.config.admin
        )
        return IncomingMessage(
            platform=PLATFORM,
            chat=ChatRef(PLATFORM, f"console-{self.config.user}", ChatKind.DM),
            author=user,
            text=text,
            message_id=f"{self._session}-{next(self._ids)}",
            sent_at=utcnow(),
            addressed=True,
            command=Command.parse(text),
        )

    async def ask(self, text: str, *, echo: bool = False) -> list[Reply]:
        """Hand one line to the engine; the replies it produced."""
        responder = _ConsoleResponder(
            echo=self.stdout if echo else None, bot_name=self.config.bot_name
        )
        await self.handler.handle(self._message(text), responder)
        return responder.replies

    async def start(self) -> None:
        """Run until input ends (the console has no background life of its own)."""
        if self.stdin.isatty() and self.stdout.isatty():
            await self._interactive()
        else:
            await self._pipe()

    async def stop(self) -> None:
        self._stopped.set()

    async def _pipe(self) -> None:
        # SIGTERM / Ctrl-C: stop reading, but the line in flight still gets its reply (the
        # engine is closed by the caller afterwards). Only possible on the main thread.
        loop = asyncio.get_running_loop()
        signals = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stopped.set)
                signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                pass
        try:
            while not self._stopped.is_set():
                line = await self._readline()
                if not line:
                    break
                replies = await self.ask(line.rstrip("\r\n"))
                self.stdout.write(format_pipe_line(replies) + "\n")
                self.stdout.flush()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def _readline(self) -> str | None:
        """The next input line ("" at end of input), or None once ``stop()`` was called.
        A daemon thread reads, so a stop while stdin is silent never waits for input."""
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def deliver(result: str | BaseException) -> None:
            if not line.done():
                if isinstance(result, BaseException):
                    line.set_exception(result)
                else:
                    line.set_result(result)

        def read() -> None:
            try:
                result: str | BaseException = self.stdin.readline()
            except BaseException as exc:  # reported to the waiting coroutine
                result = exc
            try:
                loop.call_soon_threadsafe(deliver, result)
            except RuntimeError:  # the loop is gone: nobody is waiting any more
                pass

        threading.Thread(target=read, name="console-stdin", daemon=True).start()
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            waiters: set[asyncio.Future[Any]] = {line, stopped}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        return line.result() if line.done() else None

    async def _interactive(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession[str] = PromptSession()
        self.stdout.write(
            f"{self.config.bot_name} — chatting as console:{self.config.user}. "
            "/help for commands, Ctrl-D to quit.\n"
        )
        with patch_stdout():
            while not self._stopped.is_set():
                try:
                    line = await session.prompt_async("you> ")
                except (EOFError, KeyboardInterrupt):
                    break
                if line.strip():
                    await self.ask(line, echo=True)
        self.stdout.write("bye!\n")


def format_pipe_line(replies: list[Reply]) -> str:
    """One output line for one input line: replies joined, newlines folded to spaces."""
    parts = []
    for reply in replies:
        text = " ".join(reply.text.split())
        if reply.attachment is not None:
            text += f" [{reply.attachment.filename}, {len(reply.attachment.data)} bytes]"
        parts.append(text)
    return " ".join(p for p in parts if p)
