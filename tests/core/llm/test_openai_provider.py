"""OpenAICompatibleProvider against the local fake server over loopback."""

from __future__ import annotations

import logging
import time

import pytest

from core.llm import ChatMessage, GenerationOptions, LLMError
from core.llm.openai import OpenAICompatibleProvider
from tests.fakes.openai_server import (
    FakeOpenAI,
    Hang,
    Malformed,
    RateLimited,
    Reply,
    Status,
    fake_openai_fixture,  # noqa: F401  (provides the fake_openai fixture)
)

SECRET = "sk-test-SECRET-0123456789abcdef"
PROMPT = [
    ChatMessage("system", "Você é AKIRA."),
    ChatMessage("user", "Oi, tudo bem?"),
]


class Sleeps:
    """Records the back-off the provider asked for, without waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def provider(fake: FakeOpenAI, **kwargs: object) -> OpenAICompatibleProvider:
    params: dict[str, object] = {
        "base_url": fake.url,
        "model": "fake-model",
        "api_key": SECRET,
        "timeout_s": 2.0,
        "max_retries": 2,
        "jitter": lambda: 0.0,
    }
    params.update(kwargs)
    return OpenAICompatibleProvider(**params)  # type: ignore[arg-type]


async def test_success_sends_model_messages_and_bearer_key(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Reply("Olá! Tudo ótimo."))
    llm = provider(fake_openai)
    try:
        result = await llm.generate(PROMPT, GenerationOptions(max_tokens=42, temperature=0.2))
    finally:
        await llm.close()
    assert result.text == "Olá! Tudo ótimo."
    assert result.reasoning is None
    assert result.model == "fake-model"
    assert result.usage["completion_tokens"] == 3
    [request] = fake_openai.requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == f"Bearer {SECRET}"
    assert request.model == "fake-model"
    assert request.messages == [
        {"role": "system", "content": "Você é AKIRA."},
        {"role": "user", "content": "Oi, tudo bem?"},
    ]
    assert request.json["max_tokens"] == 42
    assert request.json["temperature"] == 0.2
    assert "response_format" not in request.json


async def test_defaults_from_constructor_and_json_mode(fake_openai: FakeOpenAI) -> None:
    llm = provider(fake_openai, temperature=0.1, max_tokens=7, api_key=None)
    try:
        await llm.generate(PROMPT)
        await llm.generate(PROMPT, GenerationOptions(json_mode=True))
    finally:
        await llm.close()
    first, second = fake_openai.requests
    assert (first.json["temperature"], first.json["max_tokens"]) == (0.1, 7)
    assert first.authorization is None  # no key, no header (Ollama, llama.cpp)
    assert second.json["response_format"] == {"type": "json_object"}


async def test_base_url_with_trailing_slash(fake_openai: FakeOpenAI) -> None:
    llm = provider(fake_openai, base_url=fake_openai.url + "/")
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert result.text == "Eco: Oi, tudo bem?"
    assert fake_openai.requests[0].path == "/v1/chat/completions"


async def test_500_then_success_is_retried_with_backoff(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Status(500), Status(503), Reply("voltei"))
    sleeps = Sleeps()
    llm = provider(fake_openai, sleep=sleeps, backoff_base_s=0.5)
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert result.text == "voltei"
    assert len(fake_openai.requests) == 3
    # Exponential: base * 2**attempt, halved by the zero jitter.
    assert sleeps.calls == [0.25, 0.5]


async def test_429_retry_after_is_honoured(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(RateLimited(retry_after=3), Reply("ok"))
    sleeps = Sleeps()
    llm = provider(fake_openai, sleep=sleeps)
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert result.text == "ok"
    assert sleeps.calls == [3.0]


async def test_429_really_waits_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(RateLimited(retry_after="0.3"), Reply("ok"))
    llm = provider(fake_openai)
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    first, second = fake_openai.requests
    assert result.text == "ok"
    assert second.received_at - first.received_at >= 0.29


async def test_429_with_too_long_retry_after_fails_fast(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(RateLimited(retry_after=600), Reply("never"))
    sleeps = Sleeps()
    llm = provider(fake_openai, sleep=sleeps, max_retry_after_s=30)
    with pytest.raises(LLMError, match="retry after 600"):
        await llm.generate(PROMPT)
    await llm.close()
    assert sleeps.calls == []
    assert len(fake_openai.requests) == 1


async def test_timeout_is_retried_then_llm_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Hang(30), Hang(30))
    sleeps = Sleeps()
    llm = provider(fake_openai, timeout_s=0.3, max_retries=1, sleep=sleeps)
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"timed out after 0.3 s \(after 2 attempts\)"):
        await llm.generate(PROMPT)
    await llm.close()
    assert time.monotonic() - started < 5
    assert len(fake_openai.requests) == 2
    assert len(sleeps.calls) == 1


async def test_timeout_then_success(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Hang(30), Reply("demorei mas cheguei"))
    llm = provider(fake_openai, timeout_s=0.3, sleep=Sleeps())
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert result.text == "demorei mas cheguei"


async def test_400_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Status(400, "context length exceeded"), Reply("never"))
    sleeps = Sleeps()
    llm = provider(fake_openai, sleep=sleeps)
    with pytest.raises(LLMError, match=r"HTTP 400.*context length exceeded"):
        await llm.generate(PROMPT)
    await llm.close()
    assert len(fake_openai.requests) == 1
    assert sleeps.calls == []
    assert fake_openai.pending == 1


async def test_connection_refused_is_retried_then_llm_error() -> None:
    async with FakeOpenAI() as fake:
        url = fake.url  # the port is free again once the server is gone
    sleeps = Sleeps()
    llm = OpenAICompatibleProvider(base_url=url, model="m", max_retries=2, sleep=sleeps)
    with pytest.raises(LLMError, match=r"connection failed.*after 3 attempts"):
        await llm.generate(PROMPT)
    await llm.close()
    assert len(sleeps.calls) == 2


@pytest.mark.parametrize(
    "behaviour",
    [Malformed(), Malformed('{"choices": []}'), Malformed("<html>bad gateway</html>", "text/html")],
)
async def test_malformed_answers_raise_llm_error(
    fake_openai: FakeOpenAI, behaviour: Malformed
) -> None:
    fake_openai.queue(behaviour)
    llm = provider(fake_openai, sleep=Sleeps())
    with pytest.raises(LLMError, match=r"not JSON|no choices"):
        await llm.generate(PROMPT)
    await llm.close()
    assert len(fake_openai.requests) == 1


async def test_reasoning_content_is_kept_out_of_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(
        Reply("Resposta final.", reasoning="O usuário quer X; vou responder Y."),
        Reply("<think>segredo</think><!WARM_FRIENDLY_MODE>Oi!"),
    )
    llm = provider(fake_openai)
    try:
        first = await llm.generate(PROMPT)
        second = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert first.text == "Resposta final."
    assert first.reasoning == "O usuário quer X; vou responder Y."
    assert "vou responder" not in first.text
    # In-content thinking and tags are passed through untouched: the cleaner strips them.
    assert second.text == "<think>segredo</think><!WARM_FRIENDLY_MODE>Oi!"


async def test_null_content_is_empty_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Reply(None, reasoning="só pensei"))
    llm = provider(fake_openai)
    try:
        result = await llm.generate(PROMPT)
    finally:
        await llm.close()
    assert result.text == ""
    assert result.reasoning == "só pensei"


async def test_key_never_in_errors_repr_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    # The server rejects the key and echoes it back, as some gateways do.
    async with FakeOpenAI() as fake:
        fake.queue(Status(500, f"upstream said: bad key {SECRET}"), Status(401, f"bad {SECRET}"))
        llm = provider(fake, sleep=Sleeps())
        with caplog.at_level(logging.DEBUG), pytest.raises(LLMError) as caught:
            await llm.generate(PROMPT)
        await llm.close()
        assert fake.requests[0].authorization == f"Bearer {SECRET}"
    message = str(caught.value)
    assert "HTTP 401" in message
    assert SECRET not in message
    assert SECRET not in repr(caught.value)
    assert SECRET not in repr(llm)
    assert "***" in caplog.text  # the 500 was logged on retry, scrubbed
    assert SECRET not in caplog.text
    for record in caplog.records:
        assert SECRET not in record.getMessage()


async def test_wrong_key_against_protected_server_is_401_not_retried() -> None:
    async with FakeOpenAI(api_key="the-right-key") as fake:
        llm = provider(fake, sleep=Sleeps())
        with pytest.raises(LLMError, match="HTTP 401"):
            await llm.generate(PROMPT)
        await llm.close()
        assert len(fake.requests) == 1


def test_threaded_fake_serves_blocking_clients() -> None:
    import httpx

    with FakeOpenAI.in_thread() as fake:
        fake.queue(Reply("da thread"))
        response = httpx.post(
            f"{fake.url}/chat/completions",
            json={"model": "x", "messages": [{"role": "user", "content": "oi"}]},
            timeout=5,
        )
        models = httpx.get(f"{fake.url}/models", timeout=5)
    assert response.json()["choices"][0]["message"]["content"] == "da thread"
    assert models.json()["data"][0]["id"] == "fake-model"
    assert fake.completion_requests[0].messages == [{"role": "user", "content": "oi"}]


async def test_adapts_to_models_that_refuse_max_tokens_and_temperature(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.queue(
        Status(400, "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."),
        Status(400, "Unsupported value: 'temperature' does not support 0.7 with this model."),
        Reply("ok"),
        Reply("de novo"),
    )
    sleeps = Sleeps()
    llm = provider(fake_openai, sleep=sleeps, max_retries=0)
    try:
        first = await llm.generate(PROMPT, GenerationOptions(max_tokens=30))
        second = await llm.generate(PROMPT, GenerationOptions(max_tokens=30))
    finally:
        await llm.close()
    assert (first.text, second.text) == ("ok", "de novo")
    assert sleeps.calls == []
    final = fake_openai.requests[2].json
    assert final["max_completion_tokens"] == 30
    assert "max_tokens" not in final and "temperature" not in final
    # Remembered: the next request is sent in the right dialect at once.
    assert len(fake_openai.requests) == 4
    assert "max_tokens" not in fake_openai.requests[3].json


async def test_unrelated_400_is_not_adapted(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Status(400, "Invalid 'messages[1].role'"), Reply("never"))
    llm = provider(fake_openai, sleep=Sleeps())
    with pytest.raises(LLMError, match="HTTP 400"):
        await llm.generate(PROMPT)
    await llm.close()
    assert len(fake_openai.requests) == 1
