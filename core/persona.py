"""The bot's persona, loaded from ``config/persona.toml`` (or a user's file)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    system: dict[str, str]  # language -> system prompt

    def system_prompt(self, language: str) -> str:
        text = (
            self.system.get(language) or self.system.get("pt") or next(iter(self.system.values()))
        )
        return text.replace("{name}", self.name)


def load_persona(path: Path | None = None) -> Persona:
    if path is None:
        raw = resources.files("config").joinpath("persona.toml").read_text(encoding="utf-8")
    else:
        raw = Path(path).read_text(encoding="utf-8")
    data = tomllib.loads(raw)
    system = {
        lang: str(section["system"]).strip()
        for lang, section in data.items()
        if isinstance(section, dict) and "system" in section
    }
    if not system:
        raise ValueError(
            f"persona file {path or 'config/persona.toml'} defines no [pt] or [en] system text"
        )
    return Persona(name=str(data.get("name", "AKIRA")), system=system)
