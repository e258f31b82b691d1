"""The reply check on the paths that reach a person outside the LLM answer: command replies
(which quote memories, some proposed by the model) and exports.

The LLM answer is checked in the clean stage against its own turn's prompt; these are
checked against AKIRA's fixed instructions (:func:`engine_instruction_texts`). The
person's own words (their messages, the memories they told us) are theirs and are never
altered; what the model wrote (its replies, the memories it proposed) is.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

from core.cleaner import PromptInstructions, guard_reply, instruction_texts
from core.i18n import t
from core.pipeline import TurnContext
from core.services import Services
from core.types import Reply

log = logging.getLogger(__name__)

# Export records that hold the person's own words: kept exactly as stored.
_PERSON_TYPES = frozenset({"user_message"})
_PERSON_SOURCES = frozenset({"user"})


def engine_instruction_texts(services: Services) -> Iterator[str]:
    """AKIRA's fixed instructions, whatever the turn: the persona in every language and
    every emotional state's instruction and tag. A reply that gives them away (say, the
    English persona translated back from the Portuguese one) is caught as well."""
    persona = services.persona
    for language in persona.system:
        yield persona.system_prompt(language)
    tracker = services.extras.get("emotion_tracker")
    for state in getattr(tracker, "states", {}).values():
        yield f"{state.tag}\n{state.instruction_pt}"
        yield f"{state.tag}\n{state.instruction_en}"


def engine_instructions(services: Services) -> PromptInstructions:
    """What a reply outside a turn's prompt is checked against."""
    return PromptInstructions(instruction_texts(engine_instruction_texts(services)))


def _guard_value(value: Any, instructions: PromptInstructions, changed: list[int]) -> Any:
    """``value`` (export data) with the model's strings checked; records of the person's own
    words are left as they are."""
    if isinstance(value, dict):
        if value.get("type") in _PERSON_TYPES or value.get("source") in _PERSON_SOURCES:
            return value
        return {k: _guard_value(v, instructions, changed) for k, v in value.items()}
    if isinstance(value, list):
        return [_guard_value(v, instructions, changed) for v in value]
    if isinstance(value, str) and value.strip():
        guarded = guard_reply(value, instructions, blocks=False)
        if guarded.text != value:
            changed.append(1)
            return guarded.text
    return value


def guard_outgoing(ctx: TurnContext, reply: Reply) -> Reply:
    """``reply`` (a command's) as it may reach the person: its text checked, a JSON
    attachment (an export) checked value by value."""
    instructions = engine_instructions(ctx.services)
    text = reply.text
    guarded = guard_reply(text, instructions, blocks=False)
    if guarded.refused:
        text = t("leak_refusal", ctx.language)
    elif guarded.text != text:
        text = guarded.text
    attachment = reply.attachment
    if attachment is not None and attachment.mime_type == "application/json":
        try:
            data = json.loads(attachment.data)
        except (ValueError, UnicodeDecodeError):
            data = None
        if data is not None:
            changed: list[int] = []
            cleaned = _guard_value(data, instructions, changed)
            if changed:
                log.warning(
                    "an export for %s held %d model texts that leaked", ctx.owner, len(changed)
                )
                blob = json.dumps(cleaned, ensure_ascii=False, indent=2).encode("utf-8")
                attachment = dataclasses.replace(attachment, data=blob)
    if text == reply.text and attachment is reply.attachment:
        return reply
    if text != reply.text:
        log.warning("a command reply to %s quoted AKIRA's instructions: cut", ctx.owner)
    return dataclasses.replace(reply, text=text, attachment=attachment)
