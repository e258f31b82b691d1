"""A scripted provider for tests and demos: replies come from a list or a function."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider

ScriptFn = Callable[[Sequence[ChatMessage]], str]


class ScriptedProvider(LLMProvider):
    """Answers from ``script``: a list consumed in order (the last entry repeats), or a
    function of the prompt. An entry that is an Exception instance is raised as LLMError.
    With nothing scripted it echoes the user's last message, so the console still talks.
    Every prompt it sees is kept in ``prompts`` for tests to inspect."""

    name = "scripted"

    def __init__(
        self,
        script: Sequence[str | BaseException] | ScriptFn | None = None,
        *,
        latency_s: float = 0.0,
        model: str = "scripted",
    ) -> None:
        self._fn: ScriptFn | None = script if callable(script) else None
        self._queue: list[str | BaseException] = (
            list(script) if isinstance(script, Sequence) else []
        )
        self.latency_s = latency_s
        self.model = model
        self.prompts: list[list[ChatMessage]] = []

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        self.prompts.append(list(messages))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._fn is not None:
            return Generation(text=self._fn(messages), model=self.model)
        if self._queue:
            entry = self._queue.pop(0) if len(self._queue) > 1 else self._queue[0]
            if isinstance(entry, BaseException):
                raise LLMError(str(entry) or type(entry).__name__)
            return Generation(text=entry, model=self.model)
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return Generation(
            text=f"Você disse: {last_user}" if last_user else "Olá!", model=self.model
        )
