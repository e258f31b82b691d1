"""A circuit breaker in front of a provider, so a dead endpoint costs nothing per message.

After ``failure_threshold`` consecutive failures the breaker opens: calls fail at once with
:class:`CircuitOpenError` (an :class:`LLMError`, so the pipeline sends its fallback reply
without waiting for time-outs). After ``reset_after_s`` one trial call is let through
(half-open); its success closes the breaker, its failure opens it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from enum import StrEnum

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitOpenError(LLMError):
    """Raised without calling the provider while the breaker is open."""


class CircuitBreaker:
    """Counts consecutive failures. Not thread-safe by design: it lives on one event loop,
    and every transition happens between awaits."""

    def __init__(
        self,
        failure_threshold: int = 5,
        reset_after_s: float = 30.0,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        if reset_after_s <= 0:
            raise ValueError("reset_after_s must be > 0")
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self.retry_in() <= 0:
            return BreakerState.HALF_OPEN
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial call through (0 when not open)."""
        if self._state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.reset_after_s - self._clock())

    def allow(self) -> bool:
        """May a call go through now? In half-open state only one trial at a time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN:
            return False
        if self._state is BreakerState.OPEN:
            self._state = BreakerState.HALF_OPEN
            log.info("LLM circuit half-open: trying the provider again")
        if self._trial_in_flight:
            return False
        self._trial_in_flight = True
        return True

    def record_success(self) -> None:
        if self._state is not BreakerState.CLOSED:
            log.warning("LLM circuit closed: the provider answers again")
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._trial_in_flight = False

    def record_failure(self) -> None:
        self._failures += 1
        self._trial_in_flight = False
        if self._state is BreakerState.HALF_OPEN or self._failures >= self.failure_threshold:
            if self._state is not BreakerState.OPEN:
                log.warning(
                    "LLM circuit open after %d consecutive failures; next try in %g s",
                    self._failures,
                    self.reset_after_s,
                )
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()

    def release(self) -> None:
        """A call ended with neither success nor failure (cancelled): free the trial slot."""
        self._trial_in_flight = False


class ResilientProvider(LLMProvider):
    """Wraps any provider with a :class:`CircuitBreaker`. Unexpected exceptions from the
    inner provider are counted and re-raised as :class:`LLMError`, so callers only ever
    handle one error type."""

    def __init__(self, inner: LLMProvider, breaker: CircuitBreaker | None = None) -> None:
        self.inner = inner
        self.breaker = breaker or CircuitBreaker()
        self.name = inner.name
        self.model = inner.model

    def __repr__(self) -> str:
        return f"ResilientProvider({self.inner!r}, state={self.breaker.state.value})"

    async def start(self) -> None:
        await self.inner.start()
        self.model = self.inner.model

    async def close(self) -> None:
        await self.inner.close()

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        if not self.breaker.allow():
            raise CircuitOpenError(
                f"LLM provider {self.inner.name!r} is failing "
                f"({self.breaker.consecutive_failures} consecutive errors); "
                f"next try in {self.breaker.retry_in():.0f} s"
            )
        try:
            result = await self.inner.generate(messages, options)
        except LLMError:
            self.breaker.record_failure()
            raise
        except Exception as exc:
            self.breaker.record_failure()
            raise LLMError(
                f"LLM provider {self.inner.name!r} crashed: {type(exc).__name__}"
            ) from exc
        except BaseException:
            # Cancellation says nothing about the provider's health.
            self.breaker.release()
            raise
        self.breaker.record_success()
        return result
