"""The default stages. Each is small and replaceable; see ``core.pipeline``."""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from core.cleaner import (
    HISTORY_SECTION_TITLE,
    RECALL_FELT_LINE_FORMAT,
    RECALL_LINE_FORMAT,
    RECALL_SECTION_TITLE,
    RECALL_SPEAKER_BOT,
    RECALL_SPEAKER_PERSON,
    SECTION_HEADER_FORMAT,
    PromptInstructions,
    canary_line,
    clean_reply,
    guard_reply,
    instruction_texts,
    neutralise_user_text,
    new_canary,
    reads_as_reply,
)
from core.emotion.feelings import recalled_feeling
from core.emotion.state import EmotionRules
from core.i18n import ago, detect_language, normalise_locale, t
from core.llm.base import ChatMessage, GenerationOptions, LLMError
from core.pipeline import CallNext, PromptSection, TurnContext
from core.stages.outgoing import engine_instruction_texts
from core.storage.records import MemoryNode, NodeType
from core.types import ChatKind, Reply, ReplyKind

log = logging.getLogger(__name__)

# The prompt's wording lives with the cleaner, which removes it when a model echoes it.
RECALL_TITLE = RECALL_SECTION_TITLE
HISTORY_TITLE = HISTORY_SECTION_TITLE


# Ids need to be unique, not secret (every lookup is scoped by owner): a generator seeded
# once from the OS, instead of uuid4's system call per message, which under load makes the
# event loop wait for the GIL on its way back.
_IDS = random.Random()


def new_node_id() -> str:
    """The creation time in milliseconds, then 80 random bits (32 hex digits in all).
    Ids in creation order put each new node at the end of every index keyed by node id
    (nodes, vectors, tags, edges); random ids dirty a random page of each per message."""
    return f"node_{time.time_ns() // 1_000_000:012x}{_IDS.getrandbits(80):020x}"


class GuardStage:
    """Recursion protection, input bounds and the per-user rate limit."""

    name = "guard"

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # Wall-clock on purpose: the limit protects the live bot, replays are not limited
        # by their historical timestamps.
        self.clock = clock
        # Least recently seen first: people quiet for a whole window are dropped from
        # the front, so a bot that has met a million people keeps only the active ones.
        self._recent: OrderedDict[str, deque[float]] = OrderedDict()
        self._noticed: set[str] = set()

    @property
    def tracked(self) -> int:
        """How many people the limiter currently keeps times for."""
        return len(self._recent)

    def _forget_idle(self, now: float, window_s: float) -> None:
        while self._recent:
            owner, times = next(iter(self._recent.items()))
            if times and now - times[-1] <= window_s:
                return
            del self._recent[owner]
            self._noticed.discard(owner)

    def _over_limit(self, ctx: TurnContext) -> bool:
        config = ctx.services.config
        if config.rate_limit_messages <= 0:
            return False
        now = self.clock()
        self._forget_idle(now, config.rate_limit_window_s)
        window = self._recent.get(ctx.owner)
        if window is None:
            window = self._recent[ctx.owner] = deque()
        else:
            self._recent.move_to_end(ctx.owner)
        while window and now - window[0] > config.rate_limit_window_s:
            window.popleft()
        if len(window) >= config.rate_limit_messages:
            return True
        window.append(now)
        self._noticed.discard(ctx.owner)
        return False

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        message = ctx.message
        if message.author.is_bot:
            return  # never answer bots, ourselves included
        if not message.addressed and message.command is None:
            return  # group chatter not meant for us is neither answered nor stored
        text = neutralise_user_text(message.text).strip()
        limit = ctx.services.config.max_input_chars
        if len(text) > limit:
            text = text[:limit]
            ctx.extras["truncated"] = True
        ctx.text = text
        if self._over_limit(ctx):
            ctx.extras["rate_limited"] = True
        elif not text and message.command is None:
            # Nothing to detect a language from: the one we know the person by, else
            # their platform's, else the bot's default (a read only; nothing is stored).
            known = await ctx.services.storage.users.get(ctx.owner)
            language = known_language(ctx, known.language if known else None)
            await ctx.send(Reply(t("empty", language), ReplyKind.NOTICE))
            return
        await call_next()

    def should_notice(self, owner: str) -> bool:
        """True once per burst: the first limited message gets a notice, the rest none."""
        if owner in self._noticed:
            return False
        self._noticed.add(owner)
        return True


def known_language(ctx: TurnContext, stored: str | None) -> str:
    """The person's language when their words do not tell it: the one stored for them,
    else their platform's, else the bot's default."""
    return stored or normalise_locale(ctx.message.locale) or ctx.services.config.default_language


class IdentifyStage:
    """Makes sure the person exists in storage and picks their language."""

    name = "identify"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        message = ctx.message
        users = ctx.services.storage.users
        ctx.user = await users.ensure(
            ctx.owner, display_name=message.author.display_name, seen_at=message.sent_at
        )
        # A command's words (/help, /remember) say nothing about the person's language.
        detected = detect_language(ctx.text) if message.command is None else None
        language = detected or known_language(ctx, ctx.user.language)
        if detected and detected != ctx.user.language:
            # This reply uses what was detected; the write need not hold it up.
            await users.set_language(ctx.owner, detected, wait=False)
        ctx.language = language
        await call_next()


class PersistStage:
    """Stores the user's message before anything else can fail."""

    name = "persist"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        message = ctx.message
        node = MemoryNode(
            id=new_node_id(),
            owner=ctx.owner,
            content=ctx.text,
            type=NodeType.USER_MESSAGE,
            timestamp=message.sent_at,
            chat_id=message.chat.id,
            chat_kind=message.chat.kind.value,
            scope=message.chat.privacy_scope,
            platform_message_id=message.message_id,
            reply_to=message.reply_to_id,
            # A platform that delivers the same update twice must not store it twice.
            source_id=f"{message.platform}:{message.chat.id}:{message.message_id}",
        )
        emotion = ctx.extras.get("emotion")
        if emotion is not None:
            node.emotion, node.emotion_score = emotion.label, emotion.score
        # Kept (and a duplicate refused) before it returns; the node's vector and links
        # may follow off the person's path.
        if not await ctx.services.memory.store_first(node):
            log.info("duplicate delivery of %s ignored", node.source_id)
            return
        ctx.node = node
        await call_next()


class ThrottleStage:
    """A rate-limited message is stored (above) but not answered: one notice per burst."""

    name = "throttle"

    def __init__(self, guard: GuardStage) -> None:
        self.guard = guard

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        if ctx.extras.get("rate_limited"):
            if self.guard.should_notice(ctx.owner):
                await ctx.send(Reply(t("rate_limited", ctx.language), ReplyKind.NOTICE))
            return
        if ctx.extras.get("truncated"):
            limit = ctx.services.config.max_input_chars
            await ctx.send(Reply(t("too_long", ctx.language, limit=limit), ReplyKind.NOTICE))
        await call_next()


def allowed_scopes(ctx: TurnContext) -> list[str] | None:
    """Which privacy scopes may inform this reply (None = all of the person's)."""
    chat = ctx.message.chat
    if chat.kind is ChatKind.DM or ctx.services.config.share_private_memory_in_groups:
        return None
    return [chat.privacy_scope]


class RecallStage:
    """Recalls what matters from the conversation memory and the recent turns."""

    name = "recall"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        services = ctx.services
        scopes = allowed_scopes(ctx)
        exclude = [ctx.node.id] if ctx.node else []
        recent = await services.storage.nodes.recent(
            ctx.owner,
            limit=services.config.history_turns + 1,
            chat_id=ctx.message.chat.id,
            before=None,
        )
        recent = [n for n in recent if n.id not in exclude][-services.config.history_turns :]
        ctx.history = [
            ChatMessage("assistant" if n.type is NodeType.AKIRA_RESPONSE else "user", n.content)
            for n in recent
        ]
        recall = await services.memory.recall(
            ctx.owner,
            ctx.text,
            scopes=scopes,
            limit=services.config.recall_limit,
            exclude_ids=[*exclude, *(n.id for n in recent)],
            at=ctx.message.sent_at,
        )
        ctx.extras["recall"] = recall
        if recall.nodes:
            lines = [
                recall_line(ctx, item.node)
                for item in sorted(recall.nodes, key=lambda r: r.node.timestamp)
            ]
            ctx.sections.append(PromptSection(RECALL_TITLE, "\n".join(lines), order=40))
        await call_next()


def recall_line(ctx: TurnContext, node: MemoryNode) -> str:
    """One recalled turn: when, who, and how the person felt when they said it (the
    emotion stored with their message, when confidently read and not neutral), as the
    design's "Previous context" ("7 days ago the user was angry about ...")."""
    when = ago((ctx.message.sent_at - node.timestamp).total_seconds(), "en")
    if node.type is NodeType.AKIRA_RESPONSE:
        return RECALL_LINE_FORMAT.format(when=when, who=RECALL_SPEAKER_BOT, content=node.content)
    tracker = ctx.services.emotion
    # With the emotion plugin off, the stored labels are judged by the default rules.
    rules = tracker.rules if tracker is not None else EmotionRules()
    threshold = rules.confidence_threshold
    feeling = recalled_feeling(node.emotion, node.emotion_score, threshold=threshold)
    if feeling is None:
        return RECALL_LINE_FORMAT.format(when=when, who=RECALL_SPEAKER_PERSON, content=node.content)
    return RECALL_FELT_LINE_FORMAT.format(
        when=when, who=RECALL_SPEAKER_PERSON, feeling=feeling, content=node.content
    )


# Where the prompt stage leaves this turn's instruction parts for the clean stage.
INSTRUCTIONS_KEY = "prompt_instructions"


class PromptStage:
    """Persona + sections (tone, memories...) + recent turns + the user's message.

    The persona carries a fresh canary each turn; the instruction parts of the prompt
    (persona, canary line, the sections marked ``instruction`` with their headers, every
    section's title) are left in ``ctx.extras[INSTRUCTIONS_KEY]`` for the clean stage."""

    name = "prompt"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        persona = ctx.services.persona.system_prompt(ctx.language)
        canary = new_canary()
        parts = [f"{persona}\n{canary_line(canary)}"]
        instructions = [persona, canary_line("")]
        titles = []
        for section in sorted(ctx.sections, key=lambda s: s.order):
            if section.body.strip():
                header = SECTION_HEADER_FORMAT.format(title=section.title)
                parts.append(f"{header}\n{section.body.strip()}")
                titles.append(section.title)
                if section.instruction:
                    instructions.append(parts[-1])
        instructions += engine_instruction_texts(ctx.services)
        ctx.extras[INSTRUCTIONS_KEY] = PromptInstructions(
            instruction_texts(instructions), tuple(titles), canary
        )
        ctx.prompt = [
            ChatMessage("system", "\n\n".join(parts)),
            *ctx.history,
            ChatMessage("user", ctx.text),
        ]
        await call_next()


class GenerateStage:
    """Asks the LLM, with the typing indicator on; a dead LLM gets a polite fallback."""

    name = "generate"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        config = ctx.services.config
        options = GenerationOptions(
            max_tokens=config.reply_max_tokens,
            temperature=config.reply_temperature,
            language=ctx.language,
        )
        try:
            async with ctx.responder.typing():
                ctx.generation = await ctx.services.llm.generate(ctx.prompt, options)
        except LLMError as exc:
            log.warning("LLM failed for a message of %s: %s", ctx.owner, exc)
            ctx.extras["llm_failed"] = True
            await ctx.send(Reply(t("llm_down", ctx.language), ReplyKind.FALLBACK))
            return
        await call_next()


def check_reply(
    text: str, echo_sources: Sequence[str], instructions: PromptInstructions
) -> tuple[str, str]:
    """What the clean stage makes of a model's ``text``: ``(text, "answer")``, or ``("",
    "fallback")`` when nothing visible is left, or ``("", "refusal")`` when the reply gave
    the instructions away (the canary, or nothing that reads as a reply left). Pure, so
    ``benchmarks/leak_eval.py`` measures exactly this."""
    cleaned = clean_reply(text, echo_sources=echo_sources)
    if cleaned.fell_back:
        return "", "fallback"
    guarded = guard_reply(cleaned.text, instructions)
    if guarded.refused:
        return "", "canary" if guarded.canary_seen else "refusal"
    if cleaned.echoed and not reads_as_reply(guarded.text):
        # The cleaner took an echo of the prompt away and left only its wrapping.
        return "", "refusal"
    return guarded.text, "answer"


class CleanStage:
    """Removes thinking, tags and prompt echoes, then checks what is left against this
    turn's instructions in every encoding (``core.cleaner.guard``); fails closed to a
    fallback reply, or to a polite refusal when the reply gave the instructions away."""

    name = "clean"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        assert ctx.generation is not None
        echo_sources = [ctx.services.persona.system_prompt(ctx.language)]
        echo_sources += [s.body for s in ctx.sections if s.instruction]
        instructions = ctx.extras.get(INSTRUCTIONS_KEY)
        if not isinstance(instructions, PromptInstructions):
            # A replaced prompt stage: the instructions this stage can know of.
            instructions = PromptInstructions(
                instruction_texts([*echo_sources, *engine_instruction_texts(ctx.services)]),
                tuple(s.title for s in ctx.sections),
            )
        text, outcome = check_reply(ctx.generation.text, echo_sources, instructions)
        if outcome == "answer":
            ctx.reply_text = text
        else:
            if outcome == "canary":
                log.warning("a reply to %s disclosed the prompt's canary: refused", ctx.owner)
            ctx.extras["reply_kind"] = ReplyKind.FALLBACK
            ctx.reply_text = t(
                "fallback" if outcome == "fallback" else "leak_refusal", ctx.language
            )
        await call_next()


REPLY_MESSAGE_IDS = "reply_message_ids"  # ctx.extras: what DeliverStage's send returned


class DeliverStage:
    name = "deliver"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        assert ctx.reply_text is not None
        kind = ctx.extras.get("reply_kind", ReplyKind.ANSWER)
        # The platform ids of the reply's messages: the stored reply knows them, so a
        # reaction to one of them finds its turn (feedback).
        ctx.extras[REPLY_MESSAGE_IDS] = await ctx.send(
            Reply(ctx.reply_text, kind, reply_to_id=ctx.message.message_id)
        )
        await call_next()


class RememberStage:
    """After delivery: store the reply node, then background work (extraction...)."""

    name = "remember"

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        message = ctx.message
        if ctx.reply_text and ctx.extras.get("reply_kind") is not ReplyKind.FALLBACK:
            reply_node = MemoryNode(
                id=new_node_id(),
                owner=ctx.owner,
                content=ctx.reply_text,
                type=NodeType.AKIRA_RESPONSE,
                timestamp=message.sent_at,
                chat_id=message.chat.id,
                chat_kind=message.chat.kind.value,
                scope=message.chat.privacy_scope,
                reply_to=message.message_id,
                platform_message_id=next(iter(ctx.extras.get(REPLY_MESSAGE_IDS) or ()), None),
                source_id=f"{message.platform}:{message.chat.id}:{message.message_id}:reply",
            )
            # Off the person's path: the reply is out, its vector can wait for a batch.
            await ctx.services.memory.store_later(reply_node)
            ctx.extras["reply_node"] = reply_node
        for hook in ctx.services.after_reply:
            ctx.services.background.spawn(hook(ctx), name=getattr(hook, "__name__", "after_reply"))
        await call_next()
