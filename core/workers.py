"""The engine in several worker processes, people sharded across them.

One engine runs its pipeline on one event loop, and Python runs one thread of it at a
time: at 1000 people talking at once a message cost ~7 ms of that one core, the offered
load needed ~1.3 cores, and replies queued for a second. :class:`ShardedEngine` starts
``workers`` processes, each a whole engine (built by a picklable factory) on the same
database file, and sends each message to the worker that owns its author
(``crc32(owner) % workers``). So one person is always served by one process, in order,
with that process's caches; SQLite serialises the processes' writes, and changes made
for a person by another process (an admin's command, ``akira-bot memory forget``) reach
the caches through the storage's change log (``SQLiteStorage.catch_up``).

The adapters stay in the parent and see an ordinary :class:`~core.types.MessageHandler`.
Each message's replies and typing indicators come back over the worker's socket and are
delivered by the parent through the message's own responder, and a reply is confirmed
to the worker only once delivered (the worker stores it after delivery, as the engine
does in one process).

Protocol (see :mod:`core.ipc`), parent to worker: ``("handle", id, message)``,
``("react", id, reaction)``, ``("sent", id, error or None, message ids)``,
``("close", timeout)``; worker to parent:
``("ready", pid, command specs)``, ``("send", id, reply)``, ``("typing", id, on)``,
``("done", id, error or None)``, ``("closed",)``. A worker ignores SIGINT and SIGTERM
(they reach the whole process group; the parent's graceful shutdown tells each worker
when to close) and closes its engine when the parent's socket closes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import signal
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from core.engine import InFlight, Startable
from core.i18n import detect_language, t
from core.ipc import FrameProtocol, frame, pickle_error
from core.types import (
    CommandSpec,
    IncomingMessage,
    IncomingReaction,
    RecordingResponder,
    Reply,
    ReplyKind,
    Responder,
)

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from core.engine import Engine

log = logging.getLogger(__name__)

EngineFactory = Callable[[], "Engine"]
# How long close() waits for a worker beyond the engine's own close timeout.
EXIT_GRACE_S = 10.0


class WorkerGone(RuntimeError):
    """A worker process stopped while it had this message."""


def worker_index(owner: str, workers: int) -> int:
    """The worker that serves ``owner``: stable across runs and processes (unlike
    ``hash``, which is salted per process)."""
    return zlib.crc32(owner.encode("utf-8", "surrogatepass")) % workers


class ShardedEngine(Startable):
    """A :class:`~core.types.MessageHandler` whose engines run in ``workers`` processes.

    ``factory`` builds one worker's engine inside that worker; it must be picklable (a
    module-level function or a ``functools.partial`` of one). ``prepare`` runs in each
    worker once its engine has started (the bot tunes the garbage collector there)."""

    def __init__(
        self,
        factory: EngineFactory,
        workers: int,
        *,
        prepare: Callable[[], None] | None = None,
        default_language: str = "pt",
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.factory = factory
        self.prepare = prepare
        self.default_language = default_language
        self._workers: list[_Worker | None] = [None] * workers
        self._starting: list[asyncio.Lock] = [asyncio.Lock() for _ in range(workers)]
        self._commands: Sequence[CommandSpec] = ()
        self._ids = itertools.count(1)
        self._in_flight = InFlight()
        self._closing = False
        self._started = False

    @property
    def workers(self) -> int:
        return len(self._workers)

    @property
    def in_flight(self) -> int:
        """Messages accepted and not answered yet (``/health``'s queue depth)."""
        return self._in_flight.count

    @property
    def commands(self) -> Sequence[CommandSpec]:
        """The engine's commands, as the first worker reported them on start."""
        return self._commands

    @property
    def worker_pids(self) -> list[int | None]:
        return [w.pid if w is not None and w.alive else None for w in self._workers]

    def worker_for(self, owner: str) -> int:
        return worker_index(owner, len(self._workers))

    async def start(self) -> None:
        """Start every worker and wait until each engine has started (models loaded,
        database open); a worker that fails to start fails this."""
        if self._started:
            return
        self._closing = False
        results = await asyncio.gather(
            *(self._worker(i) for i in range(len(self._workers))), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            # Every worker waited for (none left starting unwatched), the started ones
            # closed again: the bot stops on the first worker's reason.
            await self.close(EXIT_GRACE_S)
            raise failures[0]
        self._started = True

    async def _worker(self, index: int) -> _Worker:
        """Worker ``index``, started (again, after it died) if need be."""
        worker = self._workers[index]
        if worker is not None and worker.alive:
            return worker
        async with self._starting[index]:
            worker = self._workers[index]
            if worker is not None and worker.alive:
                return worker
            if worker is not None:
                log.error("engine worker %d stopped; starting it again", index)
                await worker.reap(0)
            worker = _Worker(index)
            commands = await worker.start(self.factory, self.prepare)
            self._workers[index] = worker
            if not self._commands:
                self._commands = commands
            return worker

    async def close(self, timeout: float = 10.0) -> None:
        """Stop taking messages; each worker finishes its in-flight ones within
        ``timeout`` and closes its engine (its database writes committed)."""
        self._closing = True
        workers = [w for w in self._workers if w is not None]
        await asyncio.gather(*(w.close(timeout) for w in workers))
        if not await self._in_flight.settled(EXIT_GRACE_S):
            log.warning("closing with %d message(s) unanswered", self._in_flight.count)
        self._started = False

    async def handle(self, message: IncomingMessage, responder: Responder) -> None:
        if self._closing:
            raise RuntimeError("engine is shutting down")
        with self._in_flight.one():
            try:
                worker = await self._worker(self.worker_for(message.owner))
            except Exception as exc:  # it died and cannot start again (logged by _lost):
                # WorkerGone, or the reason its engine gave (a database it cannot open...)
                await self._lost(message, responder, str(exc))
                return
            await self._exchange(worker, next(self._ids), message, responder)

    async def handle_reaction(self, reaction: IncomingReaction) -> None:
        """To the worker that owns the person, as their messages are."""
        if self._closing:
            raise RuntimeError("engine is shutting down")
        with self._in_flight.one():
            try:
                worker = await self._worker(self.worker_for(reaction.owner))
            except Exception as exc:
                log.error("engine worker lost a reaction of %s: %s", reaction.owner, exc)
                return
            # Nothing is answered to a reaction: whatever a hook sent would be dropped.
            await self._exchange(worker, next(self._ids), reaction, RecordingResponder())

    async def _exchange(
        self,
        worker: _Worker,
        request: int,
        message: IncomingMessage | IncomingReaction,
        responder: Responder,
    ) -> None:
        """Send the message, then act on what the worker says about it until it is done."""
        inbox = worker.open(request)
        typing: list[AbstractAsyncContextManager[None]] = []
        try:
            kind = "react" if isinstance(message, IncomingReaction) else "handle"
            worker.write((kind, request, message))
            while True:
                kind, _, *rest = await inbox.get()
                if kind == "send":
                    error: str | None = None
                    message_ids: list[str] | None = None
                    try:
                        message_ids = await responder.send(rest[0])
                    except Exception as exc:  # the worker's pipeline sees it, as in one process
                        error = f"{type(exc).__name__}: {exc}"
                    worker.write(("sent", request, error, message_ids))
                elif kind == "typing":
                    if rest[0]:
                        indicator = responder.typing()
                        await indicator.__aenter__()
                        typing.append(indicator)
                    elif typing:
                        await typing.pop().__aexit__(None, None, None)
                elif kind == "done":
                    if rest[0] is not None:
                        raise RuntimeError(rest[0])
                    return
                elif isinstance(message, IncomingReaction):  # "gone", with a reaction
                    log.error("engine worker lost a reaction of %s: %s", message.owner, rest[0])
                    return
                else:  # "gone": the worker died with this message
                    await self._lost(message, responder, rest[0])
                    return
        finally:
            worker.done(request)
            while typing:
                await typing.pop().__aexit__(None, None, None)

    async def _lost(self, message: IncomingMessage, responder: Responder, why: str) -> None:
        """The worker died (or could not start again): a polite reply instead of silence.
        Whether the message was stored depends on how far it got (it is stored before
        anything slow happens); when it was not, this log line is its trace."""
        log.error("engine worker lost a message of %s: %s", message.owner, why)
        language = detect_language(message.text) or self.default_language
        await responder.send(Reply(t("fallback", language), ReplyKind.FALLBACK))


class _Worker:
    """The parent's end of one worker process."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: BaseProcess | None = None
        self._link: FrameProtocol | None = None
        self._inboxes: dict[int, asyncio.Queue[tuple[Any, ...]]] = {}
        self._ready: asyncio.Future[Sequence[CommandSpec]] | None = None
        self._closed: asyncio.Future[None] | None = None
        self.alive = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(
        self, factory: EngineFactory, prepare: Callable[[], None] | None
    ) -> Sequence[CommandSpec]:
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair()
        # spawn, not fork: the parent has an event loop, threads and open databases that a
        # forked child would inherit half-way.
        context = multiprocessing.get_context("spawn")
        self.process = context.Process(
            target=serve_worker,
            args=(factory, prepare, child),
            name=f"akira-engine-{self.index}",
        )
        try:
            await asyncio.to_thread(self.process.start)
        finally:
            child.close()
        self._ready = loop.create_future()
        self._closed = loop.create_future()
        self.alive = True
        _, self._link = await loop.create_connection(
            lambda: FrameProtocol(f"engine worker {self.index}", self.received, self.stopped),
            sock=parent,
        )
        try:
            return await asyncio.shield(self._ready)
        except BaseException:
            # A worker that failed to start is on its way out: let it finish (its error
            # is on stderr); one that is still starting (cancelled) is killed.
            await self.reap(0 if self.alive else EXIT_GRACE_S)
            raise

    def open(self, request: int) -> asyncio.Queue[tuple[Any, ...]]:
        inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        if not self.alive:
            inbox.put_nowait(("gone", request, "the worker had stopped"))
        self._inboxes[request] = inbox
        return inbox

    def done(self, request: int) -> None:
        self._inboxes.pop(request, None)

    def write(self, value: Any) -> None:
        if self._link is not None:
            self._link.write(value)

    def received(self, value: tuple[Any, ...]) -> None:
        kind = value[0]
        if kind == "ready":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(value[2])
        elif kind == "failed":  # its engine did not start: value[1] is the error
            self.alive = False  # it exits on its own (start() gives it time to)
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(value[1])
        elif kind == "closed":
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(None)
        elif (inbox := self._inboxes.get(value[1])) is not None:
            inbox.put_nowait(tuple(value))

    def stopped(self, why: str) -> None:
        """The socket closed: the worker exited, died, or sent garbage."""
        self.alive = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(WorkerGone(f"engine worker {self.index} {why}"))
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        for request, inbox in self._inboxes.items():
            inbox.put_nowait(("gone", request, why))

    async def close(self, timeout: float) -> None:
        if self.alive:
            self.write(("close", timeout))
            if self._closed is not None:
                await asyncio.wait([self._closed], timeout=timeout + EXIT_GRACE_S)
        await self.reap(EXIT_GRACE_S)

    async def reap(self, wait_s: float) -> None:
        """Close the socket and collect the process, killing it after ``wait_s``."""
        self.alive = False
        if self._link is not None:
            self._link.close()
        process = self.process
        if process is None:
            return
        await asyncio.to_thread(process.join, wait_s)
        if process.exitcode is None:
            log.warning("engine worker %d did not exit: killing it", self.index)
            process.kill()
            await asyncio.to_thread(process.join)
        process.close()
        self.process = None


# -- the worker --------------------------------------------------------------------------


def serve_worker(
    factory: EngineFactory, prepare: Callable[[], None] | None, sock: socket.socket
) -> None:
    """A worker process's main: its engine serves the parent's messages until told to
    close or until the parent's socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(_serve(factory, prepare, sock))


async def _serve(
    factory: EngineFactory, prepare: Callable[[], None] | None, sock: socket.socket
) -> None:
    import os

    loop = asyncio.get_running_loop()
    try:
        # Building can fail too (a plugin whose setup raises): the same one-line error.
        engine = factory()
        await engine.start()
    except Exception as exc:
        # The parent raises this same error (a database of another embedding model...),
        # so the bot stops with its one line rather than "engine worker 0 stopped".
        sock.setblocking(True)
        sock.sendall(frame(("failed", _portable(exc))))
        sock.close()
        return
    if prepare is not None:
        prepare()
    parent = _Parent(engine)
    await loop.create_connection(lambda: parent.link, sock=sock)
    parent.write(("ready", os.getpid(), list(engine.commands)))
    await parent.finished


def _portable(exc: Exception) -> Exception:
    """``exc`` if it crosses to the parent (our own errors do), else a RuntimeError with
    its type and message."""
    if pickle_error(exc) is not None:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class _Parent:
    """The worker's end: messages from the parent in, replies and results out."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.link = FrameProtocol("engine worker's parent", self._received, self._lost)
        self._tasks: set[asyncio.Task[None]] = set()
        # Per request: (delivery error or None, the platform ids of what was sent).
        self.acks: dict[int, asyncio.Future[tuple[str | None, list[str] | None]]] = {}
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = False

    def write(self, value: Any) -> None:
        self.link.write(value)

    def _received(self, value: tuple[Any, ...]) -> None:
        kind = value[0]
        if kind == "handle":
            self._spawn(self._handle(value[1], value[2]))
        elif kind == "react":
            self._spawn(self._react(value[1], value[2]))
        elif kind == "sent":
            ack = self.acks.pop(value[1], None)
            if ack is not None and not ack.done():
                ack.set_result((value[2], value[3]))
        elif kind == "close":
            self._spawn(self._close(value[1]))

    def _lost(self, why: str) -> None:
        # The parent is gone (or closed us): nobody can be answered any more.
        gone = ConnectionError("the parent process closed the worker's socket")
        for ack in self.acks.values():
            if not ack.done():
                ack.set_exception(gone)
        self.acks.clear()
        self._spawn(self._close(EXIT_GRACE_S))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, request: int, message: IncomingMessage) -> None:
        try:
            await self.engine.handle(message, _RemoteResponder(self, request))
        except Exception as exc:
            log.exception("engine worker: a message of %s failed", message.owner)
            self.write(("done", request, f"{type(exc).__name__}: {exc}"))
        else:
            self.write(("done", request, None))

    async def _react(self, request: int, reaction: IncomingReaction) -> None:
        try:
            await self.engine.handle_reaction(reaction)
        except Exception as exc:
            log.exception("engine worker: a reaction of %s failed", reaction.owner)
            self.write(("done", request, f"{type(exc).__name__}: {exc}"))
        else:
            self.write(("done", request, None))

    async def _close(self, timeout: float) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            await self.engine.close(timeout)
        finally:
            self.write(("closed",))
            self.link.close()
            if not self.finished.done():
                self.finished.set_result(None)


class _RemoteResponder:
    """A worker's responder for one message: replies go to the parent, which delivers
    them; ``send`` returns once the parent says the reply was delivered (or raises what
    delivery raised)."""

    def __init__(self, link: _Parent, request: int) -> None:
        self.link = link
        self.request = request

    async def send(self, reply: Reply) -> list[str] | None:
        ack: asyncio.Future[tuple[str | None, list[str] | None]] = (
            asyncio.get_running_loop().create_future()
        )
        self.link.acks[self.request] = ack
        self.link.write(("send", self.request, reply))
        error, message_ids = await ack
        if error is not None:
            raise DeliveryFailed(error)
        return message_ids

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def _typing() -> AsyncIterator[None]:
            self.link.write(("typing", self.request, True))
            # Out now, not at the end of this turn of the loop: whatever runs next
            # before the turn ends (a model that blocks) must not hold the indicator back.
            self.link.link.flush()
            try:
                yield
            finally:
                self.link.write(("typing", self.request, False))

        return _typing()


class DeliveryFailed(RuntimeError):
    """The parent could not deliver a reply (what the adapter raised, as text)."""
