"""Built-in plugin (always set up): the HTTP side's credentials are part of the person's
data.

Registers the key store (akira_bot.http.keystore) with the storage, whether or not this
process serves HTTP: ``/forgetme`` and ``akira-bot memory forget`` then delete the
person's Mind Keys with the rest of their data, and their export lists them (never a
hash). Needs nothing of the ``http`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akira_bot.plugins import PluginAPI


def setup(api: PluginAPI) -> None:
    from akira_bot.http.keystore import key_store_for

    storage = api.services.storage
    storage.register(key_store_for(storage))
