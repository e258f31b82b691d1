"""LLMConfig validation and defaults, and build_provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from core.llm import (
    ChatMessage,
    LLMConfig,
    ResilientProvider,
    ScriptedProvider,
    build_provider,
)
from core.llm.llamacpp import LlamaCppProvider
from core.llm.local import LocalProvider
from core.llm.openai import OpenAICompatibleProvider
from tests.fakes.openai_server import FakeOpenAI, Reply


def test_defaults() -> None:
    config = LLMConfig()
    assert config.provider == "local"
    assert config.resolved_model() == "SmolLM2-135M-Instruct"
    assert LLMConfig(provider="openai", api_key=SecretStr("k")).resolved_model() == "gpt-4o-mini"
    assert LLMConfig(provider="openai", api_key=SecretStr("k")).resolved_base_url() == (
        "https://api.openai.com/v1"
    )
    assert (config.timeout_s, config.max_retries, config.max_tokens) == (60, 2, 512)
    assert (config.breaker_failures, config.breaker_reset_s) == (5, 30)


def test_blank_env_values_mean_unset_and_urls_are_normalised() -> None:
    config = LLMConfig.model_validate(
        {
            "provider": "openai",
            "base_url": "http://localhost:11434/v1/",
            "model": " ",
            "api_key": "",
        }
    )
    assert config.base_url == "http://localhost:11434/v1"
    assert config.model is None
    assert config.api_key is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_s", 0, "greater than 0"),
        ("max_retries", -1, "greater than or equal to 0"),
        ("max_tokens", 0, "greater than or equal to 1"),
        ("temperature", 3, "less than or equal to 2"),
        ("breaker_failures", 0, "greater than or equal to 1"),
        ("breaker_reset_s", -1, "greater than 0"),
        ("provider", "anthropic", "'local', 'openai' or 'scripted'"),
        ("base_url", "localhost:11434", "http\\(s\\) URL"),
        ("base_url", "http://h/v1/chat/completions", "drop the trailing"),
        ("base_url_typo", "x", "Extra inputs are not permitted"),
    ],
)
def test_invalid_values_have_clear_messages(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        LLMConfig.model_validate({"provider": "scripted", field: value})
    assert field in str(caught.value)


def test_official_openai_without_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="AKIRA_LLM__API_KEY"):
        LLMConfig(provider="openai")
    # A local server needs no key.
    assert LLMConfig(provider="openai", base_url="http://127.0.0.1:11434/v1").api_key is None


def test_key_hidden_in_repr_and_dump() -> None:
    config = LLMConfig(provider="openai", api_key=SecretStr("sk-very-secret"))
    assert "sk-very-secret" not in repr(config)
    assert "sk-very-secret" not in config.model_dump_json()


async def test_build_scripted_from_config() -> None:
    provider = build_provider(LLMConfig(provider="scripted", script=["um", "dois"]))
    assert isinstance(provider, ScriptedProvider)
    texts = [(await provider.generate([ChatMessage("user", "x")])).text for _ in range(3)]
    assert texts == ["um", "dois", "dois"]
    echo = build_provider(LLMConfig(provider="scripted"))
    assert (await echo.generate([ChatMessage("user", "olá")])).text == "Você disse: olá"


async def test_build_openai_talks_to_the_configured_server() -> None:
    async with FakeOpenAI() as fake:
        fake.queue(Reply("oi do servidor"))
        config = LLMConfig(
            provider="openai",
            base_url=fake.url,
            model="llama3",
            api_key=SecretStr("k"),
            timeout_s=5,
        )
        provider = build_provider(config)
        assert isinstance(provider, ResilientProvider)
        assert isinstance(provider.inner, OpenAICompatibleProvider)
        assert provider.breaker.failure_threshold == 5
        await provider.start()
        try:
            result = await provider.generate([ChatMessage("user", "oi")])
        finally:
            await provider.close()
        assert result.text == "oi do servidor"
        assert fake.requests[0].model == "llama3"
        assert fake.requests[0].authorization == "Bearer k"


def test_build_local_uses_cache_dir_fallback(tmp_path: Path) -> None:
    # transformers keeps its cache of converted weights; the default GGUF needs none.
    config = LLMConfig(local_threads=1, local_backend="transformers")
    provider = build_provider(config, cache_dir=tmp_path / "models")
    assert isinstance(provider, ResilientProvider)
    inner = provider.inner
    assert isinstance(inner, LocalProvider)
    assert inner.cache_dir == tmp_path / "models"
    assert inner.threads == 1
    assert not inner.loaded  # nothing loads before start()
    explicit = build_provider(
        LLMConfig(cache_dir=tmp_path / "mine", local_backend="transformers"),
        cache_dir=tmp_path / "x",
    )
    assert isinstance(explicit, ResilientProvider)
    assert isinstance(explicit.inner, LocalProvider)
    assert explicit.inner.cache_dir == tmp_path / "mine"


def test_local_backend_follows_the_model(tmp_path: Path) -> None:
    """GGUF files (the packaged default, any .gguf path) run on llama.cpp; directories and
    hub ids on transformers; AKIRA_LLM__LOCAL_BACKEND overrides."""
    gguf = tmp_path / "mine.GGUF"

    def inner(**config: object) -> object:
        provider = build_provider(LLMConfig(**config))  # type: ignore[arg-type]
        assert isinstance(provider, ResilientProvider)
        return provider.inner

    for model in (None, "SmolLM2-135M-Instruct", "smollm2", str(gguf)):
        built = inner(model=model, local_threads=1)
        assert isinstance(built, LlamaCppProvider), model
        assert not built.loaded and built.threads == 1
    assert isinstance(inner(model=str(tmp_path)), LocalProvider)
    assert isinstance(inner(model="HuggingFaceTB/SmolLM2-360M-Instruct"), LocalProvider)
    assert isinstance(inner(local_backend="transformers"), LocalProvider)
    assert isinstance(inner(model=str(tmp_path), local_backend="llama.cpp"), LlamaCppProvider)


def test_env_contract_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app nests LLMConfig as ``llm`` under the AKIRA_ prefix; the env names are a
    stable contract."""
    from pydantic import Field
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class AppSettings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="AKIRA_", env_nested_delimiter="__")
        llm: LLMConfig = Field(default_factory=LLMConfig)

    monkeypatch.setenv("AKIRA_LLM__PROVIDER", "openai")
    monkeypatch.setenv("AKIRA_LLM__BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("AKIRA_LLM__MODEL", "qwen2.5:7b")
    monkeypatch.setenv("AKIRA_LLM__API_KEY", "sk-env")
    monkeypatch.setenv("AKIRA_LLM__SCRIPT", '["a", "b"]')
    monkeypatch.setenv("AKIRA_LLM__TIMEOUT_S", "12.5")
    llm = AppSettings().llm
    assert llm.provider == "openai"
    assert llm.resolved_base_url() == "http://127.0.0.1:8080/v1"
    assert llm.resolved_model() == "qwen2.5:7b"
    assert llm.api_key is not None and llm.api_key.get_secret_value() == "sk-env"
    assert llm.script == ["a", "b"]
    assert llm.timeout_s == 12.5

    monkeypatch.setenv("AKIRA_LLM__BASEURL", "http://typo/v1")
    with pytest.raises(ValidationError, match="baseurl"):
        AppSettings()
