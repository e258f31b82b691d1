"""Any OpenAI-compatible Chat Completions server: OpenAI, Ollama, llama.cpp server, vLLM.

Plain httpx, no SDK. ``base_url`` is the API root that contains ``/chat/completions``
(same rule as the OpenAI SDK): ``https://api.openai.com/v1``, ``http://localhost:11434/v1``.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
from pydantic import SecretStr

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider
from core.llm.config import DEFAULT_OPENAI_BASE_URL, DEFAULT_OPENAI_MODEL

log = logging.getLogger(__name__)

SleepFn = Callable[[float], Awaitable[None]]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_ERROR_SNIPPET = 200


class OpenAICompatibleProvider(LLMProvider):
    """Chat completion over HTTP with a per-request time-out and bounded retries.

    Retried (exponential backoff with jitter): 429 (its ``Retry-After`` is honoured up to
    ``max_retry_after_s``), 408/409/425, every 5xx, connection errors and time-outs.
    Any other 4xx fails at once. A body that is not the expected JSON fails at once.
    ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, OpenRouter) goes to
    :attr:`Generation.reasoning`, never into the text. The key is kept in a SecretStr and
    scrubbed from every error message.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: SecretStr | str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.7,
        max_tokens: int = 512,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        max_retry_after_s: float = 30.0,
        client: httpx.AsyncClient | None = None,
        sleep: SleepFn = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base_url = (base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")
        self.endpoint = f"{self.base_url}/chat/completions"
        self.model = model or DEFAULT_OPENAI_MODEL
        self._api_key: SecretStr | None = (
            SecretStr(api_key) if isinstance(api_key, str) else api_key
        )
        if self._api_key is not None and not self._api_key.get_secret_value():
            self._api_key = None
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self._client = client
        self._owns_client = client is None
        self._sleep = sleep
        self._jitter = jitter
        # Learned from the server's 400s (see _adapt).
        self._token_field = "max_tokens"
        self._send_temperature = True

    def __repr__(self) -> str:
        key = "set" if self._api_key is not None else "none"
        return f"OpenAICompatibleProvider(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    async def start(self) -> None:
        self._ensure_client()

    async def close(self) -> None:
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    def _ensure_client(self) -> httpx.AsyncClient:
        if self._client is None:
            # The key goes on each request, not on the client, so a shared client never
            # carries it and the client's repr can never show it.
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s))
            self._owns_client = True
        return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    def _scrub(self, text: str) -> str:
        """Remove the key from anything that may end up in a log or an exception (servers
        sometimes echo the credential they rejected)."""
        if self._api_key is not None:
            secret = self._api_key.get_secret_value()
            if secret:
                text = text.replace(secret, "***")
        return text

    def _payload(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None
    ) -> dict[str, Any]:
        # options=None means "use the configured defaults"; explicit options win.
        temperature = self.temperature if options is None else options.temperature
        max_tokens = self.max_tokens if options is None else options.max_tokens
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self._token_field: max_tokens,
            "stream": False,
        }
        if self._send_temperature:
            payload["temperature"] = temperature
        if options is not None and options.json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        # "Equal jitter": at least half the ceiling, so retries never hammer at once.
        return ceiling / 2 + ceiling / 2 * self._jitter()

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        client = self._ensure_client()
        payload = self._payload(messages, options)
        attempts = self.max_retries + 1
        attempt = 0
        adaptations = 0
        last_problem = "no attempt made"
        while True:
            delay: float | None = None
            try:
                response = await client.post(
                    self.endpoint,
                    json=payload,
                    headers=self._headers(),
                    timeout=self.timeout_s,
                )
            except httpx.TimeoutException:
                last_problem = f"timed out after {self.timeout_s:g} s"
            except httpx.TransportError as exc:
                last_problem = f"connection failed ({type(exc).__name__}: {self._scrub(str(exc))})"
            else:
                status = response.status_code
                if status < 400:
                    return self._parse(response)
                snippet = self._scrub(response.text[:_ERROR_SNIPPET].strip())
                last_problem = f"HTTP {status}" + (f": {snippet}" if snippet else "")
                if status >= 500 or status in _RETRYABLE_STATUS:
                    retry_after = _retry_after_seconds(response.headers.get("retry-after"))
                    if retry_after is not None:
                        if retry_after > self.max_retry_after_s:
                            raise LLMError(
                                f"{self.base_url}: rate limited, server asks to retry after "
                                f"{retry_after:g} s (more than {self.max_retry_after_s:g} s)"
                            )
                        delay = retry_after
                elif status == 400 and adaptations < 2 and self._adapt(response.text, payload):
                    # Same request in the dialect this model wants; not a retry.
                    adaptations += 1
                    continue
                else:
                    raise LLMError(f"{self.base_url}: {last_problem}")
            attempt += 1
            if attempt >= attempts:
                break
            wait = delay if delay is not None else self._backoff(attempt - 1)
            log.warning(
                "LLM request to %s failed (%s); retry %d/%d in %.2f s",
                self.base_url,
                last_problem,
                attempt,
                self.max_retries,
                wait,
            )
            await self._sleep(wait)
        raise LLMError(f"{self.base_url}: {last_problem} (after {attempts} attempts)")

    def _adapt(self, error_body: str, payload: dict[str, Any]) -> bool:
        """Newer OpenAI models (o-series, gpt-5) refuse ``max_tokens`` and any
        ``temperature`` but the default; their 400 names the fix. Adapt the payload, and
        remember it for the next requests, instead of failing every message."""
        body = error_body.lower()
        if "max_completion_tokens" in body and "max_tokens" in payload:
            payload["max_completion_tokens"] = payload.pop("max_tokens")
            self._token_field = "max_completion_tokens"
            return True
        if (
            "temperature" in body
            and "temperature" in payload
            and ("unsupported" in body or "not support" in body)
        ):
            del payload["temperature"]
            self._send_temperature = False
            return True
        return False

    def _parse(self, response: httpx.Response) -> Generation:
        try:
            data = response.json()
        except ValueError:
            raise LLMError(
                f"{self.base_url}: answer is not JSON (HTTP {response.status_code})"
            ) from None
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"{self.base_url}: answer has no choices[0].message") from None
        if not isinstance(message, dict):
            raise LLMError(f"{self.base_url}: choices[0].message is not an object")
        text = _content_text(message.get("content"))
        reasoning_raw = message.get("reasoning_content") or message.get("reasoning")
        reasoning = _content_text(reasoning_raw) or None
        usage_raw = data.get("usage") if isinstance(data, dict) else None
        usage = (
            {k: v for k, v in usage_raw.items() if isinstance(v, int) and not isinstance(v, bool)}
            if isinstance(usage_raw, dict)
            else {}
        )
        model = data.get("model") if isinstance(data.get("model"), str) else self.model
        return Generation(text=text, model=model or self.model, reasoning=reasoning, usage=usage)


def _content_text(content: Any) -> str:
    """``content`` is a string, null, or (some servers) a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    raise LLMError("answer content is neither text nor a list of text parts")


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
