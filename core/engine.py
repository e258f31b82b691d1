"""The engine: the pipeline behind the ``MessageHandler`` interface adapters call.

It keeps each person's messages in order (one at a time per user, in arrival order) while
different people run concurrently under a global bound; when a user's queue is full the
message is still stored and the person gets a short "busy" reply instead of silence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Self

from core.cleaner import neutralise_user_text
from core.commands import CommandRouter
from core.i18n import detect_language, normalise_locale, t
from core.pipeline import Pipeline, TurnContext
from core.services import Services
from core.storage import is_storage_full, is_storage_unavailable
from core.types import (
    CommandSpec,
    IncomingMessage,
    IncomingReaction,
    Reply,
    ReplyKind,
    Responder,
)

log = logging.getLogger(__name__)


class Startable:
    """What an engine shares with the sharded engine: started and closed explicitly, or
    as an async context manager (``async with engine: ...``)."""

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self, timeout: float = 10.0) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class InFlight:
    """The messages being handled, and a wait for none to be left (a graceful close)."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextmanager
    def one(self) -> Iterator[None]:
        self.count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self._idle.set()

    async def settled(self, timeout: float) -> bool:
        """True once none is left, False when ``timeout`` ran out first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


async def _close_quietly(closing: Awaitable[object], what: str) -> None:
    """Close something after a failed start without hiding the failure that matters."""
    try:
        await closing
    except Exception:
        log.exception("closing %s after a failed start", what)


@dataclass
class _UserLane:
    lock: asyncio.Lock
    waiting: int = 0


class Engine(Startable):
    def __init__(self, services: Services, pipeline: Pipeline, router: CommandRouter) -> None:
        self.services = services
        self.pipeline = pipeline
        self.router = router
        self._lanes: dict[str, _UserLane] = {}
        self._slots = asyncio.Semaphore(services.config.max_concurrent)
        self._in_flight = InFlight()
        self._closing = False
        self._started = False

    @property
    def commands(self) -> Sequence[CommandSpec]:
        return self.router.specs

    @property
    def in_flight(self) -> int:
        """Messages accepted and not answered yet (``/health``'s queue depth)."""
        return self._in_flight.count

    @property
    def storage(self):
        return self.services.storage

    async def start(self) -> None:
        if self._started:
            return
        await self.services.storage.open()
        try:
            # A database of another embedding model fails here, in one clear error,
            # rather than at every message.
            await self.services.memory.check()
            # The models load while the LLM does (its load is mostly native code, theirs
            # partly Python): on 2 cores the start is about the longer of the two.
            warming = asyncio.get_running_loop().create_task(self._warm_up(), name="warm-up")
            try:
                await self.services.llm.start()
            finally:
                # A failed LLM start still waits for the loads: none outlives the engine.
                await asyncio.wait([warming])
        except BaseException:
            # Whatever failed, nothing opened may outlive the failure: aiosqlite's thread
            # (and a model's worker thread) would keep the process alive after the error.
            await _close_quietly(self.services.llm.close(), "the LLM")
            await _close_quietly(self.services.storage.close(), "storage")
            raise
        self._started = True

    async def close(self, timeout: float = 10.0) -> None:
        """Stop taking messages, let in-flight ones finish within ``timeout``, close."""
        self._closing = True
        if not await self._in_flight.settled(timeout):
            log.warning("closing with %d message(s) still in flight", self._in_flight.count)
        await self.services.background.drain(timeout)
        # Replies still being stored (their vectors batched off the reply's path).
        await self.services.memory.settle()
        await self.services.llm.close()
        await self.services.storage.close()
        self._started = False

    async def _warm_up(self) -> None:
        """Load the models a first message would otherwise wait for, before any comes (a
        person typing their first line no longer waits for them). Not a reason to refuse
        to start: the first message then loads them, or says what is wrong."""
        loads = [self.services.memory.warm_up()]
        if self.services.emotion is not None:
            loads.append(self.services.emotion.warm_up())
        try:
            for result in await asyncio.gather(*loads, return_exceptions=True):
                if isinstance(result, Exception):
                    raise result
        except Exception as exc:
            log.warning(
                "could not load the models at start (%s: %s); the first message will try",
                type(exc).__name__,
                exc,
            )

    async def handle(self, message: IncomingMessage, responder: Responder) -> None:
        if self._closing:
            raise RuntimeError("engine is shutting down")
        lane = self._lane(message.owner)
        if lane.waiting >= self.services.config.max_queue_per_user:
            await self._overloaded(message, responder)
            return
        with self._waiting(message.owner, lane):
            await self._serve(message, responder, lane.lock)

    async def handle_reaction(self, reaction: IncomingReaction) -> None:
        """Hand a reaction to the hooks (``services.on_reaction``), in the person's lane:
        a reaction waits for the message of theirs being handled, so it finds the reply
        that message is getting. A failing hook is logged; nothing is answered."""
        if self._closing:
            raise RuntimeError("engine is shutting down")
        hooks = self.services.on_reaction
        if not hooks:
            return
        owner = reaction.owner
        lane = self._lane(owner)
        with self._waiting(owner, lane):
            async with lane.lock, self._slots:
                await self.services.storage.catch_up()
                for hook in hooks:
                    try:
                        await hook(reaction, self.services)
                    except Exception:
                        log.exception("a reaction hook failed for %s", owner)

    def _lane(self, owner: str) -> _UserLane:
        lane = self._lanes.get(owner)
        if lane is None:
            lane = self._lanes[owner] = _UserLane(asyncio.Lock())
        return lane

    @contextmanager
    def _waiting(self, owner: str, lane: _UserLane) -> Iterator[None]:
        """A message or reaction of ``owner`` waits in (then holds) their lane and is in
        flight; the lane is dropped once nothing of theirs is left."""
        lane.waiting += 1
        try:
            with self._in_flight.one():
                yield
        finally:
            lane.waiting -= 1
            if lane.waiting == 0 and not lane.lock.locked():
                self._lanes.pop(owner, None)

    async def _serve(
        self, message: IncomingMessage, responder: Responder, lane: asyncio.Lock
    ) -> None:
        """With several processes on one database (PostgreSQL), one of them at a time
        handles this person's message, in the platform's order (the storage's lock). The
        lock is asked for before waiting behind the person's earlier message here or for
        a free slot: a message's arrival must be known to the other processes at once,
        not once this one has room for it."""
        try:
            serving = self.services.storage.serving(
                message.owner, sent_at=message.sent_at, message_id=message.message_id
            )
            await serving.__aenter__()
        except Exception as exc:
            language = normalise_locale(message.locale) or self.services.config.default_language
            if not await self._storage_trouble(exc, message, responder, language):
                raise
            return
        try:
            async with lane, self._slots:
                await self._process(message, responder)
        finally:
            await serving.__aexit__(None, None, None)

    async def _storage_trouble(
        self,
        exc: BaseException,
        message: IncomingMessage,
        responder: Responder,
        language: str,
        *,
        sent: bool = False,
    ) -> bool:
        """A database server that is away, or a full disk: one line, an honest reply
        (unless one was sent), True. Anything else: False."""
        if is_storage_unavailable(exc):
            # Nothing of this message was acknowledged as stored; no traceback, and the
            # next message tries again.
            log.error(
                "storage unavailable: a message of %s was not handled (%s)", message.owner, exc
            )
            if not sent:
                await responder.send(Reply(t("storage_unavailable", language), ReplyKind.FALLBACK))
            return True
        if is_storage_full(exc):
            # Nothing is wrong with the message or the code: say what happened, once
            # per message, without a traceback each time.
            log.error("storage full: a message of %s was not stored (%s)", message.owner, exc)
            if not sent:
                await responder.send(Reply(t("storage_full", language), ReplyKind.FALLBACK))
            return True
        return False

    async def _process(self, message: IncomingMessage, responder: Responder) -> None:
        ctx = TurnContext(
            message=message,
            responder=responder,
            services=self.services,
            language=normalise_locale(message.locale) or self.services.config.default_language,
        )
        try:
            # What another process changed of someone's data since the last message (an
            # engine worker serving an admin, `akira-bot memory forget` or `import`)
            # drops what this one keeps of them: a primary-key lookup when nothing did.
            await self.services.storage.catch_up()
            await self.pipeline.run(ctx)
        except Exception as exc:
            if await self._storage_trouble(
                exc, message, responder, ctx.language, sent=bool(ctx.sent)
            ):
                return
            # The message was stored first; the person gets a polite reply, not silence.
            log.exception("pipeline failed for a message of %s", message.owner)
            if not ctx.sent:
                await responder.send(Reply(t("fallback", ctx.language), ReplyKind.FALLBACK))

    async def _overloaded(self, message: IncomingMessage, responder: Responder) -> None:
        """Too many waiting messages for one user: store this one, say we are busy."""
        language = detect_language(message.text) or self.services.config.default_language
        persist = self.pipeline.get("persist")
        ctx = TurnContext(
            message=message, responder=responder, services=self.services, language=language
        )
        # The same bounds as the guard: neutralised (no smuggled tags, no lone surrogates
        # that SQLite cannot encode), trimmed, capped.
        text = neutralise_user_text(message.text).strip()
        ctx.text = text[: self.services.config.max_input_chars]
        try:
            await self.services.storage.users.ensure(message.owner, seen_at=message.sent_at)

            async def stop() -> None:
                return None

            await persist(ctx, stop)
        except Exception:
            log.exception("could not store an overflow message of %s", message.owner)
        log.warning("user %s over the queue bound: busy reply", message.owner)
        await responder.send(Reply(t("busy", language), ReplyKind.NOTICE))
