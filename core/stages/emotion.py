"""The emotion stage: read the message's emotion, update the person's state, set the tone.

The state lives in the person's profile (JSON, key ``emotion``) and every rule is applied
at the message's own time, so replayed or imported history behaves like live history.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from core.cleaner import EMOTION_SECTION_TITLE, RESPONSE_STYLE_FORMAT
from core.embeddings import Embedder
from core.embeddings.batcher import EmbeddingBatcher
from core.emotion import (
    EmotionalState,
    EmotionalStateConfig,
    EmotionDetector,
    EmotionReading,
    EmotionRules,
    Tone,
    apply_reading,
    current_tone,
)
from core.emotion.encoders import CombinedEmbedder
from core.emotion.feelings import trajectory_days, trajectory_line
from core.emotion.llm_judge import LLMDetector, LLMJudge, combine
from core.pipeline import CallNext, PromptSection, TurnContext
from core.storage.api import Storage
from core.storage.records import MemoryNode

log = logging.getLogger(__name__)

EMOTION_TITLE = EMOTION_SECTION_TITLE  # the prompt's wording lives with the cleaner
PROFILE_KEY = "emotion"
HOSTILE_STATE = "agressivo"
INLINE_HEAD_CHARS = 400  # longer messages are classified in a thread (see detect)
PENDING_KEY = "emotion_pending"  # (classifier reading, judge task) for EmotionJudgeStage
VECTORS_KEY = "emotion_vectors"  # the message's query vectors, asked for early


async def _batched_queries(batcher: EmbeddingBatcher, texts: Sequence[str]) -> np.ndarray:
    """Query vectors of ``texts`` from ``batcher`` (rows of empty texts stay zero)."""
    vectors = np.zeros((len(texts), batcher.dim), dtype=np.float32)
    asked = [i for i, text in enumerate(texts) if text.strip()]  # empty: never read
    if len(asked) == 1:  # a live message: batched with other people's
        found: list[np.ndarray] = [await batcher.embed_query(texts[asked[0]])]
    elif asked:  # an import's history: its own batches
        found = list(await batcher.embed_queries([texts[i] for i in asked]))
    else:
        found = []
    for index, vector in zip(asked, found, strict=True):
        vectors[index] = vector
    return vectors


class EmotionTracker:
    """Detection off the event loop plus the per-person state kept in storage.

    ``batcher``: the memory's embedding batcher. When the detector reads that embedder's
    query vectors (the shipped classifier), a message's vector is asked of the batcher, so
    it is computed in one model call with other people's texts instead of one call of its
    own (a model is much cheaper a text in a batch); the recall that follows asks for the
    same vector and finds it among the embedder's recent ones."""

    def __init__(
        self,
        detector: EmotionDetector,
        states: Mapping[str, EmotionalStateConfig],
        rules: EmotionRules,
        storage: Storage,
        *,
        batcher: EmbeddingBatcher | None = None,
        judge: LLMJudge | None = None,
        judge_below: float = 0.5,
    ) -> None:
        # The "llm" detector: the LLM judges every message, its classifier answering
        # when the judge cannot (without a judge, the classifier alone).
        self.judge_always = isinstance(detector, LLMDetector)
        if isinstance(detector, LLMDetector):
            detector = detector.fallback
        self.detector = detector
        self.states = states
        self.rules = rules
        self.storage = storage
        self.judge = judge
        self.judge_below = judge_below
        wanted = detector.query_embedder
        parts: tuple[Embedder, ...] = ()
        if isinstance(detector.query_embedder, CombinedEmbedder):
            # e5 + USE: e5's vector from the memory's batcher, USE's from a batcher of
            # its own, and the head reads them side by side.
            wanted, *rest = detector.query_embedder.parts
            parts = tuple(rest)
        shares = batcher is not None and wanted is batcher.embedder
        self.batcher = batcher if shares else None
        self.part_batchers = [
            EmbeddingBatcher(part, max_wait_ms=batcher.max_wait_ms)
            for part in parts
            if batcher is not None and shares
        ]
        # A live message's vectors of every encoder in one thread call (one batch of
        # the combined encoder), instead of one call, and one thread woken, an encoder:
        # each vector is then handed to its encoder's batcher, where recall and the
        # memory's second vector find it.
        combined = detector.query_embedder
        self.joint = (
            EmbeddingBatcher(combined, max_wait_ms=batcher.max_wait_ms)
            if batcher is not None and self.part_batchers and isinstance(combined, CombinedEmbedder)
            else None
        )

    def wants_judge(self, reading: EmotionReading) -> bool:
        """Whether the LLM is asked about a message the classifier read as ``reading``."""
        return self.judge is not None and (self.judge_always or reading.score < self.judge_below)

    async def warm_up(self) -> None:
        """Load the detector's models (its encoders' weights) at start, through the same
        path a message takes, so the first message does not wait for them."""
        await self.detect(["oi, tudo bem?"])

    def ask_vectors(self, text: str) -> asyncio.Task[np.ndarray] | None:
        """Start computing ``text``'s query vectors now (a task), for :meth:`detect` to
        read later; None when the detector does not read the batcher's vectors."""
        if self.detector.inline or self.batcher is None or not text.strip():
            return None
        # The promise is made here, before the task starts: the message is stored
        # meanwhile, and its storage may ask for the same vector (stored as a query),
        # which then waits for it.
        task = asyncio.get_running_loop().create_task(self._query_vectors([text]))
        # Read here too: a turn that ends before the emotion stage (a duplicate) leaves
        # the task unread.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task

    async def detect(
        self, texts: Sequence[str], *, asked: Awaitable[np.ndarray] | None = None
    ) -> list[EmotionReading]:
        """Readings of ``texts``; ``asked``: their query vectors, already asked for
        (:meth:`ask_vectors`)."""
        if self.detector.inline:
            return self.detector.detect_many(list(texts))
        if self.batcher is not None:
            vectors = await (asked if asked is not None else self._query_vectors(texts))
            if len(texts) == 1 and len(texts[0]) <= INLINE_HEAD_CHARS:
                # The head over one short message's vector is a few small matrix products
                # and its n-grams (~0.15 ms at 40 characters, ~11 ms at 4,000): cheaper
                # than the hop to a thread.
                return self.detector.detect_many(list(texts), query_vectors=vectors)
            return await asyncio.to_thread(self.detector.detect_many, list(texts), vectors)
        return await asyncio.to_thread(self.detector.detect_many, list(texts))

    def _query_vectors(self, texts: Sequence[str]) -> Coroutine[Any, Any, np.ndarray]:
        """The computation of ``texts``' query vectors; a live message's (one text) is
        promised to the encoders' batchers at once, before it is awaited."""
        if self.joint is not None and len(texts) == 1 and texts[0].strip():
            promised = self._promise(texts[0])
            if promised:
                return self._joint_vectors(texts[0], promised)
        return self._each_encoder(texts)

    async def _each_encoder(self, texts: Sequence[str]) -> np.ndarray:
        assert self.batcher is not None
        blocks = await asyncio.gather(
            *(_batched_queries(b, texts) for b in [self.batcher, *self.part_batchers])
        )
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)

    def _promise(self, text: str) -> list[EmbeddingBatcher]:
        """The encoders' batchers ``text``'s query vector is promised to, computed in one
        call of the combined encoder: every one of them when one of them lacks it, so
        that the others (storage, recall) wait for it instead of computing it apart;
        none when each has it or computes it already."""
        assert self.batcher is not None
        batchers = [self.batcher, *self.part_batchers]
        if all(b.known("query", text) is not None for b in batchers):
            return []
        return [b for b in batchers if b.promise("query", text)]

    async def _joint_vectors(self, text: str, promised: list[EmbeddingBatcher]) -> np.ndarray:
        assert self.batcher is not None and self.joint is not None
        batchers = [self.batcher, *self.part_batchers]
        try:
            joint = await self.joint.embed_query(text)
        except BaseException:
            for b in promised:
                b.give_up("query", text)
            raise
        parts = np.split(joint, np.cumsum([b.dim for b in batchers])[:-1])
        for b, vector in zip(batchers, parts, strict=True):
            b.remember("query", text, vector)
        return joint[None, :]

    async def update_many(
        self,
        owner: str,
        readings: Sequence[tuple[EmotionReading, datetime]],
        *,
        announce: bool = False,
        wait: bool = True,
    ) -> EmotionalState:
        """Apply the readings to the stored state in one transaction (imports and live
        messages of one person may overlap: no update is lost). ``announce``: an import
        (not the process serving the person) tells the other processes, which then read
        the person's profile again (see UserStore.change_profile)."""

        computed: list[EmotionalState] = []

        def change(current: object) -> dict[str, object]:
            state = EmotionalState.from_dict(current if isinstance(current, dict) else None)
            for reading, at in readings:
                state = apply_reading(state, reading, at, self.rules)
            # A group commit may run this twice; the last run is what gets stored. Kept
            # as built: reading the stored dict back cost a second parse of the history.
            computed[:] = [state]
            return state.to_dict()

        await self.storage.users.change_profile(
            owner, PROFILE_KEY, change, announce=announce, wait=wait
        )
        return computed[-1]

    def tone(self, state: EmotionalState, at: datetime) -> Tone:
        return current_tone(state, at, self.states)

    def section(self, tone: Tone, language: str, *, trajectory: str | None = None) -> PromptSection:
        """The prompt block: the state's tag and instruction, then the feelings of the
        last weeks (``trajectory``, one line). A hostile past that is still remembered
        keeps the strict tone ("guardou rancor") whatever the mood now."""
        lines = []
        if tone.hostile_history and tone.state != HOSTILE_STATE and HOSTILE_STATE in self.states:
            strict = self.states[HOSTILE_STATE]
            lines += [strict.tag, strict.instruction(language)]
        lines += [tone.tag, tone.instruction(language)]
        if tone.response_style:
            lines.append(RESPONSE_STYLE_FORMAT.format(style=tone.response_style))
        if trajectory:
            lines.append(trajectory)
        return PromptSection(EMOTION_TITLE, "\n".join(lines), order=10, instruction=True)


class EmotionStage:
    """Reads the message's emotion and sets the tone. When the LLM judge is asked
    (:meth:`EmotionTracker.wants_judge`) and ``deferred`` (the app adds
    :class:`EmotionJudgeStage` before the prompt), the request runs while the next
    stages (recall) do their work, and the judge stage settles the reading; otherwise
    the judge is awaited here."""

    name = "emotion"

    def __init__(
        self,
        tracker: EmotionTracker,
        *,
        deferred: bool = False,
        hand_over: Callable[[MemoryNode], Awaitable[None]] | None = None,
    ) -> None:
        self.tracker = tracker
        self.deferred = deferred
        # Called with the stored message once its vectors were computed for the reading
        # (the memory's second vector, GraphMemory.store_second): the same texts, read
        # once.
        self.hand_over = hand_over

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        tracker = self.tracker
        judging: asyncio.Task[EmotionReading | None] | None = None
        try:
            if tracker.judge is not None and tracker.judge_always:
                # Asked at once, so the request overlaps the classifier's embedding too.
                judging = asyncio.create_task(tracker.judge.judge(ctx.text))
            asked = ctx.extras.pop(VECTORS_KEY, None)
            (reading,) = await tracker.detect([ctx.text], asked=asked)
            if self.hand_over is not None and ctx.node is not None:
                await self.hand_over(ctx.node)
            if judging is None and tracker.judge is not None and tracker.wants_judge(reading):
                judging = asyncio.create_task(tracker.judge.judge(ctx.text))
        except Exception:
            # Emotion enriches the reply; it must never cost the person their answer.
            log.exception("emotion stage failed for %s; answering without a tone", ctx.owner)
            if judging is not None:
                judging.cancel()
            await call_next()
            return
        if judging is None:
            await settle(ctx, tracker, reading)
            await call_next()
            return
        if not self.deferred:
            await settle(ctx, tracker, combine(reading, await judging))
            await call_next()
            return
        ctx.extras[PENDING_KEY] = (reading, judging)
        try:
            await call_next()
        finally:
            if not judging.done():  # the turn ended before the judge stage (a stop, an error)
                judging.cancel()


class EmotionVectorsStage:
    """Asks for the message's query vectors (e5 and USE, through the batchers) before the
    message is stored: storing waits for the message's stored vector (another text: the
    previous turn with it) and both computations then run side by side, in one batch
    window, instead of one after the other. The emotion stage reads them."""

    name = "emotion_vectors"

    def __init__(self, tracker: EmotionTracker) -> None:
        self.tracker = tracker

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        # A limited message is stored but not read (the emotion stage comes after the
        # throttle): nothing is asked for it.
        if not ctx.extras.get("rate_limited") and ctx.message.command is None:
            asked = self.tracker.ask_vectors(ctx.text)
            if asked is not None:
                ctx.extras[VECTORS_KEY] = asked
        await call_next()


class EmotionJudgeStage:
    """Settles a reading the LLM judge was asked about (see :class:`EmotionStage`):
    placed before the prompt, it waits for the judge (its own time-out bounds that) and
    applies the judged reading, or the classifier's when the judge failed."""

    name = "emotion_judge"

    def __init__(self, tracker: EmotionTracker) -> None:
        self.tracker = tracker

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        pending = ctx.extras.pop(PENDING_KEY, None)
        if pending is not None:
            reading, judging = pending
            await settle(ctx, self.tracker, combine(reading, await judging))
        await call_next()


async def settle(ctx: TurnContext, tracker: EmotionTracker, reading: EmotionReading) -> None:
    """Apply ``reading`` to the person's state, label the stored message, set the tone."""
    at = ctx.message.sent_at
    try:
        # The reply needs the new state, not its commit: both writes commit in the
        # background (the message itself is already stored), which takes a commit
        # wait, the longest under load, off the way to the reply.
        state = await tracker.update_many(ctx.owner, [(reading, at)], wait=False)
        if ctx.node is not None:
            await ctx.services.storage.nodes.set_emotion(
                ctx.owner, ctx.node.id, reading.label, reading.score, wait=False
            )
            ctx.node.emotion, ctx.node.emotion_score = reading.label, reading.score
        tone = tracker.tone(state, at)
    except Exception:
        log.exception("emotion stage failed for %s; answering without a tone", ctx.owner)
    else:
        ctx.extras["emotion"] = reading
        ctx.extras["tone"] = tone
        rules = tracker.rules
        trajectory = trajectory_line(
            state.emotion_history,
            at,
            threshold=rules.confidence_threshold,
            days=trajectory_days(rules.memory_days.values()),
        )
        ctx.sections.append(tracker.section(tone, ctx.language, trajectory=trajectory))
