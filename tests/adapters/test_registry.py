"""The adapter registry: the built-ins declared by their packages, a third-party adapter
found through the akira_bot.adapters entry-point group, its settings read from
AKIRA_<NAME>__*, its secrets redacted, and the app starting it when its settings say so."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from adapters.base import Adapter
from adapters.registry import AdapterSpec, registry
from akira_bot.app import build_adapters
from akira_bot.cli import configure_logging, secret_values
from akira_bot.settings import SettingsError, load_settings
from core.types import MessageHandler


class LoopbackConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = None
    room: str = "lobby"


class LoopbackAdapter(Adapter):
    name = "loopback"

    def __init__(self, handler: MessageHandler, config: LoopbackConfig) -> None:
        super().__init__(handler)
        self.config = config

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


LOOPBACK = AdapterSpec(
    name="loopback",
    settings_model=LoopbackConfig,
    factory=LoopbackAdapter,
    secrets=lambda config: (config.token,),
    noisy_loggers=("loopback.wire",),
)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution declaring the entry point, on sys.path (as pip would leave it)."""
    info = tmp_path / "site" / "akira_loopback-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: akira-loopback\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[akira_bot.adapters]\nloopback = tests.adapters.test_registry:LOOPBACK\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in list(__import__("os").environ):
        if name.startswith("AKIRA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AKIRA_DATA_DIR", str(tmp_path / "data"))
    registry.cache_clear()
    yield
    registry.cache_clear()


def test_the_builtin_adapters_are_registered_by_their_packages() -> None:
    specs = registry()
    assert list(specs)[:2] == ["telegram", "discord"]
    assert "telegram" in specs["telegram"].noisy_loggers
    settings = load_settings(telegram={"token": "123:abc"})
    assert [type(a).__name__ for a in build_adapters(settings, None)] == ["TelegramAdapter"]  # type: ignore[arg-type]


def test_a_third_party_adapter_from_an_entry_point(
    installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loaded by the entry point (pytest may have imported this file under another name).
    assert registry()["loopback"].noisy_loggers == LOOPBACK.noisy_loggers
    settings = load_settings()
    assert build_adapters(settings, None) == []  # type: ignore[arg-type]  # no token: off
    monkeypatch.setenv("AKIRA_LOOPBACK__TOKEN", "loop-secret-token")
    monkeypatch.setenv("AKIRA_LOOPBACK__ROOM", "kitchen")
    settings = load_settings()
    (adapter,) = build_adapters(settings, None)  # type: ignore[arg-type]
    assert type(adapter).__name__ == "LoopbackAdapter"
    assert adapter.config.room == "kitchen"  # type: ignore[attr-defined]
    assert "loop-secret-token" in secret_values(settings)
    configure_logging(settings)
    assert logging.getLogger("loopback.wire").level == logging.WARNING


def test_a_third_party_adapters_table_and_bad_values(
    installed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "akira.toml"
    toml.write_text('[loopback]\ntoken = "t0ken-in-file"\nroom = "attic"\n', encoding="utf-8")
    monkeypatch.setenv("AKIRA_CONFIG", str(toml))
    settings = load_settings()  # its table is not an unknown setting
    config = settings.adapter_settings("loopback")
    assert type(config).__name__ == "LoopbackConfig"
    assert config.room == "attic"  # type: ignore[attr-defined]
    monkeypatch.setenv("AKIRA_LOOPBACK__ROM", "typo")
    with pytest.raises(SettingsError, match="AKIRA_LOOPBACK__ROM: unknown setting"):
        load_settings().adapter_settings("loopback")
