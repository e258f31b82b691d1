"""The database's group commits in a process of their own.

On the event loop, a group commit holds the loop for as long as SQLite takes: at 1000
people talking, a third of the loop's time went to writing (B-tree pages of the nodes,
their indexes, edges, tags and the full-text index), and every message waiting behind a
batch waited for all of it. On a thread it is worse: each statement hands the GIL to the
thread and back, and each hand-off waits for the busy loop. A process has its own GIL:
the loop hands over a batch (pickled write functions, see :meth:`Database.run`), goes on
serving everyone else, and gets the results back in one message when the batch has
committed.

Protocol, over a socket pair: every message is an 8-byte length and a pickle. The child
first sends ``READY``; then, for each batch of write functions it gets, it runs them with
:func:`core.storage.sqlite_connection._group_transaction` and sends back the list of (ok, result or
exception). It exits when the socket closes (the parent closed the database, or died),
and ignores SIGINT and SIGTERM: a Ctrl-C or a service manager's stop reaches the whole
process group, and the parent's graceful shutdown still needs it to commit what is queued.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.ipc import HEADER, FrameProtocol, frame, pickle_error

log = logging.getLogger(__name__)

READY = "ready"
# How long close() waits for the child to finish what it has and exit before killing it.
EXIT_WAIT_S = 10.0

WriteResults = list[tuple[bool, Any]]

# Not ``-m`` this module: the package imports it first, and runpy warns about that.
_CHILD_MAIN = f"import sys; from {__name__} import serve; serve(int(sys.argv[1]), sys.argv[2])"


class WriterGone(RuntimeError):
    """The writer process stopped: whether its last batch committed is unknown."""


class NotLoadable(RuntimeError):
    """The child could not unpickle a batch (a write function from ``__main__``, or from
    a module on a path added after it started): nothing of it ran, so it can run on the
    loop instead."""


def encode_batch(fns: Sequence[Callable[[Any], Any]]) -> bytes | None:
    """The batch as one message, or None when a function cannot cross to another process
    (a lambda, a closure, a bound method of an unpicklable object): such a batch is run
    on the loop instead."""
    try:
        return frame(list(fns))
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


OnReply = Callable[[WriteResults], None]


class WriterProcess:
    """The parent's end: starts the child, sends it batches, hands back their results.

    One batch at a time is expected (the database's write lock sees to that), but results
    are matched to batches in order all the same. Replies are read by a protocol, not a
    stream reader's task: a batch's callers are settled right where its reply is read, in
    the same turn of the event loop. Through a reader task and the database's drain task
    each write cost two more turns, and under load a turn is many milliseconds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._process: asyncio.subprocess.Process | None = None
        self._link: FrameProtocol | None = None
        self._closed: asyncio.Future[None] | None = None
        self._waiting: collections.deque[tuple[asyncio.Future[WriteResults], OnReply | None]] = (
            collections.deque()
        )
        self._ready: asyncio.Future[bool] | None = None
        self.alive = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the child; it becomes :attr:`ready` in the background (its imports take
        ~0.4 s, meanwhile batches run on the loop)."""
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair()
        try:
            env = dict(os.environ)
            # The child imports the write functions by name: it must find this code where
            # the parent found it (a source checkout run without installing, say).
            env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _CHILD_MAIN,
                str(child.fileno()),
                str(self.path),
                pass_fds=(child.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._ready = loop.create_future()
        self._closed = loop.create_future()
        self.alive = True
        _, self._link = await loop.create_connection(
            lambda: FrameProtocol(
                "database writer process",
                self._reply,
                lambda why: self._stopped(WriterGone(f"the database writer process {why}")),
            ),
            sock=parent,
        )

    @property
    def ready(self) -> bool:
        return self.alive and self._ready is not None and self._ready.done()

    async def wait_ready(self) -> bool:
        """True once the child can take batches; False when it died first."""
        if self._ready is None:
            return False
        return await asyncio.shield(self._ready)

    async def run(self, message: bytes, on_reply: OnReply | None = None) -> WriteResults:
        """Send one encoded batch and wait until it has committed (or failed).
        ``on_reply(results)`` runs as soon as the reply is read, before this returns."""
        if not self.ready or self._link is None:
            raise WriterGone("the database writer process is not running")
        future: asyncio.Future[WriteResults] = asyncio.get_running_loop().create_future()
        self._waiting.append((future, on_reply))
        # Buffered by the transport: one batch is in flight, and the child reads it whole.
        self._link.write_frame(message)
        return await future

    def _reply(self, value: Any) -> None:
        assert self._ready is not None
        if not self._ready.done():
            self._ready.set_result(value == READY)
            return
        future, on_reply = self._waiting.popleft()
        if isinstance(value, BaseException):  # the whole batch failed
            if not future.done():
                future.set_exception(value)
            return
        if on_reply is not None:
            try:
                on_reply(value)
            except Exception:  # the batch's own waiter still gets the results
                log.exception("database writer process: settling a batch failed")
        if not future.done():
            future.set_result(value)

    def _stopped(self, error: WriterGone) -> None:
        self.alive = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(False)
        while self._waiting:
            future, _ = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def close(self) -> None:
        """Close the socket (the child commits what it has, then exits) and reap it. A
        child still starting has been sent nothing: it is killed rather than waited for
        (a one-shot command would otherwise wait out its imports)."""
        started = self.ready
        self.alive = False
        if not started and self._process is not None and self._process.returncode is None:
            self._process.kill()
        if self._link is not None:
            link, self._link = self._link, None
            link.close()
            if self._closed is not None:
                await asyncio.wait([self._closed], timeout=EXIT_WAIT_S)
        if self._process is not None:
            process, self._process = self._process, None
            try:
                await asyncio.wait_for(process.wait(), EXIT_WAIT_S)
            except TimeoutError:
                log.warning("database writer process did not exit: killing it")
                process.kill()
                await process.wait()


# -- the child ---------------------------------------------------------------------------


def _receive(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _send(sock: socket.socket, value: Any) -> None:
    sock.sendall(frame(value))


def _portable(results: WriteResults) -> WriteResults:
    """Results the parent can unpickle: a value or exception that cannot cross is
    replaced by an error that says what it was."""
    from core.storage.errors import StorageError

    out: WriteResults = []
    for ok, value in results:
        if (problem := pickle_error(value)) is not None:  # any failure to cross is reported
            out.append((False, StorageError(f"write result could not be returned: {problem!r}")))
        else:
            out.append((ok, value))
    return out


def _portable_error(exc: BaseException) -> Exception:
    from core.storage.errors import StorageError

    return StorageError(f"write failed: {exc!r}")


def serve(fd: int, path: str) -> None:
    """The child's loop: batches in, results out, until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from core.storage import sqlite_rows  # noqa: F401 - the write functions' module, loaded once
    from core.storage.sqlite_connection import _group_transaction, _write_connection

    sock = socket.socket(fileno=fd)
    conn = _write_connection(Path(path), busy_timeout_ms=5000)
    try:
        _send(sock, READY)
        while (header := _receive(sock, HEADER.size)) is not None:
            (size,) = HEADER.unpack(header)
            payload = _receive(sock, size)
            if payload is None:
                break
            reply: WriteResults | Exception
            try:
                fns = pickle.loads(payload)
            except Exception as exc:  # a function the child cannot import: nothing ran
                reply = NotLoadable(f"{type(exc).__name__}: {exc}")
            else:
                try:
                    reply = _group_transaction(conn, fns)
                except Exception as exc:  # begin or commit failed: the whole batch
                    reply = exc
            try:
                _send(sock, reply)
            except (pickle.PicklingError, TypeError, AttributeError):
                _send(sock, _portable(reply) if isinstance(reply, list) else _portable_error(reply))
    except (BrokenPipeError, ConnectionError):
        pass  # the parent is gone: what committed stays committed
    finally:
        conn.close()
        sock.close()
