"""Building the application from settings: services, pipeline, commands, adapters."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import math
import signal

from adapters.base import Adapter
from akira_bot.features import installers
from akira_bot.settings import Settings
from core.commands import CommandRouter, CommandStage
from core.embeddings import Embedder, build_embedder
from core.engine import Engine
from core.llm import LLMProvider, build_provider
from core.memory import ConversationMemory, PlainMemory
from core.persona import load_persona
from core.pipeline import Pipeline
from core.services import EngineConfig, Services
from core.stages import (
    CleanStage,
    DeliverStage,
    GenerateStage,
    GuardStage,
    IdentifyStage,
    PersistStage,
    PromptStage,
    RecallStage,
    RememberStage,
    ThrottleStage,
)
from core.storage import SQLiteStorage
from core.workers import ShardedEngine

log = logging.getLogger(__name__)


# The embedded 135M model rambles: unless told otherwise, keep its replies short and its
# sampling cool (it answers in seconds instead of minutes and drifts less).
LOCAL_MAX_TOKENS = 64
LOCAL_TEMPERATURE = 0.3

# A young collection every 10,000 new objects (Python's default: 700), a full one after
# 1,000 middle ones (default: 10). A message makes no reference cycles (a test holds
# that), so collections find next to nothing, while a full one walks every cached node
# and edge: at 1000 users x 20 messages the defaults ran 42 full collections of 0.4-0.6 s
# each, the event loop standing still for all of them (19 s of collecting in a 208 s
# run; 2.7 s with these, the longest pause 0.11 s).
GC_THRESHOLDS = (10_000, 10, 1_000)


def engine_config(settings: Settings) -> EngineConfig:
    llm = settings.llm
    local = llm.provider == "local"
    max_tokens = (
        LOCAL_MAX_TOKENS if local and "max_tokens" not in llm.model_fields_set else llm.max_tokens
    )
    temperature = (
        LOCAL_TEMPERATURE
        if local and "temperature" not in llm.model_fields_set
        else llm.temperature
    )
    return EngineConfig(
        default_language=settings.bot.default_language,
        max_input_chars=settings.bot.max_input_chars,
        history_turns=settings.memory.history_turns,
        recall_limit=settings.memory.recall_limit,
        share_private_memory_in_groups=settings.memory.share_private_in_groups,
        rate_limit_messages=settings.bot.rate_limit_messages,
        rate_limit_window_s=settings.bot.rate_limit_window_s,
        max_concurrent=settings.bot.max_concurrent,
        max_queue_per_user=settings.bot.max_queue_per_user,
        reply_max_tokens=max_tokens,
        reply_temperature=temperature,
    )


def build_memory(
    settings: Settings, storage: SQLiteStorage, embedder: Embedder | None
) -> ConversationMemory:
    """The memory graph (``settings.memory.graph``, the default) over the configured
    embedder; the plain message log when the graph is off."""
    if not settings.memory.graph:
        return PlainMemory(storage)
    from core.memory.graph import GraphMemory

    if embedder is None:
        embedder = build_embedder(settings.embedding.backend, settings.embedding.model)
    return GraphMemory(storage, embedder)


def default_pipeline(router: CommandRouter) -> Pipeline:
    guard = GuardStage()
    return Pipeline(
        [
            guard,
            IdentifyStage(),
            CommandStage(router),
            PersistStage(),
            ThrottleStage(guard),
            RecallStage(),
            PromptStage(),
            GenerateStage(),
            CleanStage(),
            DeliverStage(),
            RememberStage(),
        ]
    )


def build_engine(
    settings: Settings,
    *,
    llm: LLMProvider | None = None,
    embedder: Embedder | None = None,
) -> Engine:
    """The engine for ``settings``; ``llm``/``embedder`` override the configured ones
    (tests, embedding a bot in another program)."""
    storage = SQLiteStorage(
        settings.database_path, writer_process=settings.storage.writer == "process"
    )
    if embedder is None and settings.memory.graph:
        embedder = build_embedder(settings.embedding.backend, settings.embedding.model)
    if llm is None:
        llm = build_provider(settings.llm, cache_dir=settings.data_dir / "models")
    services = Services(
        storage=storage,
        llm=llm,
        memory=build_memory(settings, storage, embedder),
        persona=load_persona(settings.bot.persona_file),
        config=engine_config(settings),
        embedder=embedder,
    )
    router = CommandRouter()
    pipeline = default_pipeline(router)
    for install in installers():
        install(settings, services, pipeline, router)
    return Engine(services, pipeline, router)


def build_handler(settings: Settings, *, llm: LLMProvider | None = None) -> Engine | ShardedEngine:
    """What the adapters talk to: the engine itself, or with ``bot.workers`` above 1 the
    engine in that many worker processes (each built by :func:`build_engine` from these
    settings, ``llm`` pickled into each). The global bound on concurrent messages is
    shared out among the workers."""
    workers = settings.bot.workers
    if workers == 1:
        return build_engine(settings, llm=llm)
    share = math.ceil(settings.bot.max_concurrent / workers)
    bot = settings.bot.model_copy(update={"max_concurrent": share})
    worker_settings = settings.model_copy(update={"bot": bot})
    return ShardedEngine(
        functools.partial(build_engine, worker_settings, llm=llm),
        workers,
        prepare=tune_garbage_collector,
        default_language=settings.bot.default_language,
    )


def build_adapters(settings: Settings, engine: Engine | ShardedEngine) -> list[Adapter]:
    """Every platform adapter that has settings; with none, the console."""
    adapters: list[Adapter] = []
    if settings.telegram.token is not None and settings.telegram.token.get_secret_value():
        from adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(engine, settings.telegram))
    if settings.discord.token is not None and settings.discord.token.get_secret_value():
        from adapters.discord import DiscordAdapter

        adapters.append(DiscordAdapter(engine, settings.discord))
    return adapters


def tune_garbage_collector() -> None:
    """Set the collector for a long-running bot: call once, after startup (models loaded,
    engine started). What startup built is frozen: never scanned again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(
    settings: Settings, adapters: list[Adapter], engine: Engine | ShardedEngine
) -> None:
    """Run platform adapters until SIGTERM/SIGINT, then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
            pass
    started: list[Adapter] = []
    engine_started = False
    try:
        # A start that fails half-way (storage open, model not loaded) closes what it
        # opened itself; the adapters below are stopped whatever fails after it.
        await engine.start()
        engine_started = True
        tune_garbage_collector()
        for adapter in adapters:
            await adapter.start()
            started.append(adapter)
            log.warning("%s adapter running", adapter.name)
        await stop.wait()
    finally:
        # Stop taking updates first, then let in-flight replies finish, then close.
        for adapter in reversed(started):
            try:
                await adapter.stop()
            except Exception:
                log.exception("error stopping the %s adapter", adapter.name)
        if engine_started:
            await engine.close()
