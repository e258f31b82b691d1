"""Frames between AKIRA's processes (``core.ipc``), over a real socket pair."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from core.ipc import HEADER, FrameDecoder, FrameProtocol, frame


def test_the_decoder_gives_whole_messages_however_the_bytes_arrive() -> None:
    values: list[Any] = [("handle", 1, "olá 🙂"), list(range(1000)), None, b"\x00\xff"]
    stream = b"".join(frame(v) for v in values)
    decoder = FrameDecoder()
    out: list[Any] = []
    for i in range(0, len(stream), 7):  # a read may hold part of one, or several
        out += decoder.feed(stream[i : i + 7])
    assert out == values
    assert decoder.feed(b"") == []


async def test_frames_are_handed_over_in_order_and_garbage_closes_the_socket() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    got: list[Any] = []
    lost: asyncio.Future[str] = loop.create_future()
    _, protocol = await loop.create_connection(
        lambda: FrameProtocol("test peer", got.append, lost.set_result), sock=ours
    )
    try:
        theirs.sendall(frame(("send", 1, "a")) + frame(("done", 1, None)))
        for _ in range(100):
            if len(got) == 2:
                break
            await asyncio.sleep(0.01)
        assert got == [("send", 1, "a"), ("done", 1, None)]
        protocol.write(("sent", 1, None))  # the other way
        theirs.settimeout(5)
        header = await loop.run_in_executor(None, theirs.recv, HEADER.size)
        (size,) = HEADER.unpack(header)
        assert FrameDecoder().feed(header + theirs.recv(size)) == [("sent", 1, None)]

        garbage = b"not a pickle"
        theirs.sendall(HEADER.pack(len(garbage)) + garbage)
        why = await asyncio.wait_for(lost, 5)
        assert why.startswith("sent garbage")
        assert not protocol.open
        protocol.write(("ignored", 2, None))  # dropped, no error: the peer is gone
    finally:
        theirs.close()
        protocol.close()


async def test_frames_written_in_one_turn_of_the_loop_go_out_together_at_its_end() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    _, protocol = await loop.create_connection(
        lambda: FrameProtocol("test peer", lambda v: None, lambda why: None), sock=ours
    )
    try:
        theirs.setblocking(False)
        for n in range(3):
            protocol.write(("done", n, None))
        with pytest.raises(BlockingIOError):  # nothing sent yet: the turn is not over
            theirs.recv(1 << 16)
        await asyncio.sleep(0)
        data = theirs.recv(1 << 16)
        assert FrameDecoder().feed(data) == [("done", n, None) for n in range(3)]
        # Closing sends what was written before it.
        protocol.write(("closed",))
        protocol.close()
        await asyncio.sleep(0.05)
        assert FrameDecoder().feed(theirs.recv(1 << 16)) == [("closed",)]
    finally:
        theirs.close()
        protocol.close()


async def test_the_peer_closing_is_reported_once() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    reasons: list[str] = []
    _, protocol = await loop.create_connection(
        lambda: FrameProtocol("test peer", lambda v: None, reasons.append), sock=ours
    )
    theirs.close()
    for _ in range(100):
        if reasons:
            break
        await asyncio.sleep(0.01)
    assert reasons == ["stopped"]
    protocol.close()


def test_frames_pass_on_another_event_loop() -> None:
    """uvloop's transports are no subclasses of asyncio.Transport: the protocol connects
    and exchanges frames on it all the same (it once asserted the class and hung)."""
    uvloop = pytest.importorskip("uvloop")  # a dev dependency: installed in CI

    async def exchange() -> list[Any]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        got: list[Any] = []
        _, protocol = await loop.create_connection(
            lambda: FrameProtocol("uvloop peer", got.append, lambda _why: None), sock=ours
        )
        try:
            assert protocol.open
            theirs.sendall(frame(("send", 1, "a")))
            for _ in range(100):
                if got:
                    break
                await asyncio.sleep(0.01)
            protocol.write(("sent", 1, None))
            theirs.settimeout(5)
            header = await loop.run_in_executor(None, theirs.recv, HEADER.size)
            (size,) = HEADER.unpack(header)
            return [*got, *FrameDecoder().feed(header + theirs.recv(size))]
        finally:
            theirs.close()
            protocol.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.get_loop().__class__.__module__.startswith("uvloop")
        assert runner.run(exchange()) == [("send", 1, "a"), ("sent", 1, None)]
