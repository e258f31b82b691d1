"""/remember, /memories and /forget: people in charge of their structured memories.

``/memories`` takes, besides a page number, a search (``/memories pizza``, ``#tag``), the
memories that expire soon (``expiring [days]``), and the two ways a person corrects what
is kept: ``confirm <id>`` (a memory the bot proposed becomes verified, its source stays
agent) and ``edit <id> <text> [!priority] [until <date>]`` (a new version, the earlier one
kept in the history). Ids are shown short (see :func:`core.memory.structured.short_ids`).
Every reply is private: it quotes the person's memories.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from akira_bot.commands.memory_options import (
    MemoryOptionError,
    MemoryOptions,
    split_options,
)
from akira_bot.commands.texts import tr
from core.commands import CommandResult, UsageError
from core.embeddings.hashing import fold
from core.memory.structured import (
    EXTRAS_KEY,
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Category,
    MemoryValidationError,
    Priority,
    Source,
    StoreOutcome,
    StructuredMemories,
    StructuredMemory,
    format_memory,
    normalise_key,
    normalise_tags,
    short_ids,
)
from core.pipeline import TurnContext
from core.services import Services
from core.storage.memory_records import MAX_QUERY_CHARS, query_words
from core.types import Reply, ReplyKind

PAGE_SIZE = 10
MAX_LISTED = 1000  # /memories reads at most this many (a person's list is far shorter)
FOUND_LIMIT = 20  # a search, tag or expiring list shows at most this many
EXPIRING_DAYS = 7  # /memories expiring: what expires within a week, unless told
MAX_EXPIRING_DAYS = 366
# Longer than any memory and its options: anything beyond is not a command argument.
MAX_ARGS_CHARS = MAX_CONTENT_CHARS + 200

_CATEGORIES = ", ".join(c.value for c in Category)


def memories_service(services: Services) -> StructuredMemories:
    """The structured-memory service the built-in plugin set up (or one over the storage
    part, so the commands work with that plugin switched off)."""
    service = services.structured_memories
    if service is None:
        service = StructuredMemories(services.storage.memories, storage=services.storage)
        services.structured_memories = service
        services.extras[EXTRAS_KEY] = service
    return service


def _private(text: str) -> Reply:
    return Reply(text, ReplyKind.COMMAND, private=True)


# --- /remember parsing -----------------------------------------------------------------------


class UnknownCategory(ValueError):
    pass


class NothingToRemember(MemoryValidationError):
    """Only options (``/remember !high``) or nothing at all: the usage line says what to
    write, rather than the limits."""


@dataclass(frozen=True, slots=True)
class RememberRequest:
    category: Category
    key: str
    content: str
    tags: list[str]
    options: MemoryOptions = field(default_factory=MemoryOptions)


# "category/key: content" or "key: content"; the colon must be followed by a space so that
# "https://..." or "12:30" in plain text is not read as a key.
_KEYED = re.compile(
    r"^(?:(?P<category>[A-Za-z]+)\s*/\s*)?(?P<key>[^:\n]+?)\s*:\s+(?P<content>.+)$", re.DOTALL
)
_HASHTAG = re.compile(r"(?<![\w#])#([^\W_][\w\-]*)", re.UNICODE)
_TRAILING_TAGS = re.compile(r"(?:\s+#[^\W_][\w\-]*)+\s*$", re.UNICODE)
MAX_KEY_WORDS = 6  # "my favourite food: pizza" is a key; a sentence before a colon is not
AUTO_KEY_WORDS = 5


def auto_key(content: str) -> str:
    """A key for plain ``/remember <text>``: its first words in snake_case, so telling the
    same thing twice updates one memory; text without letters or digits gets a hash."""
    words = content.split()[:AUTO_KEY_WORDS]
    try:
        key = normalise_key(" ".join(words))[:48].rstrip("_")
    except MemoryValidationError:
        key = ""
    if not key:
        digest = hashlib.sha1(content.encode("utf-8")).hexdigest()[:8]
        key = f"note_{digest}"
    return key


def content_and_tags(text: str) -> tuple[str, list[str]]:
    """``"pizza #food"`` -> ``("pizza", ["food"])``: every hashtag is a tag, trailing ones
    are taken out of the content (unless nothing else is left)."""
    tags = [t.lower() for t in _HASHTAG.findall(text)]
    stripped = _TRAILING_TAGS.sub("", text).strip()
    return (stripped or text.strip()), tags


def parse_remember(args: str, at: datetime | None = None) -> RememberRequest:
    """Raises UnknownCategory, MemoryOptionError (a bad priority or date, with ``at``
    the message's time) or MemoryValidationError (too long, no content...)."""
    text = args.strip()
    options = MemoryOptions()
    if at is not None:
        text, options = split_options(text, at)
    if not text:
        raise NothingToRemember("nothing to remember")
    category = Category.NOTE
    key: str | None = None
    content = text
    match = _KEYED.match(text)
    if match and len(match.group("key").split()) <= MAX_KEY_WORDS:
        if match.group("category"):
            try:
                category = Category(match.group("category").lower())
            except ValueError:
                raise UnknownCategory(match.group("category")) from None
        key = normalise_key(match.group("key"))
        content = match.group("content").strip()
    content, tags = content_and_tags(content)
    if len(content) > MAX_CONTENT_CHARS:
        raise MemoryValidationError("content too long")
    return RememberRequest(category, key or auto_key(content), content, tags, options)


# --- how memories are shown ------------------------------------------------------------------


def show_expiry(expires_at: datetime) -> str:
    """``2026-12-31`` for a memory kept through that day (it expires at the next
    midnight), else the moment: ``2026-12-17 14:20 UTC``."""
    if expires_at.time() == time(0):
        return (expires_at - timedelta(days=1)).strftime("%Y-%m-%d")
    return expires_at.strftime("%Y-%m-%d %H:%M %Z").strip()


def _list_entry(
    index: int, memory: StructuredMemory, at: datetime, language: str, short: str
) -> str:
    entry = format_memory(index, memory)
    if memory.expired(at):
        entry += f" {tr('memories_expired', language)}"
    elif memory.expires_at is not None:
        entry += f" {tr('memories_until', language, date=show_expiry(memory.expires_at))}"
    return f"{entry}\n    id: {short}"


def _listing(
    header: str,
    shown: Sequence[tuple[int, StructuredMemory]],
    everything: Sequence[StructuredMemory],
    at: datetime,
    language: str,
    trailer: Sequence[str] = (),
) -> Reply:
    ids = short_ids(everything)
    lines = [header]
    for index, memory in shown:
        lines.append("")
        lines.append(_list_entry(index, memory, at, language, ids.get(memory.id, memory.id)))
    lines.append("")
    lines.extend(trailer)
    lines.append(tr("memories_footer", language))
    return _private("\n".join(lines))


# --- the commands -----------------------------------------------------------------------------


def _options_error(error: MemoryOptionError, language: str, usage: str) -> UsageError:
    return UsageError(f"{tr(error.reason, language, **error.values)}\n{usage}")


def _limits(language: str) -> str:
    return tr(
        "remember_limits",
        language,
        key=MAX_KEY_CHARS,
        content=MAX_CONTENT_CHARS,
        tags=MAX_TAGS,
        tag=MAX_TAG_CHARS,
    )


def _describe_options(memory: StructuredMemory, options: MemoryOptions, language: str) -> str:
    """What the person set besides the text, said back so a misread date shows."""
    parts = []
    if options.priority is not None:
        name = tr(f"priority_{memory.priority.value}", language)
        parts.append(tr("remember_priority", language, priority=name))
    if memory.expires_at is not None and options.expires_at is not None:
        parts.append(tr("remember_expires", language, date=show_expiry(memory.expires_at)))
    if options.clear_expiry:
        parts.append(tr("remember_no_expiry", language))
    return (" " + " ".join(parts)) if parts else ""


async def remember(ctx: TurnContext, args: str) -> CommandResult:
    language = ctx.language
    usage = tr("remember_usage", language, categories=_CATEGORIES)
    if not args.strip():
        raise UsageError(usage)
    if len(args) > MAX_ARGS_CHARS:
        raise UsageError(f"{_limits(language)}\n{usage}")
    try:
        request = parse_remember(args, ctx.message.sent_at)
        memory, outcome = await memories_service(ctx.services).store_memory(
            ctx.owner,
            request.category,
            request.key,
            request.content,
            tags=request.tags,
            priority=request.options.priority or Priority.NORMAL,
            expires_at=request.options.expires_at,
            source=Source.USER,
            scope=ctx.message.chat.privacy_scope,
            at=ctx.message.sent_at,
        )
    except UnknownCategory:
        raise UsageError(
            f"{tr('remember_bad_category', language, categories=_CATEGORIES)}\n{usage}"
        ) from None
    except NothingToRemember:
        raise UsageError(usage) from None
    except MemoryOptionError as error:
        raise _options_error(error, language, usage) from None
    except MemoryValidationError:
        raise UsageError(f"{_limits(language)}\n{usage}") from None
    text_key = {
        StoreOutcome.CREATED: "remember_created",
        StoreOutcome.UPDATED: "remember_updated",
    }.get(outcome, "remember_unchanged")
    said = tr(text_key, language, category=memory.category.value, key=memory.key)
    return said + _describe_options(memory, request.options, language)


_EXPIRING = {"expiring", "expirando", "vencendo", "expira"}
_CONFIRM = {"confirm", "confirmar", "verify", "verificar"}
_EDIT = {"edit", "editar"}
_SEARCH = {"search", "buscar", "procurar"}


async def memories(ctx: TurnContext, args: str) -> CommandResult:
    """``/memories [page]``, ``/memories <words> [#tag...]``, ``/memories expiring
    [days]``, ``/memories confirm <id>``, ``/memories edit <id> ...``."""
    raw = args.strip()
    if len(raw) > MAX_ARGS_CHARS:
        raise UsageError(tr("memories_usage", ctx.language))
    if not raw or _number(raw):
        return await _page(ctx, raw)
    first, *more = raw.split(maxsplit=1)
    rest = more[0] if more else ""
    word = first.casefold()
    if word in _EXPIRING:
        return await _expiring(ctx, rest.strip())
    if word in _CONFIRM:
        return await _confirm(ctx, rest.strip())
    if word in _EDIT:
        return await _edit(ctx, rest.strip())
    if word in _SEARCH:
        return await _search(ctx, rest.strip())
    return await _search(ctx, raw)


def _number(text: str) -> bool:
    """ASCII digits only ("²" is a digit to str.isdigit, and no number to int)."""
    return text.isascii() and text.isdigit()


async def _page(ctx: TurnContext, raw: str) -> Reply:
    if raw and not (len(raw) <= 6 and int(raw) >= 1):
        raise UsageError(tr("memories_usage", ctx.language))
    page = int(raw) if raw else 1
    at = ctx.message.sent_at
    everything = await memories_service(ctx.services).all(ctx.owner, limit=MAX_LISTED)
    if not everything:
        return _private(tr("memories_empty", ctx.language))
    # Active first (priority, then recency, as recall orders them), expired ones last.
    ordered = [m for m in everything if not m.expired(at)] + [
        m for m in everything if m.expired(at)
    ]
    pages = (len(ordered) + PAGE_SIZE - 1) // PAGE_SIZE
    if page > pages:
        return _private(tr("memories_no_page", ctx.language, page=page, pages=pages))
    verified = sum(1 for m in ordered if m.verified)
    first = (page - 1) * PAGE_SIZE
    header = tr(
        "memories_header",
        ctx.language,
        page=page,
        pages=pages,
        total=len(ordered),
        verified=verified,
        unverified=len(ordered) - verified,
    )
    shown = list(enumerate(ordered[first : first + PAGE_SIZE], first + 1))
    trailer = [tr("memories_next", ctx.language, page=page + 1)] if page < pages else []
    return _listing(header, shown, everything, at, ctx.language, trailer)


async def _found(
    ctx: TurnContext, header: str, found: Sequence[StructuredMemory], none: str
) -> Reply:
    """A search, tag or expiring list: at most :data:`FOUND_LIMIT` shown."""
    if not found:
        return _private(none)
    service = memories_service(ctx.services)
    everything = await service.all(ctx.owner, limit=MAX_LISTED)
    shown = list(enumerate(found[:FOUND_LIMIT], 1))
    trailer = []
    if len(found) > FOUND_LIMIT:
        trailer.append(tr("memories_more", ctx.language, shown=FOUND_LIMIT))
    return _listing(header, shown, everything, ctx.message.sent_at, ctx.language, trailer)


def _quoted(text: str) -> str:
    """A person's words repeated in a reply: one line, short."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."


async def _search(ctx: TurnContext, raw: str) -> Reply:
    language = ctx.language
    if len(raw) > MAX_QUERY_CHARS:
        raise UsageError(tr("memories_search_too_long", language, max=MAX_QUERY_CHARS))
    words = [w for w in raw.split() if not w.startswith("#")]
    try:
        tags = normalise_tags(w for w in raw.split() if w.startswith("#"))
    except MemoryValidationError:
        raise UsageError(
            f"{tr('memories_bad_tag', language, tags=MAX_TAGS, tag=MAX_TAG_CHARS)}\n"
            f"{tr('memories_usage', language)}"
        ) from None
    query = " ".join(words)
    if not query_words(query) and not tags:
        raise UsageError(tr("memories_usage", language))
    service = memories_service(ctx.services)
    # Expired ones too, marked: this is the person's own view, as the pages are.
    found = await service.search(ctx.owner, query, tags=tags, limit=FOUND_LIMIT + 1)
    if not found and tags:
        found = await _search_folded_tags(service, ctx.owner, query, tags)
    shown_query = _quoted(" ".join([*words, *(f"#{t}" for t in tags)]))
    header = tr("memories_search_header", language, query=shown_query, count=len(found))
    if len(found) > FOUND_LIMIT:
        header = tr("memories_search_header_many", language, query=shown_query)
    return await _found(ctx, header, found, tr("memories_search_none", language, query=shown_query))


async def _search_folded_tags(
    service: StructuredMemories, owner: str, query: str, tags: Sequence[str]
) -> list[StructuredMemory]:
    """Tags are stored as typed ("férias"); "#ferias" finds them too. The full-text
    search (accents folded, tags indexed) finds the candidates; each must carry every
    tag asked for, accents aside."""
    wanted = {fold(tag) for tag in tags}
    candidates = await service.search(owner, " ".join([query, *tags]), limit=MAX_LISTED)
    return [m for m in candidates if wanted <= {fold(tag) for tag in m.tags}][: FOUND_LIMIT + 1]


async def _expiring(ctx: TurnContext, raw: str) -> Reply:
    language = ctx.language
    days = EXPIRING_DAYS
    if raw:
        if not (_number(raw) and len(raw) <= 3 and 1 <= int(raw) <= MAX_EXPIRING_DAYS):
            raise UsageError(tr("memories_expiring_usage", language, max=MAX_EXPIRING_DAYS))
        days = int(raw)
    service = memories_service(ctx.services)
    found = await service.expiring(ctx.owner, within_days=days, at=ctx.message.sent_at)
    header = tr("memories_expiring_header", language, days=days, count=len(found))
    return await _found(ctx, header, found, tr("memories_expiring_none", language, days=days))


async def _one_memory(ctx: TurnContext, ref: str, usage: str) -> StructuredMemory | Reply:
    """The person's memory ``ref`` names (an id as /memories shows it), or the reply
    saying why there is none."""
    if not ref or len(ref) > 40 or len(ref.split()) != 1:
        raise UsageError(usage)
    found = await memories_service(ctx.services).by_short_id(ctx.owner, ref)
    if not found:
        return _private(tr("memories_id_not_found", ctx.language, id=_quoted(ref)))
    if len(found) > 1:
        ids = short_ids(await memories_service(ctx.services).all(ctx.owner))
        choices = ", ".join(ids.get(m.id, m.id) for m in found[:10])
        return _private(tr("memories_id_ambiguous", ctx.language, id=ref, choices=choices))
    return found[0]


async def _confirm(ctx: TurnContext, raw: str) -> Reply:
    """The person verifies a memory of theirs (the bot's proposal): verified by them,
    confidence 1.0, its source still ``agent``; the unverified version is kept."""
    language = ctx.language
    memory = await _one_memory(ctx, raw, tr("memories_confirm_usage", language))
    if isinstance(memory, Reply):
        return memory
    names = {"category": memory.category.value, "key": memory.key}
    if memory.verified:
        return _private(tr("memories_already_verified", language, **names))
    await memories_service(ctx.services).verify(
        ctx.owner, memory.id, verified_by=ctx.owner, at=ctx.message.sent_at
    )
    return _private(tr("memories_confirmed", language, **names))


async def _edit(ctx: TurnContext, raw: str) -> Reply:
    """``edit <id> [new content] [#tags] [!priority] [until <date> | for N days | no
    expiry]``: a new version stated by the person (verified); the earlier one is kept."""
    language = ctx.language
    usage = tr("memories_edit_usage", language)
    ref, *more = raw.split(maxsplit=1) or [""]
    try:
        text, options = split_options(more[0] if more else "", ctx.message.sent_at)
    except MemoryOptionError as error:
        raise _options_error(error, language, usage) from None
    if not ref or (not text and not options.given):
        raise UsageError(usage)
    memory = await _one_memory(ctx, ref, usage)
    if isinstance(memory, Reply):
        return memory
    content: str | None = None
    tags: list[str] = []
    if text:
        content, tags = content_and_tags(text)
        if not _TRAILING_TAGS.sub("", f" {text}").strip():
            content = None  # only #tags: new tags, the same content
    try:
        updated = await memories_service(ctx.services).update(
            ctx.owner,
            memory.id,
            content=content,
            tags=tags or None,
            priority=options.priority,
            expires_at=options.expires_at,
            clear_expiry=options.clear_expiry,
            at=ctx.message.sent_at,
        )
    except MemoryValidationError:
        raise UsageError(f"{_limits(language)}\n{usage}") from None
    if updated is None:  # forgotten meanwhile
        return _private(tr("memories_id_not_found", language, id=_quoted(ref)))
    names = {"category": updated.category.value, "key": updated.key}
    if updated.version == memory.version:
        return _private(tr("memories_edit_unchanged", language, **names))
    said = tr("memories_edited", language, **names)
    return _private(said + _describe_options(updated, options, language))


async def forget(ctx: TurnContext, args: str) -> CommandResult:
    ref = args.strip()
    if not ref or len(ref) > 2 * MAX_KEY_CHARS + 1 or len(ref.split()) > MAX_KEY_WORDS:
        raise UsageError(tr("forget_usage", ctx.language))
    service = memories_service(ctx.services)
    try:
        found = await service.find(ctx.owner, ref)
    except MemoryValidationError:
        raise UsageError(tr("forget_usage", ctx.language)) from None
    if not found:
        return _private(tr("forget_not_found", ctx.language))
    if len(found) > 1:
        choices = ", ".join(f"{m.category.value}/{m.key}" for m in found)
        return _private(tr("forget_ambiguous", ctx.language, choices=choices))
    memory = found[0]
    await service.delete(ctx.owner, memory.id)
    return _private(tr("forget_done", ctx.language, category=memory.category.value, key=memory.key))
