"""Admin commands: /stats, /user <platform:id>, /verify <mem_id>.

They are registered ``admin_only``: the router checks ``message.author.is_admin`` on every
call, before the handler runs, and a refusal carries no data. The handlers still never put
secrets (tokens, API keys) in a reply: only model names and counts.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from akira_bot.commands.profile import admin_profile_text
from akira_bot.commands.texts import state_name, tr
from akira_bot.commands.user import memories_service, read_mood
from core.commands import CommandHandler, CommandResult, CommandRouter, UsageError
from core.i18n import ago
from core.pipeline import TurnContext
from core.profile import ProfileLearner
from core.services import Services
from core.storage.feedback_records import FeedbackTotals
from core.types import CommandSpec, Reply, ReplyKind, parse_user_key, utcnow

_MEM_ID = re.compile(r"^mem_[0-9a-f]{1,64}$")
_USER_KEY_MAX = 200


def format_uptime(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s"


def _component_name(value: object, fallback: str) -> str:
    """A readable name for a model or detector object (never its configuration)."""
    if value is None:
        return fallback
    if isinstance(value, str):
        return value
    for attr in ("name", "model", "model_name"):
        found = getattr(value, attr, None)
        if isinstance(found, str) and found:
            return found
    return type(value).__name__


def _llm_name(services: Services) -> str:
    llm = services.llm
    model = getattr(llm, "model", "") or ""
    name = getattr(llm, "name", "") or type(llm).__name__
    return f"{name} ({model})" if model and model != name else name


def _embedder_name(services: Services) -> str:
    embedder = services.embedder
    if embedder is None:
        return ""
    name = _component_name(embedder, "")
    dim = getattr(embedder, "dim", None) or getattr(embedder, "dimension", None)
    return f"{name} ({dim}d)" if isinstance(dim, int) else name


def _when(value: datetime | None, at: datetime, language: str) -> str:
    if value is None:
        return "-"
    return f"{value.strftime('%Y-%m-%d %H:%M')} UTC ({ago(max(0.0, (at - value).total_seconds()), language)})"


def feedback_lines(totals: FeedbackTotals, language: str) -> list[str]:
    """/stats' feedback lines: the ratio of thumbs up to down on replies, and how many
    times people corrected a reading of each emotion (numbers only, no one's text)."""
    share = (
        tr("stats_feedback_share", language, share=f"{totals.up / totals.ratings:.0%}")
        if totals.ratings
        else ""
    )
    by_emotion = ", ".join(
        f"{state_name(label, language)} {count}"
        for label, count in sorted(totals.corrected_from.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return [
        tr("stats_feedback", language, up=totals.up, down=totals.down, share=share),
        tr(
            "stats_corrections",
            language,
            total=totals.corrections,
            by_emotion=tr("stats_corrections_by", language, counts=by_emotion)
            if by_emotion
            else "",
        ),
    ]


async def stats(ctx: TurnContext, args: str) -> CommandResult:
    services = ctx.services
    none = tr("none", ctx.language)
    counts = await memories_service(services).counts()
    feedback = feedback_lines(await services.storage.feedback.totals(), ctx.language)
    return Reply(
        "\n".join(
            [
                tr(
                    "stats",
                    ctx.language,
                    users=await services.storage.users.count(),
                    messages=await services.storage.nodes.count(),
                    memories=counts.total,
                    verified=counts.verified,
                    unverified=counts.unverified,
                    # Uptime is about the running process: wall clock on purpose.
                    uptime=format_uptime(utcnow() - services.started_at),
                    llm=_llm_name(services),
                    embedder=_embedder_name(services) or none,
                    emotion=services.emotion_detector or none,
                    background=services.background.pending,
                ),
                *feedback,
            ]
        ),
        ReplyKind.COMMAND,
        private=True,
    )


async def user(ctx: TurnContext, args: str) -> CommandResult:
    key = args.strip()
    try:
        if len(key) > _USER_KEY_MAX or " " in key:
            raise ValueError(key)
        parse_user_key(key)
    except ValueError:
        raise UsageError(tr("user_usage", ctx.language)) from None
    services = ctx.services
    record = await services.storage.users.get(key)
    if record is None:
        return Reply(tr("user_not_found", ctx.language, user=key), ReplyKind.COMMAND, private=True)
    at = ctx.message.sent_at
    counts = await memories_service(services).counts(key, at=at)
    emotion = record.profile.get("emotion")
    mood = read_mood(emotion if isinstance(emotion, dict) else {}, at, services)
    if mood.hostile:
        hostile = "hostile history" if ctx.language == "en" else "histórico hostil"
        mood_text = f"{mood.summary(ctx.language)}, {hostile}"
    else:
        mood_text = mood.summary(ctx.language)
    text = tr(
        "user_info",
        ctx.language,
        user=key,
        name=record.display_name or "-",
        language=record.language or "-",
        created=_when(record.created_at, at, ctx.language),
        seen=_when(record.last_seen_at, at, ctx.language),
        messages=await services.storage.nodes.count(key),
        memories=counts.total,
        verified=counts.verified,
        unverified=counts.unverified,
        expired=counts.expired,
        emotion=mood_text,
    )
    # The learned profile (built-in plugin profile), when that plugin is on.
    learner = services.get(ProfileLearner)
    if learner is not None:
        learned = await learner.profile(key, at=at)
        text += "\n" + admin_profile_text(learned, ctx.language, learner.topic_label)
    return Reply(text, ReplyKind.COMMAND, private=True)


async def verify(ctx: TurnContext, args: str) -> CommandResult:
    memory_id = args.strip().lower()
    if not _MEM_ID.match(memory_id):
        raise UsageError(tr("verify_usage", ctx.language))
    service = memories_service(ctx.services)
    owner = await service.store.owner_of(memory_id)
    if owner is None:
        return Reply(tr("verify_not_found", ctx.language), ReplyKind.COMMAND, private=True)
    before = await service.get(owner, memory_id)
    memory = await service.verify(owner, memory_id, verified_by=ctx.owner, at=ctx.message.sent_at)
    if memory is None or before is None:
        return Reply(tr("verify_not_found", ctx.language), ReplyKind.COMMAND, private=True)
    key = "verify_already" if before.verified else "verify_done"
    return Reply(
        tr(key, ctx.language, category=memory.category.value, key=memory.key, owner=owner),
        ReplyKind.COMMAND,
        private=True,
    )


ADMIN_COMMANDS: list[tuple[CommandSpec, CommandHandler]] = [
    (
        CommandSpec(
            "stats", "Bot statistics (admins)", "Estatísticas do bot (admins)", admin_only=True
        ),
        stats,
    ),
    (
        CommandSpec(
            "user",
            "A person's profile, mood and memory counts (admins)",
            "Perfil, humor e memórias de uma pessoa (admins)",
            admin_only=True,
            args_hint="<platform:id>",
        ),
        user,
    ),
    (
        CommandSpec(
            "verify",
            "Verify a memory the bot inferred (admins)",
            "Verificar uma memória deduzida pelo bot (admins)",
            admin_only=True,
            args_hint="<mem_id>",
        ),
        verify,
    ),
]


def register_admin_commands(router: CommandRouter) -> None:
    """Register /stats /user /verify on ``router`` (each ``admin_only``: the router
    checks the caller on every call)."""
    for spec, handler in ADMIN_COMMANDS:
        router.register(spec, handler)
