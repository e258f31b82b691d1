"""The identify stage: the person's language is detected per message and stored beside
the message, not before it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ask, make_message

PT = "oi, tudo bem? hoje foi um dia longo no trabalho"
EN = "I finally fixed the bug in the payment service, feeling great"


async def stored_language(engine: Any, owner: str) -> str | None:
    row = await engine.services.storage.db.fetchone(
        "SELECT language FROM users WHERE key = ?", (owner,)
    )
    return None if row is None else row[0]


async def test_the_language_a_person_switches_to_is_stored_by_the_time_the_reply_is_done(
    engine_factory: Callable[..., Any],
) -> None:
    engine, _ = await engine_factory(script=["ok", "ok", "ok"])
    for text, language in ((PT, "pt"), (EN, "en"), (PT, "pt")):
        replies = await ask(engine, make_message(text, user="7"))
        assert replies.texts == ["ok"]
        assert await stored_language(engine, "telegram:7") == language
        # The kept row says the same as the file.
        user = await engine.services.storage.users.get("telegram:7")
        assert user is not None and user.language == language


async def test_a_language_that_cannot_be_stored_costs_only_the_preference(
    engine_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    engine, _ = await engine_factory(script=["ok", "ok"])
    await ask(engine, make_message(PT, user="8"))
    # A real SQLite failure on exactly that write: the language column refuses updates.
    await engine.services.storage.db.run(
        lambda raw: raw.execute(
            "CREATE TRIGGER no_language BEFORE UPDATE OF language ON users"
            " BEGIN SELECT RAISE(ABORT, 'language is read-only'); END"
        )
    )
    with caplog.at_level(logging.WARNING, logger="core.stages.basic"):
        replies = await ask(engine, make_message(EN, user="8", message_id="m-en"))
    assert replies.texts == ["ok"]  # answered all the same
    assert await stored_language(engine, "telegram:8") == "pt"
    stored = await engine.services.storage.db.fetchall(
        "SELECT content FROM nodes WHERE owner = ? AND type = 'user_message'", ("telegram:8",)
    )
    assert EN in [r[0] for r in stored]  # the message itself was kept
    assert "could not store the language of telegram:8" in caplog.text
