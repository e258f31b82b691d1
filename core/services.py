"""What the stages share: storage, memory, the LLM, configuration. Built once per app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from core.background import BackgroundTasks
from core.embeddings.base import Embedder
from core.llm.base import LLMProvider
from core.memory.base import ConversationMemory
from core.persona import Persona
from core.storage.api import Storage
from core.types import IncomingReaction, utcnow

if TYPE_CHECKING:
    from core.memory.extraction import MemoryExtractor
    from core.memory.structured import StructuredMemories
    from core.pipeline import TurnContext
    from core.stages.emotion import EmotionTracker

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    default_language: str = "pt"
    max_input_chars: int = 4000
    history_turns: int = 8  # recent messages (both sides) put in the prompt
    recall_limit: int = 8
    # Memory privacy: a group reply uses only what was said in that group's scope unless
    # this is on (private chats may always use everything the person said anywhere).
    share_private_memory_in_groups: bool = False
    rate_limit_messages: int = 20  # per user per window; 0 disables
    rate_limit_window_s: float = 60.0
    max_concurrent: int = 64  # users handled at once
    max_queue_per_user: int = 50  # waiting messages per user before "busy"
    reply_max_tokens: int = 512
    reply_temperature: float = 0.7


AfterReplyHook = Callable[["TurnContext"], Awaitable[None]]
# Called with each reaction a person made (core.types.IncomingReaction), see Engine.
ReactionHook = Callable[[IncomingReaction, "Services"], Awaitable[None]]


@dataclass
class Services:
    storage: Storage
    llm: LLMProvider
    memory: ConversationMemory
    persona: Persona
    config: EngineConfig = field(default_factory=EngineConfig)
    embedder: Embedder | None = None
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    started_at: datetime = field(default_factory=utcnow)
    # The optional parts the built-in plugins fill in; None while a plugin is switched off.
    structured_memories: StructuredMemories | None = None
    emotion: EmotionTracker | None = None
    emotion_detector: str | None = None  # the detector's name, for /stats
    memory_extractor: MemoryExtractor | None = None
    # Older string-keyed access to the same parts ("structured_memories",
    # "emotion_tracker"...), still filled for code written against it; new code uses the
    # typed attributes above, and a plugin's own objects go through provide()/get().
    extras: dict[str, Any] = field(default_factory=dict)
    # Run in the background after a reply was delivered (memory extraction...).
    after_reply: list[AfterReplyHook] = field(default_factory=list)
    # Run for each reaction to a message (feedback on replies...), in the person's order.
    on_reaction: list[ReactionHook] = field(default_factory=list)
    _by_type: dict[type, Any] = field(default_factory=dict, repr=False)

    def provide(self, value: object, kind: type | None = None) -> None:
        """Make ``value`` findable by its type (or ``kind``): a plugin's settings, its
        own service objects. One object per type."""
        self._by_type[kind or type(value)] = value

    def get(self, kind: type[T]) -> T | None:
        """The object provided for ``kind``, None when none was."""
        value = self._by_type.get(kind)
        return value if isinstance(value, kind) else None

    def require(self, kind: type[T]) -> T:
        """The object provided for ``kind``; a LookupError naming it when none was."""
        value = self.get(kind)
        if value is None:
            raise LookupError(f"no {kind.__name__} was provided to the services")
        return value
