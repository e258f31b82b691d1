"""Building the application from settings: services, pipeline, commands, adapters."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import math
import signal
from collections.abc import Sequence
from types import ModuleType

from adapters.base import Adapter
from adapters.registry import registry
from akira_bot.features import builtin_modules
from akira_bot.plugins import Plugin, PluginRef, resolve_all, set_up
from akira_bot.settings import Settings
from akira_bot.storage import build_storage
from core.commands import CommandRouter, CommandStage
from core.embeddings import Embedder, build_embedder, model_cache
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
from core.storage import Storage
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
    settings: Settings, storage: Storage, embedder: Embedder | None
) -> ConversationMemory:
    """The memory graph (``settings.memory.graph``, the default) over the configured
    embedder; the plain message log when the graph is off."""
    if not settings.memory.graph:
        return PlainMemory(storage)
    from core.memory.graph import GraphMemory

    if embedder is None:
        embedder = build_embedder(
            settings.embedding.backend,
            settings.embedding.model,
            settings.embedding.runtime,
            settings.embedding.precision,
        )
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


def plugin_refs(settings: Settings, plugins: Sequence[PluginRef] = ()) -> list[PluginRef]:
    """Every plugin an engine for ``settings`` sets up, in order: the built-ins that are
    on, ``bot.plugins``, then ``plugins`` given in code."""
    # The key store is part of a person's data (forget, export) whatever is switched on.
    refs: list[PluginRef] = ["akira_bot.features.http_keys"]
    refs.extend(builtin_modules(settings.bot.builtins))
    refs.extend(settings.bot.plugins)
    refs.extend(plugins)
    if settings.http.port is not None:
        # Last, so its stage goes first and it times the generate stage the others left.
        refs.append("akira_bot.features.metrics")
    return refs


def resolve_plugins(settings: Settings, plugins: Sequence[PluginRef] = ()) -> list[Plugin]:
    """Find and import every plugin (a PluginError names the first that fails)."""
    return resolve_all(plugin_refs(settings, plugins))


def build_engine(
    settings: Settings,
    *,
    llm: LLMProvider | None = None,
    embedder: Embedder | None = None,
    plugins: Sequence[PluginRef] = (),
) -> Engine:
    """The engine for ``settings`` with its plugins set up; ``llm``/``embedder`` override
    the configured ones (tests, embedding a bot in another program), ``plugins`` are set
    up after the ones the settings name."""
    resolved = resolve_plugins(settings, plugins)
    # Before any model loads: where they keep what they derive from their packages.
    model_cache.set_root(settings.model_cache_dir)
    storage = build_storage(settings)
    if embedder is None and settings.memory.graph:
        embedder = build_embedder(
            settings.embedding.backend,
            settings.embedding.model,
            settings.embedding.runtime,
            settings.embedding.precision,
        )
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
    # Typed lookups for handlers: /help lists the router's commands, a plugin's handler
    # may read the app's settings.
    services.provide(router)
    services.provide(settings, Settings)
    set_up(resolved, settings, services, pipeline, router)
    return Engine(services, pipeline, router)


def build_handler(
    settings: Settings, *, llm: LLMProvider | None = None, plugins: Sequence[PluginRef] = ()
) -> Engine | ShardedEngine:
    """What the adapters talk to: the engine itself, or with ``bot.workers`` above 1 the
    engine in that many worker processes (each built by :func:`build_engine` from these
    settings, ``llm`` pickled into each, every plugin set up in each). The global bound on
    concurrent messages is shared out among the workers."""
    workers = settings.bot.workers
    if workers == 1:
        return build_engine(settings, llm=llm, plugins=plugins)
    # Imported here first, so a missing plugin stops the bot before any worker starts;
    # modules travel to the workers by name (a module does not pickle).
    resolve_plugins(settings, plugins)
    refs = [p.__name__ if isinstance(p, ModuleType) else p for p in plugins]
    share = math.ceil(settings.bot.max_concurrent / workers)
    bot = settings.bot.model_copy(update={"max_concurrent": share})
    worker_settings = settings.model_copy(update={"bot": bot})
    return ShardedEngine(
        functools.partial(build_engine, worker_settings, llm=llm, plugins=refs),
        workers,
        prepare=tune_garbage_collector,
        default_language=settings.bot.default_language,
    )


def build_adapters(settings: Settings, engine: Engine | ShardedEngine) -> list[Adapter]:
    """Every registered adapter (:mod:`adapters.registry`) whose settings enable it, in
    registry order; an empty list means the console."""
    adapters: list[Adapter] = []
    for spec in registry().values():
        config = settings.adapter_settings(spec.name)
        if spec.enabled(config):
            adapters.append(spec.factory(engine, config))
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


async def run_bot(
    settings: Settings | None = None,
    *,
    plugins: Sequence[PluginRef] = (),
    llm: LLMProvider | None = None,
    console_user: str | None = None,
) -> None:
    """Build the bot and run it until SIGTERM/SIGINT: every adapter its settings enable,
    or with none the console (until its input ends). ``settings`` default to the
    environment and settings file, as the CLI reads them; ``plugins`` are set up after
    the built-ins and the ones the settings list (module paths, modules or setup
    functions)."""
    from akira_bot.settings import claim_sections, load_settings

    if settings is None:
        claim_sections(p.name for p in resolve_all(plugins))
        settings = load_settings()
    http = settings.http.port is not None
    if http:
        from akira_bot.http.server import prepare_metrics

        prepare_metrics(settings.bot.workers)  # before the workers start
    engine = build_handler(settings, llm=llm, plugins=plugins)
    adapters = build_adapters(settings, engine)
    if http:  # the API alone counts as configured: no console then
        from akira_bot.http.server import HttpAdapter

        adapters.append(HttpAdapter(settings, engine, adapters=list(adapters)))
    if adapters:
        await serve(settings, adapters, engine)
        return
    from adapters.console import ConsoleAdapter, ConsoleConfig

    config = ConsoleConfig(user=console_user) if console_user else ConsoleConfig()
    async with engine:
        await ConsoleAdapter(engine, config).start()


def run(
    settings: Settings | None = None,
    *,
    plugins: Sequence[PluginRef] = (),
    llm: LLMProvider | None = None,
    console_user: str | None = None,
) -> None:
    """:func:`run_bot` from synchronous code (``if __name__ == "__main__": run(...)``)."""
    asyncio.run(run_bot(settings, plugins=plugins, llm=llm, console_user=console_user))
