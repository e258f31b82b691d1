"""``akira-bot memory ...``: look into, export and erase what AKIRA remembers."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from akira_bot.settings import Settings
from core.engine import Engine
from core.llm import ScriptedProvider
from core.types import parse_user_key


class _UserArg:
    """argparse type for USER: ``platform:id``."""

    def __call__(self, value: str) -> str:
        try:
            parse_user_key(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value


USER = _UserArg()


def _positive_int(value: str) -> int:
    """argparse type for counts such as --limit: a whole number of at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


@asynccontextmanager
async def open_engine(settings: Settings) -> AsyncIterator[Engine]:
    """The engine without a language model: memory tools never generate text."""
    from akira_bot.app import build_engine

    engine = build_engine(settings, llm=ScriptedProvider())
    async with engine:
        yield engine


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


async def cmd_search(settings: Settings, args: argparse.Namespace) -> int:
    """Hybrid search over USER's memory graph: vector + full-text seeds, then connections."""
    async with open_engine(settings) as engine:
        recall = await engine.services.memory.recall(
            args.user, args.query, scopes=None, limit=args.limit
        )
        graph = engine.storage.graph
        # The design's MemoryNode carries its connections: their count here (edges in
        # either direction); `memory export` lists them in full.
        connections = [len(await graph.edges(args.user, [i.node.id])) for i in recall.nodes]
    results = [
        {
            "id": item.node.id,
            "owner": item.node.owner,
            "timestamp": item.node.timestamp.isoformat(),
            "type": item.node.type.value,
            "content": item.node.content,
            "tags": item.node.tags,
            "emotion": item.node.emotion,
            "emotion_score": item.node.emotion_score,
            "connections": linked,
            "score": round(item.score, 4),
            "reason": item.reason,
            "depth": item.depth,
            "chat_id": item.node.chat_id,
            "scope": item.node.scope,
        }
        for item, linked in zip(recall.nodes, connections, strict=True)
    ]
    if args.json:
        _print_json({"user": args.user, "query": args.query, "results": results})
        return 0
    if not results:
        print(f"no memories of {args.user} found for {args.query!r}")
        return 0
    print(f"memories of {args.user} for {args.query!r}:")
    for i, item in enumerate(recall.nodes, 1):
        found = item.node
        who = "AKIRA" if found.type.value == "akira_response" else "user"
        when = found.timestamp.isoformat()[:16].replace("T", " ")
        print(f"{i:>2}. [{when} UTC] {who}: {found.content}")
        feeling = f"; emotion: {found.emotion}" if found.emotion else ""
        print(
            f"    score {item.score:.3f}, {item.reason}; tags: {', '.join(found.tags) or '-'}"
            f"{feeling}"
        )
    return 0


async def cmd_recall(settings: Settings, args: argparse.Namespace) -> int:
    """USER's structured memories as the recall text the prompt gets (expired ones left
    out as of ``--at``, default now)."""
    from datetime import UTC, datetime

    from core.memory.structured import StructuredMemories, render_recall

    at = datetime.now(UTC) if args.at is None else args.at
    async with open_engine(settings) as engine:
        memories = StructuredMemories(engine.storage.memories)
        active = await memories.active(args.user, at=at)
    if args.json:
        _print_json(
            {"user": args.user, "at": at.isoformat(), "memories": [m.to_dict() for m in active]}
        )
    else:
        print(render_recall(active))
    return 0


def _when(value: str) -> Any:
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO date/time, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


async def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    async with open_engine(settings) as engine:
        data = await engine.storage.export_owner(args.user)
    _print_json(data)
    return 0


async def cmd_forget(settings: Settings, args: argparse.Namespace) -> int:
    async with open_engine(settings) as engine:
        removed = await engine.storage.forget_owner(args.user)
    total = sum(removed.values())
    details = ", ".join(f"{k}: {v}" for k, v in removed.items())
    print(f"forgot {args.user}: {total} record(s) removed ({details})")
    return 0


async def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    import sys

    from akira_bot.errors import CLIError
    from akira_bot.history_import import ImportFormatError, import_history

    path = Path(args.file)
    progress_bar: Any = None
    task: Any = None
    if sys.stderr.isatty():
        from rich.progress import Progress

        progress_bar = Progress(transient=True)
        task = progress_bar.add_task("importing", total=None)
        progress_bar.start()

    def report(done: int, total: int) -> None:
        if progress_bar is not None:
            progress_bar.update(task, completed=done, total=total)

    try:
        async with open_engine(settings) as engine:
            summary = await import_history(
                engine.services,
                path,
                fmt=args.format,
                default_user=args.user,
                own_ids=settings.bot.own_ids,
                dry_run=args.dry_run,
                progress=report,
            )
    except ImportFormatError as exc:
        raise CLIError(str(exc)) from None
    finally:
        if progress_bar is not None:
            progress_bar.stop()
    for error in summary.errors[:50]:
        print(f"skipped {error.reason}", file=sys.stderr)
    if len(summary.errors) > 50:
        print(f"... and {len(summary.errors) - 50} more invalid messages", file=sys.stderr)
    if args.json:
        _print_json(summary.as_dict())
        return 0
    verb = "would import" if summary.dry_run else "imported"
    print(
        f"{verb} {summary.imported}, skipped as duplicate {summary.duplicates}, "
        f"skipped as invalid {summary.invalid}, service messages {summary.skipped_service}"
    )
    for user, count in sorted(summary.per_user.items()):
        print(f"  {user}: {count}")
    return 0


def add_parser(sub: Any) -> None:
    memory = sub.add_parser(
        "memory",
        help="search, recall, export, forget or import what AKIRA remembers",
        description="Memory tools. USER is platform:id, e.g. telegram:42 or console:alice.",
    )
    msub = memory.add_subparsers(dest="memory_command", metavar="ACTION")

    search = msub.add_parser(
        "search",
        help="search a person's memory graph",
        description="Search USER's memory (vector + full-text seeds, then connections).",
    )
    search.add_argument("user", type=USER, metavar="USER", help="platform:id")
    search.add_argument("query", help="what to look for")
    search.add_argument(
        "--limit", type=_positive_int, default=10, help="how many results (default 10)"
    )
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(handler=cmd_search)

    recall = msub.add_parser(
        "recall",
        help="print a person's structured memories as the prompt sees them",
        description="Print USER's structured memories (recall text: critical first, then "
        "recent; expired ones left out but kept).",
    )
    recall.add_argument("user", type=USER, metavar="USER", help="platform:id")
    recall.add_argument("--at", type=_when, default=None, help="as of this ISO time (default now)")
    recall.add_argument("--json", action="store_true", help="print JSON")
    recall.set_defaults(handler=cmd_recall)

    export = msub.add_parser(
        "export",
        help="print everything stored about a person as JSON",
        description="Export USER's data as JSON.",
    )
    export.add_argument("user", type=USER, metavar="USER", help="platform:id")
    export.set_defaults(handler=cmd_export)

    forget = msub.add_parser(
        "forget",
        help="erase everything stored about a person",
        description="Erase USER's messages, graph, memories, profile and emotional history.",
    )
    forget.add_argument("user", type=USER, metavar="USER", help="platform:id")
    forget.set_defaults(handler=cmd_forget)

    from akira_bot.history_import import FORMATS

    importer = msub.add_parser(
        "import",
        help="import chat history (Telegram/Discord exports, JSONL) into memory",
        description="Import chat history into memory, in time order, without calling the LLM. "
        "Formats: jsonl (one message per line: user, text, timestamp, chat, kind, reply_to, id), "
        "telegram (Telegram Desktop's JSON export), discord (DiscordChatExporter JSON). "
        "Importing the same file twice adds nothing.",
    )
    importer.add_argument("file", help="the export file")
    importer.add_argument(
        "--format", choices=FORMATS, default="auto", help="file format (default: auto)"
    )
    importer.add_argument(
        "--user", type=USER, metavar="USER", help="platform:id for messages that name no user"
    )
    importer.add_argument("--dry-run", action="store_true", help="read and validate, store nothing")
    importer.add_argument("--json", action="store_true", help="print the summary as JSON")
    importer.set_defaults(handler=cmd_import)
