"""Messages between AKIRA's own processes: an 8-byte length, then a pickle.

Used over socket pairs between a parent and the children it started itself (the
database's writer process, the engine's worker processes), so both ends run the same
code and trust each other; never over a socket anyone else can reach.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

HEADER = struct.Struct("!Q")


def frame(value: Any) -> bytes:
    """One message: the pickle's length, then the pickle."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


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
