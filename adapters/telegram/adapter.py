"""The Telegram bridge on python-telegram-bot's ``Application``.

Lifecycle: ``start()`` drives ``initialize`` (getMe), registers the commands, starts the
updater (long polling, or the webhook server with a secret) and ``Application.start`` by
hand instead of ``run_polling()``, because the app runs several adapters in one event loop.

Ordering: PTB hands updates to our single ``TypeHandler`` one at a time
(``concurrent_updates`` off) and that callback only converts the update and appends it to the
author's queue, so it returns at once. Each user has a worker that processes their messages
strictly in arrival order, while different users run concurrently. This does not rely on the
engine's own per-user ordering or on task scheduling order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

from telegram import (
    BotCommand,
    BotCommandScopeChat,
    BotCommandScopeDefault,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, InvalidToken, TelegramError
from telegram.ext import AIORateLimiter, Application, ContextTypes, TypeHandler

from adapters.base import Adapter, AdapterStartError, split_text
from adapters.telegram.config import TelegramConfig
from adapters.telegram.convert import (
    BotIdentity,
    is_group,
    is_private,
    is_reply_to_bot,
    reaction_to_incoming,
    to_incoming,
)
from core.types import (
    CommandSpec,
    IncomingMessage,
    IncomingReaction,
    MessageHandler,
    Reply,
    ReplyKind,
)

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096  # Telegram's maximum text length per message
_COMMAND_DESCRIPTION_LIMIT = 256
_FIRST_TYPING_TIMEOUT = 2.0  # seconds we may delay the work to show "typing" first

_NOTES = {
    "not_text": (
        "For now I can only read text messages.",
        "Por enquanto eu só consigo ler mensagens de texto.",
    ),
    "dm_failed": (
        "I could not send you that in private. Open a private chat with me, press Start, "
        "and ask again there.",
        "Não consegui te enviar isso no privado. Abra uma conversa comigo, toque em Iniciar "
        "e peça de novo por lá.",
    ),
}

Job = Callable[[], Awaitable[None]]


def note(key: str, locale: str | None) -> str:
    """Short adapter notices in English or Brazilian Portuguese (by the user's language)."""
    en, pt = _NOTES[key]
    return pt if (locale or "").lower().startswith("pt") else en


class _RedactTokens(logging.Filter):
    """PTB puts the token in every URL: httpx logs each request URL at INFO and PTB's bot
    logs its API URLs at DEBUG. Redact every token we were given from those records."""

    # Loggers (not their children: logger filters do not propagate) that see the URL.
    LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot")

    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = message
        for token in self.tokens:
            hidden = hidden.replace(token, "<token>")
        if hidden != message:
            record.msg = hidden
            record.args = ()
        return True


_redactor: _RedactTokens | None = None


class TelegramStartError(AdapterStartError):
    """The adapter could not connect (bad token, unreachable server...); never shows the
    token."""


def _redactor_text(text: str) -> str:
    for token in _redactor.tokens if _redactor else ():
        text = text.replace(token, "<token>")
    return text


def _redact_token(token: str) -> None:
    global _redactor
    if _redactor is None:
        _redactor = _RedactTokens()
    _redactor.tokens.add(token)


class TelegramResponder:
    """Answers one incoming message: plain-text chunks of at most 4096 characters (no
    parse_mode, so no Markdown can break), documents for attachments, and a repeated
    ``typing`` action while the engine works.

    A reply marked ``private`` in a group goes to the author's private chat. If Telegram
    refuses that (the user never started the bot), the group gets a short notice asking
    them to open a private chat — never the private content itself.
    """

    def __init__(
        self,
        app: Application,  # type: ignore[type-arg]
        config: TelegramConfig,
        *,
        chat_id: int,
        user_id: int,
        message_id: int,
        in_group: bool,
        locale: str | None,
    ) -> None:
        self._bot = app.bot
        self._config = config
        self.chat_id = chat_id
        self.user_id = user_id
        self.message_id = message_id
        self.in_group = in_group
        self.locale = locale

    async def send(self, reply: Reply) -> list[str] | None:
        """Deliver; the ids of the messages sent in the message's own chat (a private
        reply moved to the person's DM gives none: reactions are traced in the chat)."""
        reply_to = self._quote(reply)
        if reply.private and self.in_group and self._config.private_replies_in_dm:
            try:
                await self._deliver(self.user_id, reply, reply_to=None)
                return None
            except (Forbidden, BadRequest) as exc:
                log.info("telegram: private reply not deliverable in DM (%s)", type(exc).__name__)
                reply = Reply(text=note("dm_failed", self.locale), kind=reply.kind)
        try:
            return await self._deliver(self.chat_id, reply, reply_to=reply_to)
        except TelegramError as exc:
            # Delivery failures (user blocked the bot, chat gone, retries exhausted) are
            # logged; they must not break the engine's pipeline for this message.
            log.warning("telegram: reply not delivered to chat %s: %s", self.chat_id, exc)
            return None

    def _quote(self, reply: Reply) -> int | None:
        """Which message the answer quotes. In a group, always one (the engine's choice or
        the message being answered) so a busy chat can follow. In a private chat only an
        older message the engine points at: quoting every message in a DM is noise."""
        wanted = (
            int(reply.reply_to_id) if reply.reply_to_id and reply.reply_to_id.isdigit() else None
        )
        if self.in_group:
            return wanted or self.message_id
        return wanted if wanted != self.message_id else None

    async def _deliver(self, chat_id: int, reply: Reply, *, reply_to: int | None) -> list[str]:
        sent: list[str] = []
        for index, chunk in enumerate(split_text(reply.text, MESSAGE_LIMIT)):
            params = (
                ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
                if index == 0 and reply_to is not None
                else None
            )
            message = await self._bot.send_message(
                chat_id=chat_id, text=chunk, reply_parameters=params
            )
            sent.append(str(message.message_id))
        if reply.attachment is not None:
            await self._bot.send_document(
                chat_id=chat_id,
                document=reply.attachment.data,
                filename=reply.attachment.filename,
            )
        return sent

    def typing(self) -> AbstractAsyncContextManager[None]:
        return self._typing()

    @asynccontextmanager
    async def _typing(self) -> AsyncIterator[None]:
        # The first action is sent before the work starts (bounded), so even a fast answer
        # shows it; then it is repeated in the background while the engine works.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._send_typing(), _FIRST_TYPING_TIMEOUT)
        task = asyncio.create_task(self._typing_loop(), name=f"telegram-typing-{self.chat_id}")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _send_typing(self) -> None:
        try:
            await self._bot.send_chat_action(chat_id=self.chat_id, action=ChatAction.TYPING)
        except TelegramError as exc:  # cosmetic: never fail a reply over it
            log.debug("telegram: typing action failed: %s", exc)

    async def _typing_loop(self) -> None:
        # Telegram shows the action for ~5 s or until the next message, so repeat it.
        while True:
            await asyncio.sleep(self._config.typing_interval)
            await self._send_typing()


def _bot_commands(
    specs: Sequence[CommandSpec], *, admin: bool, portuguese: bool
) -> list[BotCommand]:
    commands = []
    for spec in specs:
        if spec.admin_only and not admin:
            continue
        text = (spec.description_pt if portuguese else "") or spec.description or spec.name
        if spec.args_hint:
            text = f"{text} {spec.args_hint}"
        commands.append(BotCommand(spec.name, text[:_COMMAND_DESCRIPTION_LIMIT]))
    return commands


class TelegramAdapter(Adapter):
    name = "telegram"

    def __init__(self, handler: MessageHandler, config: TelegramConfig) -> None:
        super().__init__(handler)
        if not config.enabled or config.token is None:
            raise ValueError("telegram: a bot token is required (AKIRA_TELEGRAM__TOKEN)")
        if config.mode == "webhook" and not config.webhook_url:
            raise ValueError(
                "telegram: webhook mode needs webhook_url (AKIRA_TELEGRAM__WEBHOOK_URL)"
            )
        self.config = config
        _redact_token(config.token.get_secret_value())  # before PTB logs its URLs
        self._app = self._build_application(config)
        self._bot_identity: BotIdentity | None = None
        self._queues: dict[int, deque[Job]] = {}
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._app.add_handler(TypeHandler(Update, self._on_update))
        self._app.add_error_handler(self._on_error)
        self._started = False

    def __repr__(self) -> str:  # PTB's own reprs contain the token: never show them
        return f"TelegramAdapter(mode={self.config.mode!r}, base_url={self.config.base_url!r})"

    @staticmethod
    def _build_application(config: TelegramConfig) -> Application:  # type: ignore[type-arg]
        assert config.token is not None
        builder = (
            Application.builder()
            .token(config.token.get_secret_value())
            # Retries after a 429 (RetryAfter) so a rate-limited reply is delayed, not lost.
            .rate_limiter(AIORateLimiter(max_retries=config.max_retries))
            # Our callback only enqueues per user (see module docstring).
            .concurrent_updates(False)
        )
        if config.base_url:
            builder = builder.base_url(config.base_url)
            file_url = config.resolved_base_file_url()
            if file_url:
                builder = builder.base_file_url(file_url)
        return builder.build()

    @property
    def application(self) -> Application:  # type: ignore[type-arg]
        return self._app

    @property
    def bot_identity(self) -> BotIdentity | None:
        return self._bot_identity

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._started

    async def start(self) -> None:
        if self._started:
            return
        try:
            await self._start()
        except InvalidToken:
            await self._teardown()
            # PTB's own message quotes the token: replace it, and drop the chain.
            raise TelegramStartError(
                "telegram: the Bot API server rejected the token (AKIRA_TELEGRAM__TOKEN)"
            ) from None
        except TelegramError as exc:
            await self._teardown()
            raise TelegramStartError(
                f"telegram: could not start: {_redactor_text(str(exc))}"
            ) from None
        except BaseException:
            await self._teardown()
            raise
        self._started = True

    async def _start(self) -> None:
        app = self._app
        await app.initialize()  # getMe
        me = app.bot
        self._bot_identity = BotIdentity(id=me.id, username=me.username)
        if self.config.register_commands:
            await self._register_commands()
        updater = app.updater
        assert updater is not None
        cfg = self.config
        # Reactions (feedback on replies) come only when asked for by name; in groups
        # Telegram sends them only to a bot that is an administrator there.
        allowed = [Update.MESSAGE, Update.EDITED_MESSAGE, Update.MESSAGE_REACTION]
        if cfg.mode == "webhook":
            secret = cfg.webhook_secret.get_secret_value() if cfg.webhook_secret else None
            await updater.start_webhook(
                listen=cfg.webhook_listen,
                port=cfg.webhook_port,
                url_path=cfg.webhook_path,
                webhook_url=cfg.webhook_url,
                secret_token=secret,
                allowed_updates=allowed,
                drop_pending_updates=cfg.drop_pending_updates,
            )
        else:
            await updater.start_polling(
                timeout=timedelta(seconds=cfg.poll_timeout),
                allowed_updates=allowed,
                drop_pending_updates=cfg.drop_pending_updates,
                error_callback=self._on_polling_error,
            )
        await app.start()
        log.info("telegram: @%s running (%s)", self._bot_identity.username, cfg.mode)

    async def stop(self) -> None:
        await self._teardown()

    async def _teardown(self) -> None:
        app = self._app
        try:
            if app.updater is not None and app.updater.running:
                await app.updater.stop()  # no new updates (releases the long poll)
            if app.running:
                await app.stop()
            await self._drain()
        finally:
            await app.shutdown()
            self._started = False

    async def _drain(self) -> None:
        """Let in-flight replies finish within ``stop_timeout``, then cancel the rest."""
        workers = list(self._workers.values())
        if not workers:
            return
        _done, pending = await asyncio.wait(workers, timeout=self.config.stop_timeout)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("telegram: %d reply task(s) cancelled on stop", len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    async def _register_commands(self) -> None:
        """Everyone sees the public commands; each admin's private chat also lists the
        admin-only ones (BotCommandScopeChat per admin id). Portuguese descriptions are
        registered for ``language_code=pt`` when the specs have them."""
        specs = list(self.handler.commands)
        if not specs:
            return
        bot = self._app.bot
        has_pt = any(s.description_pt for s in specs)
        languages = [(None, False)] + ([("pt", True)] if has_pt else [])
        try:
            for language, portuguese in languages:
                await bot.set_my_commands(
                    _bot_commands(specs, admin=False, portuguese=portuguese),
                    scope=BotCommandScopeDefault(),
                    language_code=language,
                )
                if any(s.admin_only for s in specs):
                    for admin_id in self.config.admin_ids:
                        await bot.set_my_commands(
                            _bot_commands(specs, admin=True, portuguese=portuguese),
                            scope=BotCommandScopeChat(chat_id=admin_id),
                            language_code=language,
                        )
        except TelegramError as exc:
            # The menu is a convenience; the bot still answers commands without it.
            log.warning("telegram: could not register commands: %s", exc)

    # ---- updates ---------------------------------------------------------------------

    async def _on_update(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Runs for every update, one at a time: classify, then queue per user. Never awaits
        the engine, so PTB keeps fetching while replies are generated."""
        if not isinstance(update, Update):
            return
        if update.message_reaction is not None:
            self._on_reaction(update)
            return
        message = update.message
        if message is None:
            # Edited messages, callback queries, channel posts...: ignored on purpose; an
            # edit would otherwise be answered twice.
            log.debug("telegram: ignoring update %s without a new message", update.update_id)
            return
        bot = self._bot_identity
        if bot is None or message.from_user is None:
            return
        incoming = to_incoming(
            message,
            bot=bot,
            admin_ids=self.config.admin_ids,
            group_reply=self.config.group_reply,
        )
        if incoming is not None:
            if incoming.addressed:
                self._enqueue(message.from_user.id, self._job(incoming, message))
            return
        if self._wants_media_note(message, bot):
            self._enqueue(message.from_user.id, self._media_note_job(message))

    def _on_reaction(self, update: Update) -> None:
        """A person's reactions changed: to the engine in their queue, after the
        messages of theirs already waiting (their reply may be in flight)."""
        changed = update.message_reaction
        assert changed is not None
        reaction = reaction_to_incoming(changed, admin_ids=self.config.admin_ids)
        if reaction is None or changed.user is None:
            return
        self._enqueue(changed.user.id, self._reaction_job(reaction))

    def _reaction_job(self, reaction: IncomingReaction) -> Job:
        async def run() -> None:
            await self.handler.handle_reaction(reaction)

        return run

    def _wants_media_note(self, message: Message, bot: BotIdentity) -> bool:
        """Stickers, photos, voice...: a short note when the bot was talked to, silence for
        service messages (joins, pins) and for other bots."""
        user = message.from_user
        if user is None or user.is_bot or message.effective_attachment is None:
            return False
        if is_private(message.chat):
            return True
        if not is_group(message.chat) or self.config.group_reply == "commands":
            return False
        if self.config.group_reply == "all" or is_reply_to_bot(message, bot):
            return True
        caption = message.caption or ""
        return f"@{bot.username}".lower() in caption.lower()

    def _responder(self, message: Message) -> TelegramResponder:
        assert message.from_user is not None
        return TelegramResponder(
            self._app,
            self.config,
            chat_id=message.chat.id,
            user_id=message.from_user.id,
            message_id=message.message_id,
            in_group=not is_private(message.chat),
            locale=message.from_user.language_code,
        )

    def _job(self, incoming: IncomingMessage, message: Message) -> Job:
        responder = self._responder(message)

        async def run() -> None:
            await self.handler.handle(incoming, responder)

        return run

    def _media_note_job(self, message: Message) -> Job:
        responder = self._responder(message)
        text = note("not_text", responder.locale)

        async def run() -> None:
            await responder.send(Reply(text=text, kind=ReplyKind.NOTICE))

        return run

    def _enqueue(self, user_id: int, job: Job) -> None:
        queue = self._queues.get(user_id)
        if queue is None:
            queue = self._queues[user_id] = deque()
            self._workers[user_id] = asyncio.create_task(
                self._work(user_id, queue), name=f"telegram-user-{user_id}"
            )
        queue.append(job)

    async def _work(self, user_id: int, queue: deque[Job]) -> None:
        try:
            while queue:
                job = queue.popleft()
                try:
                    await job()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("telegram: handling a message failed")
        finally:
            # No await between the emptiness check and removal: _enqueue cannot interleave.
            if self._queues.get(user_id) is queue:
                del self._queues[user_id]
                del self._workers[user_id]

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.warning("telegram: error while processing an update: %r", context.error)

    def _on_polling_error(self, error: TelegramError) -> None:
        log.warning("telegram: polling failed (%s), retrying", type(error).__name__)
