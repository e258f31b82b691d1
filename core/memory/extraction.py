"""Memory extraction: after an exchange the LLM proposes structured memories as JSON.

Runs as an after-reply hook, in the background, with bounded concurrency. The model's
output is untrusted data: it is parsed against a pydantic schema that has no field for
``source``, ``verified``, ``verified_by`` or ``confidence`` (anything like that is
ignored), and every proposal is stored through :meth:`StructuredMemories.propose`, which
always writes source agent, unverified, confidence 0.7 and never overwrites what a person
stated or verified. Invalid output is logged and ignored; nothing here raises into the
engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.llm.base import ChatMessage, GenerationOptions, LLMError, LLMProvider
from core.memory.structured import StructuredMemories
from core.pipeline import TurnContext
from core.storage.memory_records import (
    MAX_KEY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Category,
    MemoryValidationError,
    Priority,
)
from core.types import ReplyKind

log = logging.getLogger(__name__)

MAX_PROPOSALS = 8  # per exchange: more is the model rambling
MAX_PROPOSAL_CHARS = 500  # a proposal is a short fact, not a transcript
MAX_OUTPUT_CHARS = 20_000  # never json-parse a runaway generation


class ExtractionError(ValueError):
    """The model's output is not the JSON the schema asks for."""


class ProposedMemory(BaseModel):
    """One memory as the model may propose it. Only these fields are read."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    category: Category
    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    content: str = Field(min_length=1, max_length=MAX_PROPOSAL_CHARS)
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    priority: Priority = Priority.NORMAL
    expires_in_days: float | None = Field(default=None, gt=0, le=3650)

    @field_validator("category", "priority", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("tags")
    @classmethod
    def _short_tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if len(tag) > MAX_TAG_CHARS:
                raise ValueError(f"a tag has at most {MAX_TAG_CHARS} characters")
        return value


class ExtractionOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    memories: list[ProposedMemory] = Field(default_factory=list, max_length=MAX_PROPOSALS)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)


def parse_extraction(text: str) -> list[ProposedMemory]:
    """The proposals in a model's output: ``{"memories": [...]}`` (or a bare list), maybe
    inside a code fence or after a thinking block. Raises :class:`ExtractionError`."""
    if len(text) > MAX_OUTPUT_CHARS:
        raise ExtractionError(f"output too long ({len(text)} characters)")
    body = _THINK.sub("", text).strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ExtractionError("no JSON object in the output")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"invalid JSON: {exc.msg} at {exc.pos}") from None
    if isinstance(data, list):
        data = {"memories": data}
    try:
        return ExtractionOutput.model_validate(data).memories
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ExtractionError(f"schema violation: {problems}") from None


SYSTEM_PROMPT = """\
You extract long-term memories about the USER from one exchange of a chat.
Answer with JSON only, no prose: {"memories": [ ... ]} and an empty list when there is
nothing worth remembering. Each memory is an object:
  "category": one of identity, preference, fact, project, skill, mistake, context, note
  "key": short snake_case name, e.g. "favourite_food"; reuse an existing key to update it
  "content": the fact in one short sentence, in the user's language
  "tags": up to 5 lowercase words
  "priority": critical, high, normal or low
  "expires_in_days": a number for temporary facts (plans, moods), else omit it
Only remember what the USER said about themself, stable and useful later. Never remember
secrets, passwords, tokens or anything the assistant said about itself."""


def extraction_prompt(
    user_text: str, reply_text: str, existing_keys: Sequence[str]
) -> list[ChatMessage]:
    from core.cleaner import neutralise_user_text

    known = ", ".join(existing_keys) if existing_keys else "(none)"
    exchange = (
        f"Known memory keys: {known}\n\n"
        f"USER: {neutralise_user_text(user_text)}\n"
        f"ASSISTANT: {neutralise_user_text(reply_text)}\n\n"
        'JSON ({"memories": [...]}):'
    )
    return [ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", exchange)]


class MemoryExtractor:
    """The after-reply hook: ``services.after_reply.append(MemoryExtractor(...))``.

    ``concurrency`` bounds how many extractions talk to the LLM at once (they share it with
    live replies); the engine's background runner bounds the rest.
    """

    __name__ = "memory_extraction"  # the background task's name

    def __init__(
        self,
        memories: StructuredMemories,
        llm: LLMProvider,
        *,
        concurrency: int = 2,
        max_tokens: int = 400,
        known_keys: int = 40,
    ) -> None:
        self.memories = memories
        self.llm = llm
        self.max_tokens = max_tokens
        self.known_keys = known_keys
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self.stored = 0  # proposals written (created or updated), for tests and stats
        self.rejected = 0  # outputs or proposals ignored as invalid

    async def __call__(self, ctx: TurnContext) -> None:
        if ctx.message.command is not None or not ctx.text or not ctx.reply_text:
            return
        if ctx.extras.get("reply_kind") is ReplyKind.FALLBACK or ctx.extras.get("llm_failed"):
            return
        owner = ctx.owner
        at = ctx.message.sent_at
        epoch = self.memories.epoch(owner)
        async with self._slots:
            existing = await self.memories.active(owner, at=at)
            keys = [f"{m.category.value}/{m.key}" for m in existing[: self.known_keys]]
            prompt = extraction_prompt(ctx.text, ctx.reply_text, keys)
            options = GenerationOptions(max_tokens=self.max_tokens, temperature=0.0, json_mode=True)
            try:
                generation = await self.llm.generate(prompt, options)
            except LLMError as exc:
                log.warning("memory extraction skipped, the LLM failed: %s", exc)
                return
        try:
            proposals = parse_extraction(generation.text)
        except ExtractionError as exc:
            self.rejected += 1
            log.warning("ignored invalid memory extraction output: %s", exc)
            return
        scope = ctx.message.chat.privacy_scope
        for proposal in proposals:
            expires = (
                at + timedelta(days=proposal.expires_in_days)
                if proposal.expires_in_days is not None
                else None
            )
            try:
                result = await self.memories.propose(
                    owner,
                    proposal.category,
                    proposal.key,
                    proposal.content,
                    tags=proposal.tags,
                    priority=proposal.priority,
                    expires_at=expires,
                    scope=scope,
                    at=at,
                    epoch=epoch,
                )
            except MemoryValidationError as exc:
                self.rejected += 1
                log.warning("ignored an invalid memory proposal: %s", exc)
                continue
            if result is None:
                return  # the person was forgotten meanwhile
            memory, outcome = result
            if outcome.value in ("created", "updated"):
                self.stored += 1
            log.debug("memory proposal %s/%s: %s", memory.category, memory.key, outcome)
