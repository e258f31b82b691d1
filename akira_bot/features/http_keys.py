"""Feature: the HTTP side's credentials are part of the person's data.

Registers the key store (akira_bot.http.keystore) with the storage, whether or not this
process serves HTTP: ``/forgetme`` and ``akira-bot memory forget`` then delete the
person's Mind Keys with the rest of their data, and their export lists them (never a
hash). Needs nothing of the ``http`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akira_bot.settings import Settings
    from core.commands import CommandRouter
    from core.pipeline import Pipeline
    from core.services import Services


def install(
    settings: Settings, services: Services, pipeline: Pipeline, router: CommandRouter
) -> None:
    from akira_bot.http.keystore import SQLiteKeyStore

    services.storage.register(SQLiteKeyStore(services.storage.db))
