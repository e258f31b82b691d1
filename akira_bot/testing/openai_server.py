"""A fake OpenAI-compatible Chat Completions server for tests (aiohttp, 127.0.0.1, port 0).

Point AKIRA at it exactly like at Ollama or vLLM::

    async with FakeOpenAI() as fake:
        fake.queue(Reply("<think>hmm</think>Olá!"), Status(500), RateLimited(retry_after=0))
        env = {"AKIRA_LLM__PROVIDER": "openai", "AKIRA_LLM__BASE_URL": fake.url}
        ...
        assert fake.requests[0].headers["Authorization"] == "Bearer sk-test"

Each request takes the next queued behaviour; with the queue empty it answers with
``default`` (by default it echoes the last user message, prefixed with ``reply_prefix``).
Tests that block the event loop (``subprocess.run`` of the CLI) use the threaded form,
which serves from its own loop in a background thread::

    with FakeOpenAI.in_thread() as fake:
        subprocess.run([... "akira-bot", "chat"], env={..., "AKIRA_LLM__BASE_URL": fake.url})

A pytest fixture named ``fake_openai`` is provided (when pytest-asyncio is installed);
import it into a test module or conftest:
``from akira_bot.testing.openai_server import fake_openai_fixture  # noqa: F401``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

# --- behaviours -------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A normal completion. ``text`` may contain ``<think>`` blocks or ``<!TAG>`` markers
    (they are sent verbatim, as a real model would). ``reasoning`` is sent as the
    message's ``reasoning_content`` field (DeepSeek/vLLM style). ``text=None`` sends
    ``"content": null``."""

    text: str | None
    reasoning: str | None = None
    finish_reason: str = "stop"
    delay_s: float = 0.0


@dataclass(frozen=True)
class Status:
    """An HTTP error with an OpenAI-style error body."""

    status: int
    message: str = "fake server error"
    headers: dict[str, str] = field(default_factory=dict)


def RateLimited(
    retry_after: float | str | None = 1,
) -> Status:  # a function named like the behaviours it builds
    """429 Too Many Requests, with ``Retry-After`` unless None."""
    headers = {} if retry_after is None else {"Retry-After": _fmt(retry_after)}
    return Status(429, "rate limited", headers)


@dataclass(frozen=True)
class Hang:
    """Accept the request and answer nothing for ``seconds`` (longer than the client's
    time-out), then a normal reply if the client is still there. Ends early when the
    server stops."""

    seconds: float = 30.0
    then: Reply = field(default_factory=lambda: Reply("late"))


@dataclass(frozen=True)
class Malformed:
    """A 200 whose body is not what a Chat Completions client expects."""

    body: str = '{"choices": [ {"message": '
    content_type: str = "application/json"


Behaviour = Reply | Status | Hang | Malformed
Responder = Callable[[dict[str, Any]], "Behaviour | str"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.json, dict) and isinstance(self.json.get("messages"), list):
            return list(self.json["messages"])
        return []

    @property
    def model(self) -> str | None:
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")


def echo_last_user(payload: dict[str, Any], prefix: str = "Eco: ") -> str:
    for message in reversed(payload.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return f"{prefix}{message.get('content', '')}"
    return f"{prefix}(nada)"


def _fmt(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


# --- server -----------------------------------------------------------------------------


class FakeOpenAI:
    """The fake server. ``url`` is the API root to use as ``AKIRA_LLM__BASE_URL``
    (``http://127.0.0.1:PORT/v1``). Both ``/v1/chat/completions`` and
    ``/chat/completions`` answer; ``GET /v1/models`` lists ``model``.

    ``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get 401.
    ``default``: what to answer when the queue is empty: a Behaviour, a string, or a
    function of the request JSON returning either. Default: echo the last user message.
    """

    def __init__(
        self,
        *,
        model: str = "fake-model",
        api_key: str | None = None,
        default: Behaviour | str | Responder | None = None,
        reply_prefix: str = "Eco: ",
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.default = default
        self.reply_prefix = reply_prefix
        self.requests: list[RecordedRequest] = []
        self._queue: list[Behaviour] = []
        # Tests may queue from another thread than the one serving (threaded mode).
        self._lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    # public API

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *behaviours: Behaviour | str) -> FakeOpenAI:
        """Answer the next requests with these, in order (a str is a ``Reply``)."""
        with self._lock:
            self._queue.extend(Reply(b) if isinstance(b, str) else b for b in behaviours)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    async def start(self) -> FakeOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_post("/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        self._stopping = asyncio.Event()
        # Short shutdown: a Hang must not keep the test waiting at teardown.
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, shutdown_timeout=0.5)
        await site.start()
        # Port 0: the OS picked a free port; the runner knows which.
        self._port = int(self._runner.addresses[0][1])
        return self

    async def close(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @classmethod
    @contextmanager
    def in_thread(cls, **kwargs: Any) -> Iterator[FakeOpenAI]:
        """Serve from a background thread with its own event loop, for tests that block
        their own loop (e.g. ``subprocess.run`` of the CLI)."""
        fake = cls(**kwargs)
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        errors: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(fake.start())
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(fake.close())
            loop.close()

        thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
        thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        fake._thread, fake._thread_loop = thread, loop
        try:
            yield fake
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    # handlers

    async def _models(self, request: web.Request) -> web.Response:
        self._record(request, None)
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            payload: Any = json.loads(raw) if raw else None
        except ValueError:
            payload = None
        self._record(request, payload)
        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            return _error(400, "'messages' is a required property", "invalid_request_error")
        behaviour = self._next(payload)
        if isinstance(behaviour, Hang):
            assert self._stopping is not None
            try:
                await asyncio.wait_for(self._stopping.wait(), behaviour.seconds)
                return _error(503, "server shutting down", "server_error")
            except TimeoutError:
                behaviour = behaviour.then
        if isinstance(behaviour, Status):
            kind = "rate_limit_error" if behaviour.status == 429 else "server_error"
            return _error(behaviour.status, behaviour.message, kind, behaviour.headers)
        if isinstance(behaviour, Malformed):
            return web.Response(
                status=200, body=behaviour.body.encode(), content_type=behaviour.content_type
            )
        if behaviour.delay_s:
            await asyncio.sleep(behaviour.delay_s)
        return web.json_response(self._completion(payload, behaviour))

    # internals

    def _record(self, request: web.Request, payload: Any) -> None:
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    method=request.method,
                    path=request.path,
                    headers=dict(request.headers),
                    json=payload,
                    received_at=time.monotonic(),
                )
            )

    def _next(self, payload: dict[str, Any]) -> Behaviour:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        default = self.default
        if callable(default):
            default = default(payload)
        if default is None:
            return Reply(echo_last_user(payload, self.reply_prefix))
        if isinstance(default, str):
            return Reply(default)
        return default

    def _completion(self, payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        prompt_words = sum(
            len(str(m.get("content", "")).split())
            for m in payload["messages"]
            if isinstance(m, dict)
        )
        completion_words = len((reply.text or "").split())
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words,
            },
        }


def _error(
    status: int, message: str, kind: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return web.json_response(body, status=status, headers=headers or {})


async def _fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started :class:`FakeOpenAI` on the test's event loop."""
    async with FakeOpenAI() as fake:
        yield fake


try:  # the fixture only where pytest-asyncio is installed (a bot author's test run)
    import pytest_asyncio
except ImportError:  # pragma: no cover - the kit still serves without pytest
    fake_openai_fixture = _fake_openai
else:
    fake_openai_fixture = pytest_asyncio.fixture(name="fake_openai")(_fake_openai)
