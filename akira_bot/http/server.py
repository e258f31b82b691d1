"""The HTTP server (aiohttp) and its place beside the platform adapters.

:class:`HttpAdapter` is started by ``akira-bot run`` like a platform adapter (after the
engine, stopped before it). It serves from the bot's own storage when the engine runs in
this process; with ``AKIRA_BOT__WORKERS`` above 1 the engines live in worker processes,
so it opens the database itself: SQLite is shared between processes already (one writer
at a time, each process catching up with the others' deletions through the change log),
so a memory stored or forgotten here is seen by the worker serving that person.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from adapters.base import Adapter
from akira_bot.http.auth import Authenticator
from akira_bot.http.keystore import KeyStore, key_store_for
from akira_bot.http.schemas import FieldError
from akira_bot.http.state import STATE, HttpState
from akira_bot.storage import build_storage
from core.memory.structured import EXTRAS_KEY, StructuredMemories
from core.storage import StorageError
from core.storage.api import Storage
from core.storage.sqlite_memories import MemoryValidationError

log = logging.getLogger(__name__)

# A body larger than this is refused before it is read (413); content itself is bounded
# far lower (MAX_CONTENT_CHARS) and answered 400 naming the field.
MAX_BODY_BYTES = 256 * 1024
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_metrics(workers: int) -> None:
    """Before anything imports prometheus_client: with engine worker processes, have
    every process write its metrics to one directory so the scrape here adds them up."""
    if workers > 1 and not os.environ.get(MULTIPROC_ENV):
        directory = tempfile.mkdtemp(prefix="akira-metrics-")
        os.environ[MULTIPROC_ENV] = directory
        atexit.register(shutil.rmtree, directory, ignore_errors=True)


def _json_error(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


@web.middleware
async def errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every refusal as JSON ``{"error", "field"?}``; nothing unexpected leaks a trace."""
    try:
        return await handler(request)
    except FieldError as exc:
        return web.json_response(exc.to_dict(), status=400)
    except MemoryValidationError as exc:
        return _json_error(400, str(exc), field="body")
    except web.HTTPException as exc:
        if exc.content_type != "text/plain" or exc.status < 400:
            raise  # ours already (JSON, or the admin view's HTML), or a redirect
        if isinstance(exc, web.HTTPRequestEntityTooLarge):
            return _json_error(413, f"the body is larger than {MAX_BODY_BYTES} bytes", field="body")
        return _json_error(exc.status, exc.reason, **_allow(exc))
    except StorageError as exc:
        log.error("HTTP %s %s: storage error: %s", request.method, request.path, exc)
        return _json_error(503, "storage unavailable")
    except Exception:
        log.exception("HTTP %s %s failed", request.method, request.path)
        return _json_error(500, "internal error")


def _allow(exc: web.HTTPException) -> dict[str, Any]:
    allow = exc.headers.get("Allow")
    return {"allow": allow} if allow else {}


@web.middleware
async def security_headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    response = await handler(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def build_app(state: HttpState) -> web.Application:
    from akira_bot.http import admin, memory_api, openapi, ops

    app = web.Application(middlewares=[security_headers, errors], client_max_size=MAX_BODY_BYTES)
    app[STATE] = state
    app.add_routes(openapi.routes)
    app.add_routes(ops.routes)
    app.add_routes(memory_api.routes)
    admin.setup(app)
    return app


async def make_state(
    storage: Storage,
    *,
    jwt_secret: str | None,
    memories: StructuredMemories | None = None,
    keys: KeyStore | None = None,
    adapters: Sequence[Any] = (),
    handler: Any = None,
) -> HttpState:
    """The shared state over an open ``storage``; the key table is created if missing."""
    keys = keys or key_store_for(storage)
    await keys.setup()
    return HttpState(
        storage=storage,
        memories=memories or StructuredMemories(storage.memories, storage=storage),
        keys=keys,
        auth=Authenticator(keys, jwt_secret),
        adapters=adapters,
        handler=handler,
    )


class HttpServer:
    """An aiohttp site on ``host:port`` (port 0: a free one, see :attr:`port`)."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class HttpAdapter(Adapter):
    """The HTTP side as one more thing ``akira-bot run`` starts and stops."""

    name = "http"

    def __init__(self, settings: Any, handler: Any, adapters: Sequence[Adapter] = ()) -> None:
        super().__init__(handler)
        self.settings = settings
        self.adapters = list(adapters)
        self.server: HttpServer | None = None
        self._own_storage: Storage | None = None

    async def start(self) -> None:
        from adapters.base import AdapterStartError

        http = self.settings.http
        secret = http.jwt_secret.get_secret_value() if http.jwt_secret else None
        services = getattr(self.handler, "services", None)
        if services is not None:  # the engine runs here: use its storage and service
            storage = services.storage
            memories = services.extras.get(EXTRAS_KEY)
        else:  # engine worker processes: this process opens the database itself
            storage = self._own_storage = build_storage(self.settings)
            await storage.open()
            memories = None
        state = await make_state(
            storage,
            jwt_secret=secret,
            memories=memories,
            adapters=self.adapters,
            handler=self.handler,
        )
        if not secret:
            log.warning("HTTP: no AKIRA_HTTP__JWT_SECRET: only Mind Keys work, no admin view")
        self.server = HttpServer(build_app(state), http.host, http.port or 0)
        try:
            await self.server.start()
        except Exception as exc:
            await self._close_storage()
            raise AdapterStartError(
                f"HTTP: cannot listen on {http.host}:{http.port} ({exc.__class__.__name__})"
            ) from None
        log.warning("HTTP API on %s", self.server.url)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None
        await self._close_storage()

    async def _close_storage(self) -> None:
        if self._own_storage is not None:
            await self._own_storage.close()
            self._own_storage = None
