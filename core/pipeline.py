"""The message pipeline: small stages chained middleware-style (like aiogram's).

A stage is ``async def stage(ctx, call_next)``: it does its work, then awaits
``call_next()`` to run the rest of the chain — or returns without it to stop there (a
command answered, a message dropped). Work after ``await call_next()`` runs on the way
back, so a stage can wrap the rest (timing, error handling). Stages are named so a
developer can insert, replace, remove or reorder them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from core.llm.base import ChatMessage, Generation
from core.types import IncomingMessage, Reply, Responder

if TYPE_CHECKING:
    from core.services import Services
    from core.storage.records import MemoryNode, UserRecord

log = logging.getLogger(__name__)

CallNext = Callable[[], Awaitable[None]]


class Stage(Protocol):
    name: str

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None: ...


@dataclass(slots=True)
class PromptSection:
    """A block of the system prompt. Lower ``order`` comes first."""

    title: str
    body: str
    order: int = 50
    # Instructions (tone, rules) rather than remembered data: the cleaner removes echoes
    # of them from replies. Remembered facts may legitimately be repeated to the user.
    instruction: bool = False


@dataclass
class TurnContext:
    """Everything one message's trip through the pipeline knows."""

    message: IncomingMessage
    responder: Responder
    services: Services
    language: str = "pt"
    user: UserRecord | None = None
    text: str = ""  # the validated, bounded, neutralised user text
    node: MemoryNode | None = None  # the stored user message
    sections: list[PromptSection] = field(default_factory=list)
    history: list[ChatMessage] = field(default_factory=list)
    prompt: list[ChatMessage] = field(default_factory=list)
    generation: Generation | None = None
    reply_text: str | None = None
    sent: list[Reply] = field(default_factory=list)
    # Stages may leave facts for later stages here (tone, recall, timings...).
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def owner(self) -> str:
        return self.message.owner

    async def send(self, reply: Reply) -> list[str]:
        """Deliver ``reply``; the platform ids of the messages sent for it (empty when
        the responder cannot tell)."""
        message_ids = await self.responder.send(reply)
        self.sent.append(reply)
        return list(message_ids or ())


class Pipeline:
    """An ordered, editable list of named stages."""

    def __init__(self, stages: Iterable[Stage] = ()) -> None:
        self._stages: list[Stage] = []
        for stage in stages:
            self.add(stage)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self._stages]

    def _index(self, name: str) -> int:
        for i, stage in enumerate(self._stages):
            if stage.name == name:
                return i
        raise KeyError(f"no stage named {name!r}; stages: {', '.join(self.names)}")

    def add(self, stage: Stage, *, before: str | None = None, after: str | None = None) -> None:
        if stage.name in self.names:
            raise ValueError(f"a stage named {stage.name!r} is already in the pipeline")
        if before and after:
            raise ValueError("give before or after, not both")
        if before:
            self._stages.insert(self._index(before), stage)
        elif after:
            self._stages.insert(self._index(after) + 1, stage)
        else:
            self._stages.append(stage)

    def replace(self, name: str, stage: Stage) -> None:
        self._stages[self._index(name)] = stage

    def remove(self, name: str) -> Stage:
        return self._stages.pop(self._index(name))

    def get(self, name: str) -> Stage:
        return self._stages[self._index(name)]

    async def run(self, ctx: TurnContext) -> None:
        # A copy: a stage added mid-flight does not affect this run.
        await _run_from(tuple(self._stages), 0, ctx)


async def _run_from(stages: tuple[Stage, ...], index: int, ctx: TurnContext) -> None:
    """Stage ``index`` with the rest of the chain as its ``call_next``. A partial, not a
    closure that calls itself: that closure was a reference cycle holding the whole turn
    (context, prompt, recalled nodes...) until the garbage collector came by, and those
    collections stopped the event loop for up to 0.5 s under load."""
    if index < len(stages):
        await stages[index](ctx, functools.partial(_run_from, stages, index + 1, ctx))


def stage(name: str) -> Callable[[Callable[[TurnContext, CallNext], Awaitable[None]]], Stage]:
    """Make a stage from a plain async function: ``@stage("audit") async def audit(ctx, nxt)``."""

    def wrap(fn: Callable[[TurnContext, CallNext], Awaitable[None]]) -> Stage:
        class _FunctionStage:
            def __init__(self) -> None:
                self.name = name

            async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
                await fn(ctx, call_next)

        return _FunctionStage()

    return wrap
