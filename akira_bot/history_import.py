"""Import chat history into memory: Telegram Desktop and Discord exports, plain JSONL.

Every message goes through the same storage path as a live one (node, embedding, tags,
connections, emotion) with its own timestamp, in time order, in batches. No LLM is called.
Importing the same file twice adds nothing: each message has a source id (the platform's
message id, or a hash of user, time and text).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from core.cleaner import fix_unicode
from core.profile import ProfileLearner
from core.services import Services
from core.stages.basic import new_node_id
from core.storage.records import MemoryNode, NodeType
from core.types import ChatKind, parse_user_key

log = logging.getLogger(__name__)

Format = Literal["auto", "jsonl", "telegram", "discord"]
FORMATS: tuple[str, ...] = ("auto", "jsonl", "telegram", "discord")
MAX_TEXT = 100_000  # a single imported message longer than this is cut, not rejected


class ImportFormatError(ValueError):
    """The file as a whole cannot be read in the requested format."""


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """One message read from an export, before it becomes a node."""

    number: int  # line (JSONL) or message index (exports), 1-based, for error reports
    platform: str
    author_id: str
    text: str
    sent_at: datetime
    chat_id: str
    kind: ChatKind
    scope: str | None = None
    message_id: str | None = None
    reply_to: str | None = None
    author_is_bot: bool = False

    def __post_init__(self) -> None:
        # A JSON escape such as "\udcff" decodes to a lone surrogate, which SQLite and the
        # models refuse: it becomes U+FFFD, so one such line cannot stop the import.
        for name in ("platform", "author_id", "text", "chat_id", "scope", "message_id", "reply_to"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, fix_unicode(value))

    @property
    def author_key(self) -> str:
        return f"{self.platform}:{self.author_id}"

    def source_id(self) -> str:
        if self.message_id:
            # Same shape as live messages, so a message seen live is not imported again.
            return f"{self.platform}:{self.chat_id}:{self.message_id}"
        digest = hashlib.sha256(
            f"{self.author_key}\x1f{self.sent_at.isoformat()}\x1f{self.text}".encode()
        ).hexdigest()[:32]
        return f"import:{digest}"


@dataclass(frozen=True, slots=True)
class InvalidMessage:
    number: int
    reason: str


Parsed = HistoryMessage | InvalidMessage


@dataclass
class ImportSummary:
    imported: int = 0
    duplicates: int = 0
    invalid: int = 0
    skipped_service: int = 0
    per_user: Counter[str] = field(default_factory=Counter)
    errors: list[InvalidMessage] = field(default_factory=list)
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "skipped_duplicate": self.duplicates,
            "skipped_invalid": self.invalid,
            "skipped_service": self.skipped_service,
            "per_user": dict(sorted(self.per_user.items())),
            "dry_run": self.dry_run,
        }


# --- parsing --------------------------------------------------------------------------


def parse_time(value: Any) -> datetime:
    """ISO 8601 (with Z or an offset; naive = UTC) or Unix seconds."""
    if isinstance(value, int | float) or (isinstance(value, str) and value.strip().isdigit()):
        return datetime.fromtimestamp(float(value), tz=UTC)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing timestamp")
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _clean_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("text is not a string")
    return value.replace("\x00", "")[:MAX_TEXT]


def parse_jsonl(path: Path, default_user: str | None) -> Iterator[Parsed]:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("a line must be a JSON object")
                user = record.get("user") or default_user
                if not user:
                    raise ValueError("no user (give one in the line or with --user)")
                platform, author = parse_user_key(str(user))
                text = _clean_text(record.get("text"))
                if not text.strip():
                    raise ValueError("empty text")
                kind = ChatKind(record.get("kind", "dm"))
                chat = str(record.get("chat") or f"import-{platform}-{author}")
                yield HistoryMessage(
                    number=number,
                    platform=platform,
                    author_id=author,
                    text=text,
                    sent_at=parse_time(record.get("timestamp")),
                    chat_id=chat,
                    kind=kind,
                    scope=None
                    if kind is ChatKind.DM
                    else str(record.get("scope") or f"chat:{chat}"),
                    message_id=str(record["id"]) if record.get("id") is not None else None,
                    reply_to=str(record["reply_to"])
                    if record.get("reply_to") is not None
                    else None,
                    author_is_bot=bool(record.get("bot", False)),
                )
            except (ValueError, KeyError, TypeError) as exc:
                yield InvalidMessage(number, f"line {number}: {exc}")


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ImportFormatError(f"{path}: expected a JSON object with a 'messages' list")
    return data


def _telegram_text(value: Any) -> str:
    """Telegram Desktop writes text as a string or a list of strings and entities."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in value
            if isinstance(p, str | dict)
        )
    raise ValueError("text is neither a string nor a list of entities")


def parse_telegram(path: Path, default_user: str | None) -> Iterator[Parsed]:
    data = _load_json(path)
    chat_type = str(data.get("type", "personal_chat"))
    kind = (
        ChatKind.DM
        if chat_type in ("personal_chat", "bot_chat", "saved_messages")
        else ChatKind.GROUP
    )
    chat_id = str(data.get("id", "export"))
    for number, raw in enumerate(data["messages"], 1):
        try:
            if not isinstance(raw, dict):
                raise ValueError("a message must be a JSON object")
            if raw.get("type", "message") != "message":
                yield InvalidMessage(number, "service")
                continue
            from_id = str(raw.get("from_id", ""))
            if from_id.startswith("user") and from_id[4:].isdigit():
                author = from_id[4:]
            elif default_user:
                author = parse_user_key(default_user)[1]
            else:
                raise ValueError(f"author {from_id or '(none)'} is not a user")
            text = _clean_text(_telegram_text(raw.get("text", "")))
            if not text.strip():
                raise ValueError("no text (media without caption?)")
            when = raw.get("date_unixtime") or raw.get("date")
            yield HistoryMessage(
                number=number,
                platform="telegram",
                author_id=author,
                text=text,
                sent_at=parse_time(when),
                chat_id=chat_id,
                kind=kind,
                scope=None if kind is ChatKind.DM else chat_id,
                message_id=str(raw["id"]) if raw.get("id") is not None else None,
                reply_to=str(raw["reply_to_message_id"])
                if raw.get("reply_to_message_id")
                else None,
            )
        except (ValueError, KeyError, TypeError) as exc:
            yield InvalidMessage(number, f"message {number}: {exc}")


_DISCORD_DM_TYPES = {"DirectTextChat", "DirectGroupTextChat", "DM", "GroupDM"}


def parse_discord(path: Path, default_user: str | None) -> Iterator[Parsed]:
    data = _load_json(path)
    channel = data.get("channel") or {}
    guild = data.get("guild") or {}
    kind = ChatKind.DM if channel.get("type") in _DISCORD_DM_TYPES else ChatKind.GROUP
    chat_id = str(channel.get("id", "export"))
    scope = None if kind is ChatKind.DM else str(guild.get("id") or chat_id)
    for number, raw in enumerate(data["messages"], 1):
        try:
            if not isinstance(raw, dict):
                raise ValueError("a message must be a JSON object")
            if raw.get("type", "Default") not in ("Default", "Reply"):
                yield InvalidMessage(number, "service")
                continue
            author = raw.get("author") or {}
            author_id = str(author.get("id") or "")
            if not author_id:
                raise ValueError("no author id")
            text = _clean_text(raw.get("content", ""))
            if not text.strip():
                raise ValueError("no text (attachment or embed only?)")
            reference = raw.get("reference") or {}
            yield HistoryMessage(
                number=number,
                platform="discord",
                author_id=author_id,
                text=text,
                sent_at=parse_time(raw.get("timestamp")),
                chat_id=chat_id,
                kind=kind,
                scope=scope,
                message_id=str(raw["id"]) if raw.get("id") is not None else None,
                reply_to=str(reference["messageId"]) if reference.get("messageId") else None,
                author_is_bot=bool(author.get("isBot", False)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            yield InvalidMessage(number, f"message {number}: {exc}")


def detect_format(path: Path) -> str:
    """jsonl for .jsonl/.ndjson; for JSON, Discord has 'guild'/'channel', Telegram has
    'messages' with 'from_id'."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        head = handle.read(4096)
    stripped = head.lstrip()
    if stripped.startswith("{") and '"messages"' not in head and "\n{" in stripped:
        return "jsonl"
    if '"guild"' in head or '"channel"' in head:
        return "discord"
    if '"messages"' in head or '"from_id"' in head:
        return "telegram"
    if stripped.startswith("{"):
        return "jsonl"
    raise ImportFormatError(f"{path}: cannot tell the format; pass --format jsonl|telegram|discord")


PARSERS: dict[str, Callable[[Path, str | None], Iterator[Parsed]]] = {
    "jsonl": parse_jsonl,
    "telegram": parse_telegram,
    "discord": parse_discord,
}


def read_history(
    path: Path, fmt: str = "auto", default_user: str | None = None
) -> tuple[list[HistoryMessage], list[InvalidMessage]]:
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file")
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if default_user is not None:
        parse_user_key(default_user)
    chosen = detect_format(path) if fmt == "auto" else fmt
    messages: list[HistoryMessage] = []
    invalid: list[InvalidMessage] = []
    for item in PARSERS[chosen](path, default_user):
        if isinstance(item, HistoryMessage):
            messages.append(item)
        else:
            invalid.append(item)
    messages.sort(key=lambda m: (m.sent_at, m.number))  # time order, stable
    return messages, invalid


# --- turning messages into nodes ------------------------------------------------------


def to_nodes(
    messages: Sequence[HistoryMessage], own_ids: Sequence[str]
) -> tuple[list[MemoryNode], list[InvalidMessage]]:
    """Nodes in time order. The bot's own past replies become ``akira_response`` nodes of
    the person they answered (the author of the message replied to, else the last person
    who spoke in that chat)."""
    own = {i.strip() for i in own_ids}
    last_human: dict[str, str] = {}
    author_by_message: dict[tuple[str, str], str] = {}
    nodes: list[MemoryNode] = []
    invalid: list[InvalidMessage] = []
    for m in messages:
        is_ours = m.author_key in own or m.author_id in own
        if is_ours:
            owner = author_by_message.get((m.chat_id, m.reply_to or "")) or last_human.get(
                m.chat_id
            )
            if owner is None:
                invalid.append(
                    InvalidMessage(
                        m.number, f"message {m.number}: a bot reply with no person to attach it to"
                    )
                )
                continue
        elif m.author_is_bot:
            invalid.append(InvalidMessage(m.number, f"message {m.number}: written by another bot"))
            continue
        else:
            owner = m.author_key
            last_human[m.chat_id] = owner
        if m.message_id:
            author_by_message[(m.chat_id, m.message_id)] = owner
        nodes.append(
            MemoryNode(
                id=new_node_id(),
                owner=owner,
                content=m.text,
                type=NodeType.AKIRA_RESPONSE if is_ours else NodeType.USER_MESSAGE,
                timestamp=m.sent_at,
                chat_id=m.chat_id,
                chat_kind=m.kind.value,
                scope="dm" if m.kind is ChatKind.DM else (m.scope or f"chat:{m.chat_id}"),
                platform_message_id=m.message_id,
                reply_to=m.reply_to,
                source_id=m.source_id(),
            )
        )
    return nodes, invalid


# --- storing --------------------------------------------------------------------------

ProgressFn = Callable[[int, int], None]  # (done, total)


async def import_history(
    services: Services,
    path: Path,
    *,
    fmt: str = "auto",
    default_user: str | None = None,
    own_ids: Sequence[str] = (),
    dry_run: bool = False,
    batch_size: int = 256,
    progress: ProgressFn | None = None,
) -> ImportSummary:
    """Read ``path`` and store its messages through the memory's own store path."""
    messages, invalid = read_history(path, fmt, default_user)
    nodes, orphans = to_nodes(messages, own_ids)
    summary = ImportSummary(dry_run=dry_run)
    for item in [*invalid, *orphans]:
        if item.reason == "service":
            summary.skipped_service += 1
        else:
            summary.invalid += 1
            summary.errors.append(item)
    if dry_run:
        summary.imported = len(nodes)
        summary.per_user.update(n.owner for n in nodes)
        return summary
    tracker = services.emotion
    learner = services.get(ProfileLearner)
    first_seen: dict[str, datetime] = {}
    for node in nodes:  # time order: the first node of an owner is their earliest
        first_seen.setdefault(node.owner, node.timestamp)
    for owner, first in first_seen.items():
        await services.storage.users.ensure(owner, seen_at=first)
    for start in range(0, len(nodes), batch_size):
        chunk = nodes[start : start + batch_size]
        batch = await _not_yet_stored(services, chunk)
        summary.duplicates += len(chunk) - len(batch)
        user_nodes = [n for n in batch if n.type is NodeType.USER_MESSAGE]
        reading_by_id: dict[str, Any] = {}
        if tracker is not None and user_nodes:
            readings = await tracker.detect([n.content for n in user_nodes])
            for node, reading in zip(user_nodes, readings, strict=True):
                node.emotion, node.emotion_score = reading.label, reading.score
                reading_by_id[node.id] = reading
        stored = await services.memory.store_many(batch) if batch else []
        fresh_readings: dict[str, list[tuple[Any, datetime]]] = {}
        for node, was_stored in zip(batch, stored, strict=True):
            if not was_stored:
                summary.duplicates += 1
                continue
            summary.imported += 1
            summary.per_user[node.owner] += 1
            if node.id in reading_by_id:
                fresh_readings.setdefault(node.owner, []).append(
                    (reading_by_id[node.id], node.timestamp)
                )
        if tracker:
            for owner, items in fresh_readings.items():
                await tracker.update_many(owner, items, announce=True)
        if learner is not None:
            # The profile learns from imported messages as from live ones (their own times).
            await learner.learn_many(n for n, ok in zip(batch, stored, strict=True) if ok)
        if progress:
            progress(start + len(chunk), len(nodes))
    return summary


async def _not_yet_stored(services: Services, chunk: Sequence[MemoryNode]) -> list[MemoryNode]:
    """``chunk`` without the messages already stored (checked before any embedding work)."""
    by_owner: dict[str, list[str]] = {}
    for node in chunk:
        if node.source_id:
            by_owner.setdefault(node.owner, []).append(node.source_id)
    known: set[tuple[str, str | None]] = set()
    for owner, sources in by_owner.items():
        known.update((owner, s) for s in await services.storage.nodes.known_sources(owner, sources))
    return [n for n in chunk if (n.owner, n.source_id) not in known]
