"""The ``akira-bot`` command line (a stable contract, see DESIGN.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from adapters.base import AdapterStartError
from adapters.registry import registry
from akira_bot.errors import CLIError
from akira_bot.plugins import PluginError
from akira_bot.settings import CONFIG_ENV, Settings, SettingsError, load_settings
from core.cleaner import fix_unicode
from core.embeddings import EmbeddingError
from core.emotion import EmotionError
from core.llm import LLMError
from core.storage import StorageError

log = logging.getLogger("akira_bot")

EXIT_USAGE = 2


class RedactSecrets(logging.Filter):
    """Last line of defence: configured secrets never reach a log line."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            if any(s in message for s in self.secrets):
                for secret in self.secrets:
                    message = message.replace(secret, "***")
                record.msg, record.args = message, None
        return True


def secret_values(settings: Settings) -> list[str]:
    values = []
    for secret in (settings.llm.api_key, settings.storage.postgres_dsn, settings.http.jwt_secret):
        if secret is not None:
            values.append(secret.get_secret_value())
    values.extend(dsn_password(settings))
    for spec in registry().values():
        values.extend(spec.secret_values(settings.adapter_settings(spec.name)))
    return values


def dsn_password(settings: Settings) -> list[str]:
    """The password inside the PostgreSQL connection string, kept out of logs alone too."""
    from urllib.parse import urlsplit

    dsn = settings.storage.postgres_dsn
    if dsn is None:
        return []
    try:
        password = urlsplit(dsn.get_secret_value()).password
    except ValueError:
        return []
    return [password] if password else []


# Chatty at INFO whatever the platform: HTTP clients and the database driver.
NOISY_LOGGERS = ("httpx", "httpcore", "aiosqlite")


def configure_logging(settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log.format == "json":
        from akira_bot.logjson import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secret_values(settings)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    specs = registry().values()
    for noisy in (*NOISY_LOGGERS, *(name for spec in specs for name in spec.noisy_loggers)):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    for spec in specs:
        for logger_name, make_filter in spec.log_filters:
            logger = logging.getLogger(logger_name)
            kind = type(make_filter())
            if not any(isinstance(f, kind) for f in logger.filters):
                logger.addFilter(make_filter())


# --- commands -------------------------------------------------------------------------


def _run(coro: Coroutine[Any, Any, int | None]) -> int:
    return asyncio.run(coro) or 0


async def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.app import run_bot

    await run_bot(settings, console_user=args.user)
    return 0


async def cmd_chat(settings: Settings, args: argparse.Namespace, engine: Any = None) -> int:
    from adapters.console import ConsoleAdapter, ConsoleConfig
    from akira_bot.app import build_handler

    engine = engine or build_handler(settings)
    user = getattr(args, "user", None)
    config = ConsoleConfig(user=user) if user else ConsoleConfig()
    async with engine:
        await ConsoleAdapter(engine, config).start()
    return 0


async def cmd_emotion(settings: Settings, args: argparse.Namespace) -> int:
    from akira_bot.features.emotion import build_detector_from_settings

    text: str = args.text
    limit = settings.bot.max_input_chars
    if len(text) > limit:
        # The same bound as a chat message: a huge argument would cost minutes of model time.
        print(
            f"akira-bot: the text was cut to its first {limit} characters "
            "(AKIRA_BOT__MAX_INPUT_CHARS)",
            file=sys.stderr,
        )
        text = text[:limit]
    detector = build_detector_from_settings(settings)
    reading = await asyncio.to_thread(detector.detect, text)
    if args.json:
        print(json.dumps({"label": reading.label, "score": round(float(reading.score), 4)}))
    else:
        print(f"{reading.label} ({reading.score:.2f})")
    return 0


# --- parser ---------------------------------------------------------------------------

Handler = Callable[[Settings, argparse.Namespace], Coroutine[Any, Any, int | None]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akira-bot",
        description=(
            "AKIRA: a chat bot that remembers people. Settings come from AKIRA_* environment "
            "variables (nested with __, e.g. AKIRA_LLM__PROVIDER) and an optional TOML file."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"TOML settings file (default: ./akira.toml if present; env {CONFIG_ENV})",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="start every configured adapter (Telegram, Discord, HTTP); with none, the console",
        description="Start every adapter that has settings (AKIRA_TELEGRAM__TOKEN, AKIRA_DISCORD__TOKEN) "
        "and the HTTP API when AKIRA_HTTP__PORT is set. With none configured, chat in the "
        "console. SIGTERM/Ctrl-C shut down gracefully.",
    )
    run.add_argument("--user", help="console user name when the console is started")
    run.set_defaults(handler=cmd_run)

    chat = sub.add_parser(
        "chat",
        help="chat in the terminal (one reply per line when stdin is piped)",
        description="Chat with AKIRA in the terminal. Interactive on a terminal (Ctrl-D quits); "
        "with piped stdin, one reply line per input line. The user is console:NAME.",
    )
    chat.add_argument("--user", help="who you are (stored as console:NAME; default: your login)")
    chat.set_defaults(handler=cmd_chat)

    emotion = sub.add_parser(
        "emotion",
        help="detect the emotion of a text",
        description="Print the detected emotional state (agressivo, feliz, triste, confuso, neutro) and its score.",
    )
    emotion.add_argument("text", help="the text to classify")
    emotion.add_argument("--json", action="store_true", help='print {"label": ..., "score": ...}')
    emotion.set_defaults(handler=cmd_emotion)

    from akira_bot import cli_keys, cli_memory

    cli_memory.add_parser(sub)
    from akira_bot import cli_storage

    cli_storage.add_parser(sub)
    cli_keys.add_parser(sub)
    return parser


# File names are left as given: a name that is not UTF-8 is still a file one can open.
_PATH_ARGUMENTS = frozenset({"config", "file"})


def _fix_arguments(args: argparse.Namespace) -> None:
    """Arguments that were not valid UTF-8 arrive with lone surrogates (Python's
    surrogateescape): they become U+FFFD here, so no command fails on them later (SQLite
    and the models refuse surrogates)."""
    for name, value in vars(args).items():
        if isinstance(value, str) and name not in _PATH_ARGUMENTS:
            setattr(args, name, fix_unicode(value))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _fix_arguments(args)
    if args.config:
        os.environ[CONFIG_ENV] = args.config
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        if getattr(args, "command", None) is None:
            handler = cmd_chat  # bare `akira-bot`: chat, like `run` with nothing configured
        else:
            # `akira-bot memory` without an action: its help, and the usage error's code
            # (argparse's --help would exit 0).
            try:
                parser.parse_args([*(argv or sys.argv[1:]), "--help"])
            except SystemExit:
                pass
            return EXIT_USAGE
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"akira-bot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(settings)
    try:
        return _run(handler(settings, args))
    except CLIError as exc:
        print(f"akira-bot: {exc}", file=sys.stderr)
        return exc.code
    except (
        LLMError,
        EmbeddingError,
        EmotionError,
        StorageError,
        AdapterStartError,
        PluginError,
        SettingsError,
    ) as exc:
        # Expected failures (a model that cannot load, a database that cannot open) are
        # explained in one line; secrets were already kept out of these messages.
        print(f"akira-bot: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
