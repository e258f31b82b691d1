"""A local OpenAI-compatible ``/chat/completions`` server over loopback, for fault tests.

``mode`` decides how it answers: ``ok`` (after ``delay_s``), ``error`` (HTTP 500),
``hang`` (never answers). Memory-extraction requests (``response_format`` json) are
answered at once with an empty proposal list, so background work never slows a test.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from aiohttp import web

Mode = Literal["ok", "error", "hang"]


class FakeOpenAI:
    def __init__(
        self,
        *,
        mode: Mode = "ok",
        delay_s: float = 0.0,
        reply: str = "ok",
        reasoning: str | None = None,
    ) -> None:
        self.mode: Mode = mode
        self.delay_s = delay_s
        self.reply = reply
        self.reasoning = reasoning  # sent as ``reasoning_content`` (DeepSeek, vLLM)
        self.requests: list[dict[str, Any]] = []  # chat requests (not extraction)
        self.answered = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._hung: list[asyncio.Event] = []
        self._changed = asyncio.Condition()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    async def __aenter__(self) -> FakeOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for event in self._hung:
            event.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for_requests(self, n: int, within: float = 20.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= n)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("response_format"):
            return web.json_response(_completion('{"memories": []}'))
        self.requests.append(body)
        async with self._changed:
            self._changed.notify_all()
        if self.mode == "error":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if self.mode == "hang":
            event = asyncio.Event()
            self._hung.append(event)
            await event.wait()
            return web.json_response({"error": {"message": "gone"}}, status=503)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.answered += 1
        return web.json_response(_completion(self.reply, self.reasoning))


def _completion(text: str, reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
