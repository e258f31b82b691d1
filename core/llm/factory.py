"""Build the configured provider, wrapped in a circuit breaker."""

from __future__ import annotations

from pathlib import Path

from core.llm.base import LLMProvider
from core.llm.config import PACKAGED_ALIASES, LLMConfig
from core.llm.resilience import CircuitBreaker, ResilientProvider
from core.llm.scripted import ScriptedProvider


def local_backend(config: LLMConfig) -> str:
    """``llama.cpp`` or ``transformers``: what runs the local model. With ``auto``, GGUF
    files (the packaged default, any ``.gguf`` path) go to llama.cpp, which reads them
    as they are; directories and hub ids to transformers. Decided from the name alone:
    nothing is imported or read here."""
    if config.local_backend != "auto":
        return config.local_backend
    model = (config.model or "").strip()
    if not model or model.lower() in PACKAGED_ALIASES or model.lower().endswith(".gguf"):
        return "llama.cpp"
    return "transformers"


def build_provider(config: LLMConfig, *, cache_dir: Path | None = None) -> LLMProvider:
    """The provider named by ``config.provider``.

    ``local`` and ``openai`` come wrapped in a :class:`ResilientProvider` (circuit breaker
    from ``breaker_failures``/``breaker_reset_s``); ``scripted`` is returned bare so tests
    can read its ``prompts``. ``cache_dir`` is where the local model's converted weights
    go when ``config.cache_dir`` is unset (the app passes ``<data_dir>/models``).
    Nothing is loaded or connected here: call ``await provider.start()``.
    """
    if config.provider == "scripted":
        return ScriptedProvider(config.script, model=config.resolved_model())

    inner: LLMProvider
    if config.provider == "openai":
        # Imported here so the scripted path does not pay for httpx.
        from core.llm.openai import OpenAICompatibleProvider

        inner = OpenAICompatibleProvider(
            base_url=config.resolved_base_url(),
            model=config.resolved_model(),
            api_key=config.api_key,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            backoff_base_s=config.backoff_base_s,
            backoff_max_s=config.backoff_max_s,
            max_retry_after_s=config.max_retry_after_s,
        )
    elif local_backend(config) == "llama.cpp":
        from core.llm.llamacpp import LlamaCppProvider

        inner = LlamaCppProvider(
            config.model,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            repetition_penalty=config.repetition_penalty,
            no_repeat_ngram_size=config.no_repeat_ngram_size,
            timeout_s=config.timeout_s,
            threads=config.local_threads,
        )
    else:
        from core.llm.local import LocalProvider

        inner = LocalProvider(
            config.model,
            cache_dir=config.cache_dir or cache_dir,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            repetition_penalty=config.repetition_penalty,
            no_repeat_ngram_size=config.no_repeat_ngram_size,
            timeout_s=config.timeout_s,
            threads=config.local_threads,
        )
    breaker = CircuitBreaker(config.breaker_failures, config.breaker_reset_s)
    return ResilientProvider(inner, breaker)
