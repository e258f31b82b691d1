"""Telegram adapter settings.

This module must not import ``telegram``: the application's settings layer imports it to
build ``Settings.telegram`` even on installs without python-telegram-bot.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator


class TelegramConfig(BaseModel):
    """How the bot talks to the Telegram Bot API (env ``AKIRA_TELEGRAM__*``)."""

    # Typos such as AKIRA_TELEGRAM__TOKN must fail loudly instead of being ignored.
    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = None
    # Bot API base such as ``https://api.telegram.org/bot`` or ``http://127.0.0.1:8081/bot``;
    # python-telegram-bot appends the token. ``None`` means the official server.
    base_url: str | None = None
    # File download base; derived from ``base_url`` (``.../bot`` -> ``.../file/bot``) when unset.
    base_file_url: str | None = None
    admin_ids: list[int] = Field(default_factory=list)

    mode: Literal["polling", "webhook"] = "polling"
    poll_timeout: int = Field(default=10, ge=0)  # getUpdates long-poll timeout, seconds
    drop_pending_updates: bool = False

    # Webhook mode: Telegram POSTs to ``webhook_url``; PTB listens on listen:port/path.
    # Required in webhook mode when a token is set (checked below, naming the setting).
    webhook_url: str | None = Field(default=None, validate_default=True)
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=0, le=65535)  # 0 = pick a free port
    webhook_path: str = "telegram"
    webhook_secret: SecretStr | None = None

    # In groups: "addressed" = mentioned, replied to or commanded; "all" = every message;
    # "commands" = commands only. Private chats are always answered.
    group_reply: Literal["addressed", "all", "commands"] = "addressed"

    # Platform rate limits: retries after a 429 (RetryAfter) so no reply is lost.
    max_retries: int = Field(default=5, ge=0)
    typing_interval: float = Field(default=4.0, gt=0)  # Telegram shows "typing" for ~5 s
    # Replies marked private in a group go to the user's DM when possible.
    private_replies_in_dm: bool = True
    stop_timeout: float = Field(default=10.0, gt=0)  # bound for in-flight replies on stop()
    register_commands: bool = True

    @field_validator("base_url", "base_file_url", "webhook_url")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        return value

    @field_validator("webhook_url")
    @classmethod
    def _webhook_mode_needs_a_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # token and mode are declared (so validated) before webhook_url.
        token = info.data.get("token")
        enabled = token is not None and bool(token.get_secret_value())
        if enabled and info.data.get("mode") == "webhook" and not (value and value.strip()):
            raise ValueError(
                "webhook mode needs webhook_url, the public URL Telegram posts updates to"
            )
        return value

    @property
    def enabled(self) -> bool:
        return self.token is not None and bool(self.token.get_secret_value())

    def resolved_base_file_url(self) -> str | None:
        if self.base_file_url:
            return self.base_file_url
        if not self.base_url:
            return None
        # The Bot API layout: <root>/bot<token>/<method> and <root>/file/bot<token>/<path>.
        base = self.base_url.rstrip("/")
        head, sep, tail = base.rpartition("/")
        if sep and tail.startswith("bot"):  # ".../bot" or ".../bot{token}"
            return f"{head}/file/{tail}"
        return f"{base}/file/bot"
