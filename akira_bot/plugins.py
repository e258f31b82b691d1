"""Plugins: how a bot author adds commands, pipeline stages, prompt sections and hooks.

A plugin is a module with a top-level ``setup(api)``; ``api`` is a :class:`PluginAPI`.
It is enabled by naming it in ``AKIRA_BOT__PLUGINS`` (TOML ``[bot] plugins = [...]``):
a module path (``mybot.plugins.dice``), a function in one (``mybot.bot:greeter``, a
``setup`` by another name) or the name of an entry point in the group
``akira_bot.plugins`` (pointing at the module or straight at its ``setup``).

Plugins are set up each time an engine is built, so in every engine process
(``AKIRA_BOT__WORKERS`` above 1 included), in this order: the built-in plugins that are
switched on (``AKIRA_BOT__BUILTINS``), the listed ones, then any given in code. A plugin
that cannot be found, imported or set up raises :class:`PluginError`: one line naming it,
which the CLI prints before exiting with status 1.

A plugin's own settings are a pydantic model it declares and reads with
``api.config(Model)``: from ``AKIRA_<NAME>__<FIELD>`` variables and the ``[<name>]``
table of the settings file, ``<name>`` being the plugin's name (the entry point's name,
or the last part of its module path).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from pydantic import BaseModel

from core.commands import CommandHandler, CommandRouter
from core.pipeline import CallNext, Pipeline, PromptSection, Stage, TurnContext, stage
from core.services import AfterReplyHook, ReactionHook, Services

if TYPE_CHECKING:
    from akira_bot.settings import Settings
    from core.embeddings.base import Embedder
    from core.llm.base import LLMProvider
    from core.memory.base import ConversationMemory
    from core.memory.structured import StructuredMemories
    from core.stages.emotion import EmotionTracker
    from core.storage.api import Storage

PLUGIN_GROUP = "akira_bot.plugins"

Setup = Callable[["PluginAPI"], None]
# What a bot assembled in code may pass as a plugin: a module path or entry-point name,
# a module, or a setup function (module-level, so it can be sent to worker processes).
PluginRef = str | ModuleType | Setup
StageFunction = Callable[[TurnContext, CallNext], Awaitable[None]]
SectionFunction = Callable[[TurnContext], Awaitable[str | PromptSection | None]]

M = TypeVar("M", bound=BaseModel)


class CommandOptions(TypedDict, total=False):
    description_pt: str  # /help's text for Portuguese speakers
    admin_only: bool
    args_hint: str  # "<key: content>"; a Discord slash command gets a text option


class PluginError(RuntimeError):
    """A plugin could not be found, imported or set up: one line, naming it."""


@dataclass(frozen=True, slots=True)
class Plugin:
    """A resolved plugin: its name (settings section, messages) and its setup."""

    name: str
    setup: Setup
    ref: str  # as the settings or the code named it


def plugin_name(ref: str) -> str:
    """The name a plugin's settings and messages go by, as an identifier: an entry
    point's own name, a module path's last part (``mybot.plugins.dice`` -> ``dice``), a
    function's name (``mybot.bot:greeter`` -> ``greeter``; ``...:setup`` -> the module's)."""
    module, _, attr = ref.partition(":")
    tail = attr if attr and attr != "setup" else module.rsplit(".", 1)[-1]
    return re.sub(r"\W", "_", tail).lower()


def _entry_point(name: str) -> importlib.metadata.EntryPoint | None:
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        if entry.name == name:
            return entry
    return None


def _setup_of(obj: Any, ref: str) -> Setup:
    setup = getattr(obj, "setup", None) if isinstance(obj, ModuleType) else obj
    if not callable(setup):
        raise PluginError(f"plugin {ref!r} has no setup(api) function")
    return setup  # type: ignore[no-any-return]


def resolve(ref: PluginRef) -> Plugin:
    """Find and import one plugin (nothing is set up yet)."""
    if isinstance(ref, ModuleType):
        return Plugin(plugin_name(ref.__name__), _setup_of(ref, ref.__name__), ref.__name__)
    if not isinstance(ref, str):
        full = f"{getattr(ref, '__module__', None) or '__main__'}:{ref.__qualname__}"
        return Plugin(plugin_name(f"{ref.__module__}:{ref.__name__}"), ref, full)
    module, _, attr = ref.partition(":")
    # A plain name ("shout") may be an entry point; a dotted path or module:function is
    # imported straight away, without reading every installed distribution's entry points.
    entry = _entry_point(ref) if module == ref and "." not in ref else None
    try:
        if entry is not None:
            return Plugin(plugin_name(ref), _setup_of(entry.load(), ref), ref)
        loaded = importlib.import_module(module)
        target = getattr(loaded, attr) if attr else loaded
        return Plugin(plugin_name(ref), _setup_of(target, ref), ref)
    except PluginError:
        raise
    except ModuleNotFoundError as exc:
        missing = exc.name is not None and (module + ".").startswith(exc.name + ".")
        if entry is None and missing:
            raise PluginError(
                f"plugin {ref!r}: no module or {PLUGIN_GROUP!r} entry point of that name"
            ) from None
        raise PluginError(f"plugin {ref!r} failed to import: {_one_line(exc)}") from None
    except Exception as exc:
        raise PluginError(f"plugin {ref!r} failed to import: {_one_line(exc)}") from None


def resolve_all(refs: Sequence[PluginRef]) -> list[Plugin]:
    return [resolve(ref) for ref in refs]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class PluginAPI:
    """What ``setup(api)`` gets: the engine being built, and ways to extend it.

    Typed access to the services (``api.storage``, ``api.memory``, ``api.llm``,
    ``api.structured_memories``, ``api.emotion``, ``api.settings``); registration of
    commands, stages, prompt sections, after-reply and reaction hooks; the plugin's own
    settings.
    """

    def __init__(
        self,
        plugin: Plugin,
        settings: Settings,
        services: Services,
        pipeline: Pipeline,
        router: CommandRouter,
    ) -> None:
        self.plugin = plugin
        self.settings = settings
        self.services = services
        self.pipeline = pipeline
        self.router = router

    @property
    def name(self) -> str:
        return self.plugin.name

    # -- the services, typed ------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.services.storage

    @property
    def memory(self) -> ConversationMemory:
        return self.services.memory

    @property
    def llm(self) -> LLMProvider:
        return self.services.llm

    @property
    def embedder(self) -> Embedder | None:
        return self.services.embedder

    @property
    def structured_memories(self) -> StructuredMemories | None:
        """None when the ``structured_memories`` built-in is switched off."""
        return self.services.structured_memories

    @property
    def emotion(self) -> EmotionTracker | None:
        """None when the ``emotion`` built-in is switched off."""
        return self.services.emotion

    # -- registering --------------------------------------------------------------------

    def command(
        self, name: str, description: str, **options: Unpack[CommandOptions]
    ) -> Callable[[CommandHandler], CommandHandler]:
        """Decorator for ``async def handler(ctx, args) -> str | Reply | None``: a chat
        command on every platform (Telegram's command list, a Discord slash command,
        the console). Options: ``description_pt``, ``admin_only`` (refused to others
        before the handler runs), ``args_hint``."""
        return self.router.command(name, description, **options)

    def stage(
        self, name: str, *, before: str | None = None, after: str | None = None
    ) -> Callable[[StageFunction], StageFunction]:
        """Decorator for ``async def stage(ctx, call_next)``: a pipeline stage placed
        before or after a named one (``api.pipeline.names`` lists them), else last."""

        def wrap(fn: StageFunction) -> StageFunction:
            self.add_stage(stage(name)(fn), before=before, after=after)
            return fn

        return wrap

    def add_stage(self, new: Stage, *, before: str | None = None, after: str | None = None) -> None:
        """Add a stage object (anything with ``name`` and ``async __call__(ctx, call_next)``)."""
        self.pipeline.add(new, before=before, after=after)

    def prompt_section(
        self, title: str, *, order: int = 50, instruction: bool = False
    ) -> Callable[[SectionFunction], SectionFunction]:
        """Decorator for ``async def section(ctx) -> str | PromptSection | None``: its
        text joins the system prompt of every reply under ``title`` (lower ``order``
        first; recalled memories are 40, the tone 20). ``instruction`` marks rules rather
        than data, so the reply cleaner removes echoes of them."""

        def wrap(fn: SectionFunction) -> SectionFunction:
            async def add_section(ctx: TurnContext, call_next: CallNext) -> None:
                body = await fn(ctx)
                if isinstance(body, PromptSection):
                    ctx.sections.append(body)
                elif body:
                    ctx.sections.append(PromptSection(title, body, order, instruction))
                await call_next()

            before = "prompt" if "prompt" in self.pipeline.names else None
            self.add_stage(stage(f"{self.name}:{title}")(add_section), before=before)
            return fn

        return wrap

    def after_reply(self, hook: AfterReplyHook) -> AfterReplyHook:
        """Decorator for ``async def hook(ctx)``: runs in the background once a reply was
        delivered (what was said is in ``ctx.text`` and ``ctx.reply_text``)."""
        self.services.after_reply.append(hook)
        return hook

    def on_reaction(self, hook: ReactionHook) -> ReactionHook:
        """Decorator for ``async def hook(reaction, services)``: runs for each reaction a
        person adds or removes on a message (``core.types.IncomingReaction``: the
        emoji added and removed, the message's platform id and chat), after the
        message of theirs being handled, if any. Nothing is answered; an exception is
        logged."""
        self.services.on_reaction.append(hook)
        return hook

    def provide(self, value: object, kind: type | None = None) -> None:
        """Make an object of this plugin findable from handlers by its type:
        ``ctx.services.require(Kind)``."""
        self.services.provide(value, kind)

    def config(self, model: type[M]) -> M:
        """This plugin's settings: ``model`` read from ``AKIRA_<NAME>__<FIELD>`` and the
        settings file's ``[<name>]`` table (defaults for the rest). Also provided to the
        services, so a handler finds it with ``ctx.services.require(model)``."""
        from akira_bot.settings import load_section

        value = load_section(self.name, model)
        self.services.provide(value, model)
        return value


def set_up(
    plugins: Sequence[Plugin],
    settings: Settings,
    services: Services,
    pipeline: Pipeline,
    router: CommandRouter,
) -> None:
    """Run each plugin's setup in order; the first failure is a :class:`PluginError`."""
    seen: set[str] = set()
    for plugin in plugins:
        if plugin.ref in seen:
            raise PluginError(f"plugin {plugin.ref!r} is listed twice")
        seen.add(plugin.ref)
        try:
            plugin.setup(PluginAPI(plugin, settings, services, pipeline, router))
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin {plugin.ref!r} failed to set up: {_one_line(exc)}") from None


__all__ = [
    "PLUGIN_GROUP",
    "Plugin",
    "PluginAPI",
    "PluginError",
    "PluginRef",
    "Setup",
    "plugin_name",
    "resolve",
    "resolve_all",
    "set_up",
]
