"""Messages between AKIRA's own processes: an 8-byte length, then a pickle.

Used over socket pairs between a parent and the children it started itself (the
database's writer process, the engine's worker processes), so both ends run the same
code and trust each other; never over a socket anyone else can reach.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import struct
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger(__name__)

HEADER = struct.Struct("!Q")


def frame(value: Any) -> bytes:
    """One message: the pickle's length, then the pickle."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def pickle_error(value: Any) -> Exception | None:
    """None when ``value`` survives the trip to the other process (pickled, then
    unpickled there), else what stopped it: an exception whose class cannot be rebuilt
    from its arguments, a lambda, an open file..."""
    try:
        pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as exc:
        return exc
    return None


class FrameDecoder:
    """Bytes as they arrive in, whole messages out (a read may hold several, or part of
    one)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        values = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            end = HEADER.size + size
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            values.append(pickle.loads(payload))
        return values


class FrameProtocol(asyncio.Protocol):
    """A socket to one of our own processes. Each whole message read is handed to
    ``on_frame`` right where it is read, in the same turn of the event loop (a stream
    reader's task would cost every message another turn, and under load a turn is many
    milliseconds). A message that makes no sense (or that ``on_frame`` fails on) closes
    the socket; ``on_lost(why)`` runs once the socket is closed, whichever end closed it."""

    def __init__(
        self, name: str, on_frame: Callable[[Any], None], on_lost: Callable[[str], None]
    ) -> None:
        self.name = name
        self.transport: asyncio.Transport | None = None
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._decoder = FrameDecoder()
        self._garbage: str | None = None
        # Frames written during one turn of the event loop, sent together at its end.
        self._outgoing: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: the only kind this protocol is connected with. Not checked
        # with isinstance: other event loops' transports (uvloop's) are no subclasses of
        # asyncio.Transport, and an assertion here left their processes never connected.
        self.transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def write(self, value: Any) -> None:
        """Send ``value`` (dropped once the socket is closing: the other end is gone)."""
        self.write_frame(frame(value))

    def write_frame(self, data: bytes) -> None:
        """Send a message already made by :func:`frame`: with the others written in
        this turn of the event loop, in one ``send``. Under load a turn writes many
        (a message's reply, its typing indicator, another message's "done"), and one
        system call and one wake-up of the other end for each cost more than the
        frames themselves."""
        if self.transport is None or self.transport.is_closing() or self._loop is None:
            return
        if not self._outgoing:
            self._loop.call_soon(self.flush)
        self._outgoing.append(data)

    def flush(self) -> None:
        """Send the frames written so far (on its own at the end of the loop's turn)."""
        frames, self._outgoing = self._outgoing, []
        if frames and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(frames))

    def close(self) -> None:
        if self.transport is not None:
            self.flush()
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        try:
            for value in self._decoder.feed(data):
                self._on_frame(value)
        except Exception as exc:
            log.exception("%s: bad message", self.name)
            self._garbage = f"sent garbage: {exc!r}"
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        why = self._garbage or ("stopped" if exc is None else f"stopped: {exc!r}")
        self._on_lost(why)
