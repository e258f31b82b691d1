"""A PostgreSQL server that goes away gets the same honest behaviour as a full disk: a
polite reply, one log line, nothing acknowledged that was not stored, and recovery when
it is back. The server "goes away" for real, at the network: the bot reaches it through a
TCP relay the test cuts (every open connection reset, the port refusing) and restores."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.i18n import t
from core.llm import ScriptedProvider
from core.types import ReplyKind
from tests.conftest import ask, make_message
from tests.postgres import postgres_database

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


class Relay:
    """127.0.0.1:<port> -> 127.0.0.1:5432, until cut."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 5432)
        self._links.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for link in list(self._links):
            if link.transport is not None:
                link.transport.abort()
        self._links.clear()
        await self._server.wait_closed()
        self._server = None

    async def close(self) -> None:
        if self._server is not None:
            await self.cut()


async def test_database_away_is_a_polite_reply_one_line_and_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    relay = Relay()
    await relay.start()
    async with postgres_database() as dsn:
        through_relay = dsn.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}")
        settings = Settings.model_validate(
            {
                "data_dir": tmp_path,
                "llm": {"provider": "scripted"},
                "embedding": {"backend": "hashing"},
                "emotion": {"detector": "lexicon"},
                "memory": {"extraction": False},
                "storage": {"backend": "postgres", "postgres_dsn": through_relay},
            }
        )
        engine = build_engine(settings, llm=ScriptedProvider(["um", "dois", "três"]))
        try:
            async with engine:
                first = await ask(engine, make_message("antes da queda", at=T0))
                assert first.sent[-1].text == "um"

                await relay.cut()
                caplog.clear()
                with caplog.at_level(logging.WARNING):
                    during = await ask(
                        engine, make_message("durante a queda", at=T0 + timedelta(minutes=1))
                    )
                assert [r.kind for r in during.sent] == [ReplyKind.FALLBACK]
                assert during.sent[0].text == t("storage_unavailable", "pt")
                errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
                assert len(errors) == 1 and "storage unavailable" in errors[0].getMessage()
                assert errors[0].exc_info is None  # one line, no traceback

                await relay.start()  # the server is back, on the same address
                after = await ask(
                    engine, make_message("depois da queda", at=T0 + timedelta(minutes=2))
                )
                assert after.sent[-1].text == "dois"
                stored = await engine.storage.nodes.recent("telegram:42", limit=10)
                assert [n.content for n in stored] == [
                    "antes da queda",
                    "um",
                    "depois da queda",
                    "dois",
                ]  # the message answered "unavailable" was not stored, nor acknowledged
        finally:
            await relay.close()
