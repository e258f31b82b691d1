"""What every handler of the HTTP side shares (``request.app[STATE]``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from akira_bot.http.auth import Authenticator
from akira_bot.http.keystore import KeyStore
from core.memory.structured import StructuredMemories
from core.storage.api import Storage


@dataclass
class HttpState:
    storage: Storage
    memories: StructuredMemories
    keys: KeyStore
    auth: Authenticator
    # The platform adapters beside the server (for /health), the engine or sharded
    # engine (LLM breaker, queue depth), both optional: a test may serve storage alone.
    adapters: Sequence[Any] = ()
    handler: Any = None
    # Extra health checks by name: each returns a JSON-ready status, "ok" or not.
    checks: dict[str, Callable[[], Any]] = field(default_factory=dict)


STATE = web.AppKey("akira_state", HttpState)
