"""Commands for everyone: /start /help /remember /memories /forget /forgetme /export /mood.

Written once here and used by every adapter (the console, Telegram, Discord slash
commands). Replies are in the person's language (``ctx.language``); what only concerns
the person (/memories, /export, /mood, /forgetme) is a private reply, which an adapter
shows ephemerally or sends by DM when asked in a group.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from akira_bot.commands.memories import forget, memories, memories_service, remember
from akira_bot.commands.mood import correct_mood
from akira_bot.commands.texts import state_name, tr
from core.commands import CommandHandler, CommandResult, CommandRouter
from core.i18n import ago
from core.pipeline import TurnContext
from core.services import Services
from core.storage.api import UserStore
from core.types import Attachment, CommandSpec, Reply, ReplyKind

log = logging.getLogger(__name__)

FORGETME_WINDOW = timedelta(minutes=5)
EXPORT_FILENAME = "akira-export.json"


# --- /forgetme confirmations ------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    code: str
    asked_at: datetime


class ForgetMeConfirmations:
    """A code per person, valid for ``window`` of message time. Kept in memory: after a
    restart the person simply asks again."""

    ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread

    def __init__(self, window: timedelta = FORGETME_WINDOW) -> None:
        self.window = window
        self._pending: dict[str, _Pending] = {}

    def ask(self, owner: str, at: datetime) -> str:
        code = "".join(secrets.choice(self.ALPHABET) for _ in range(6))
        self._pending[owner] = _Pending(code, at)
        return code

    def pending(self, owner: str, at: datetime) -> str | None:
        entry = self._pending.get(owner)
        if entry is None:
            return None
        if at - entry.asked_at > self.window:
            del self._pending[owner]
            return None
        return entry.code

    def clear(self, owner: str) -> None:
        self._pending.pop(owner, None)


def _confirmations(services: Services) -> ForgetMeConfirmations:
    """The engine's pending /forgetme codes (one tracker per engine)."""
    tracker = services.get(ForgetMeConfirmations)
    if tracker is None:
        tracker = ForgetMeConfirmations()
        services.provide(tracker)
    return tracker


PENDING_FORGETME = "forgetme_pending"  # profile field: a code asked for in any process


async def _stored_forgetme_code(
    users: UserStore, owner: str, at: datetime, window: timedelta
) -> str | None:
    """The code another process gave ``owner`` (kept in their profile), if still valid."""
    user = await users.get(owner)
    entry = user.profile.get(PENDING_FORGETME) if user is not None else None
    if not isinstance(entry, dict) or not isinstance(entry.get("code"), str):
        return None
    try:
        asked_at = datetime.fromisoformat(str(entry.get("asked_at")))
    except ValueError:
        return None
    if not timedelta(0) <= at - asked_at <= window:
        return None
    return entry["code"]


# --- the commands -----------------------------------------------------------------------------


def _reply(text: str, *, private: bool = False, attachment: Attachment | None = None) -> Reply:
    return Reply(text, ReplyKind.COMMAND, private=private, attachment=attachment)


async def start(ctx: TurnContext, args: str) -> CommandResult:
    name = ctx.message.author.display_name
    return tr(
        "start",
        ctx.language,
        name=f", {name}" if name else "",
        bot=ctx.services.persona.name,
    )


async def help_(ctx: TurnContext, args: str) -> CommandResult:
    pt = ctx.language == "pt"

    def line(spec: Any) -> str:
        hint = f" {spec.args_hint}" if spec.args_hint else ""
        text = (spec.description_pt if pt else "") or spec.description
        return f"/{spec.name}{hint} — {text}"

    specs = ctx.services.require(CommandRouter).specs
    lines = [tr("help_header", ctx.language)]
    lines.extend(line(s) for s in specs if not s.admin_only)
    if ctx.message.author.is_admin:
        admin = [line(s) for s in specs if s.admin_only]
        if admin:
            lines.extend(["", tr("help_admin_header", ctx.language), *admin])
    return "\n".join(lines)


async def forgetme(ctx: TurnContext, args: str) -> CommandResult:
    owner, at = ctx.owner, ctx.message.sent_at
    given = args.strip().upper()
    users = ctx.services.storage.users
    confirmations = _confirmations(ctx.services)
    if not given:
        new_code = confirmations.ask(owner, at)
        # Also in the person's stored profile: with several bot processes on one
        # database, the confirmation may reach another process (docs/storage.md).
        await users.update_profile(
            owner, **{PENDING_FORGETME: {"code": new_code, "asked_at": at.isoformat()}}
        )
        minutes = int(confirmations.window.total_seconds() // 60)
        return _reply(
            tr("forgetme_ask", ctx.language, code=new_code, minutes=minutes), private=True
        )
    code = confirmations.pending(owner, at)
    if code is None:
        code = await _stored_forgetme_code(users, owner, at, confirmations.window)
    if code is None:
        return _reply(tr("forgetme_no_request", ctx.language), private=True)
    if not secrets.compare_digest(given.encode(), code.encode()):
        return _reply(tr("forgetme_wrong_code", ctx.language, code=code), private=True)
    confirmations.clear(owner)
    language = ctx.language
    # Hold the person's memory lock: an extraction still running for an earlier
    # message must not write anything back after this.
    async with memories_service(ctx.services).forgetting(owner):
        removed = await ctx.services.storage.forget_owner(owner)
    log.info("forgot %s on their request: %s", owner, removed)
    return _reply(tr("forgetme_done", language, total=sum(removed.values())), private=True)


async def export(ctx: TurnContext, args: str) -> CommandResult:
    data = await ctx.services.storage.export_owner(ctx.owner)
    blob = json.dumps(data, ensure_ascii=False, indent=2, default=str).encode("utf-8")
    text = tr(
        "export_done",
        ctx.language,
        messages=len(data.get("messages") or []),
        memories=len(data.get("memories") or []),
    )
    return _reply(text, private=True, attachment=Attachment(EXPORT_FILENAME, blob))


async def mood(ctx: TurnContext, args: str) -> CommandResult:
    if args.strip():  # "/mood not angry": a correction (akira_bot.commands.mood)
        return await correct_mood(ctx, args)
    user = await ctx.services.storage.users.get(ctx.owner)
    raw = (user.profile.get("emotion") if user else None) or None
    if not isinstance(raw, dict):
        return _reply(tr("mood_unknown", ctx.language), private=True)
    return _reply(describe_mood(raw, ctx.message.sent_at, ctx.language, ctx.services), private=True)


# Each command's name, descriptions and argument hint, in /help's order.
USER_COMMANDS: list[tuple[CommandSpec, CommandHandler]] = [
    (
        CommandSpec("start", "Say hello and see what I can do", "Começar e ver o que eu faço"),
        start,
    ),
    (CommandSpec("help", "List the commands", "Listar os comandos"), help_),
    (
        CommandSpec(
            "remember",
            "Remember something about you",
            "Guardar algo sobre você",
            args_hint="<text | key: content> [!high] [until 2026-12-31 | for 2 weeks]",
        ),
        remember,
    ),
    (
        CommandSpec(
            "memories",
            "What I know about you",
            "O que eu sei sobre você",
            args_hint="[page | words | #tag | expiring | confirm <id> | edit <id> <text>]",
        ),
        memories,
    ),
    (
        CommandSpec("forget", "Forget one memory", "Esquecer uma memória", args_hint="<key | id>"),
        forget,
    ),
    (
        CommandSpec(
            "forgetme",
            "Erase everything about you (asks to confirm)",
            "Apagar tudo sobre você (pede confirmação)",
            args_hint="[code]",
        ),
        forgetme,
    ),
    (
        CommandSpec(
            "export", "All your data as a JSON file", "Todos os seus dados em um arquivo JSON"
        ),
        export,
    ),
    (
        CommandSpec(
            "mood",
            "Your emotional state, as I read it (or correct it)",
            "Seu estado emocional, como eu percebo (ou corrija)",
            args_hint="[not <state> | <state>]",
        ),
        mood,
    ),
]


def register_user_commands(router: CommandRouter) -> None:
    """Register the everyone-commands on ``router``."""
    for spec, handler in USER_COMMANDS:
        router.register(spec, handler)


@dataclass(slots=True)
class MoodReading:
    state: str = "neutro"
    confidence: float | None = None
    hostile: bool = False
    since: datetime | None = None
    history: list[tuple[datetime, str, float]] = field(default_factory=list)

    def summary(self, language: str) -> str:
        """``triste (82%)``: the state and how sure the reading was."""
        shown = f" ({self.confidence:.0%})" if self.confidence else ""
        return f"{state_name(self.state, language)}{shown}"


def read_mood(raw: dict[str, Any], at: datetime, services: Services) -> MoodReading:
    """The emotional state stored on a profile (key ``emotion``) as of message time
    ``at``, following the emotion feature's rules (an expired state reads as neutral).
    A profile the rules cannot read still shows its stored state name."""
    stored = raw.get("emotion_confidence_score")
    mood = MoodReading(
        state=str(raw.get("emotional_state") or "neutro"),
        confidence=float(stored) if isinstance(stored, int | float) else None,
    )
    try:
        from core.emotion.config import load_emotional_states
        from core.emotion.state import EmotionalState, current_tone

        parsed = EmotionalState.from_dict(raw)
        tracker = services.emotion
        # The emotion feature's states (an operator's edited file), else the shipped ones.
        states = getattr(tracker, "states", None) or load_emotional_states()
        tone = current_tone(parsed, at, states)
        mood.state, mood.confidence, mood.hostile = (
            tone.state,
            tone.confidence,
            tone.hostile_history,
        )
        mood.since = parsed.last_emotion_change
        mood.history = [(e.timestamp, e.emotion, e.confidence) for e in parsed.emotion_history[-5:]]
    except Exception:  # an older or partial profile: show what is stored
        log.debug("emotion rules unavailable for /mood", exc_info=True)
    return mood


def describe_mood(raw: dict[str, Any], at: datetime, language: str, services: Services) -> str:
    """The person's emotional state and recent readings, in words (``/mood``)."""
    mood = read_mood(raw, at, services)
    shown = f" ({mood.confidence:.0%})" if mood.confidence else ""
    lines = [tr("mood_state", language, state=state_name(mood.state, language), confidence=shown)]
    if mood.since is not None and mood.state != "neutro":
        when = ago(max(0.0, (at - mood.since).total_seconds()), language)
        lines.append(tr("mood_since", language, when=when))
    if mood.hostile:
        lines.append(tr("mood_hostile", language))
    if mood.history:
        lines.append(tr("mood_recent", language))
        for when_at, emotion, score in reversed(mood.history):
            lines.append(
                f"• {ago(max(0.0, (at - when_at).total_seconds()), language)}: "
                f"{state_name(emotion, language)} ({score:.0%})"
            )
    return "\n".join(lines)
