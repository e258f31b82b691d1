"""Circuit breaker transitions with a fake clock, and the provider wrapper."""

from __future__ import annotations

import asyncio

import pytest

from core.llm import (
    BreakerState,
    ChatMessage,
    CircuitBreaker,
    CircuitOpenError,
    LLMError,
    ResilientProvider,
    ScriptedProvider,
)

PROMPT = [ChatMessage("user", "oi")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_closed_opens_after_n_consecutive_failures() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(3, 30, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED
    breaker.record_success()  # a success resets the count
    for _ in range(3):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    assert breaker.retry_in() == pytest.approx(30)


def test_half_open_after_reset_then_closed_on_success() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1, 10, clock=clock)
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 9.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()  # the one trial call
    assert not breaker.allow()  # others still fail fast while it runs
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.consecutive_failures == 0
    assert breaker.allow() and breaker.allow()


def test_half_open_failure_reopens_for_a_full_period() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(2, 10, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.now += 10
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert breaker.retry_in() == pytest.approx(10)
    clock.now += 5
    assert not breaker.allow()


def test_released_trial_lets_the_next_call_try() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1, 1, clock=clock)
    breaker.record_failure()
    clock.now += 1
    assert breaker.allow()
    breaker.release()
    assert breaker.allow()


def test_invalid_breaker_settings() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitBreaker(0, 1)
    with pytest.raises(ValueError, match="reset_after_s"):
        CircuitBreaker(1, 0)


async def test_resilient_provider_fails_fast_while_open_and_recovers() -> None:
    clock = FakeClock()
    inner = ScriptedProvider([RuntimeError("down"), RuntimeError("down"), "voltei"])
    llm = ResilientProvider(inner, CircuitBreaker(2, 30, clock=clock))
    for _ in range(2):
        with pytest.raises(LLMError, match="down"):
            await llm.generate(PROMPT)
    with pytest.raises(CircuitOpenError, match="next try in 30 s"):
        await llm.generate(PROMPT)
    assert len(inner.prompts) == 2  # the open breaker never called the provider
    clock.now += 30
    result = await llm.generate(PROMPT)
    assert result.text == "voltei"
    assert llm.breaker.state is BreakerState.CLOSED
    assert llm.name == "scripted"


async def test_unexpected_exceptions_become_llm_errors_and_count() -> None:
    def explode(messages: object) -> str:
        raise KeyError("bug")

    llm = ResilientProvider(ScriptedProvider(explode), CircuitBreaker(1, 5, clock=FakeClock()))
    with pytest.raises(LLMError, match="crashed: KeyError"):
        await llm.generate(PROMPT)
    assert llm.breaker.state is BreakerState.OPEN


async def test_cancellation_does_not_count_as_failure() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1, 5, clock=clock)
    breaker.record_failure()
    clock.now += 5
    llm = ResilientProvider(ScriptedProvider(["ok"], latency_s=10), breaker)
    task = asyncio.create_task(llm.generate(PROMPT))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()  # the trial slot was released
