"""Loading the emotional states table (``config/emotional_states.toml``)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from core.emotion.detector import EmotionError

_TAG = re.compile(r"^<![A-Z0-9_]+>$")


@dataclass(frozen=True)
class EmotionalStateConfig:
    """One state: its prompt tag, how long it is remembered and how to answer in it."""

    name: str
    tag: str
    memory_days: float
    instruction_pt: str
    instruction_en: str
    response_style: str

    def instruction(self, language: str) -> str:
        return self.instruction_pt if language.lower().startswith("pt") else self.instruction_en


def _read_default() -> str:
    # Package data, so it works from a wheel as well as from a checkout.
    return resources.files("config").joinpath("emotional_states.toml").read_text(encoding="utf-8")


def load_emotional_states(path: Path | None = None) -> dict[str, EmotionalStateConfig]:
    """Parse and validate the states file (the shipped default when ``path`` is None).

    Raises :class:`EmotionError` with the file and the state name on any problem.
    """
    where = str(path) if path else "config/emotional_states.toml (shipped)"
    try:
        text = path.read_text(encoding="utf-8") if path else _read_default()
        data = tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EmotionError(f"cannot read emotional states from {where}: {exc}") from exc
    table = data.get("states")
    if not isinstance(table, dict) or not table:
        raise EmotionError(f"{where}: expected [states.<name>] tables")
    states: dict[str, EmotionalStateConfig] = {}
    for name, raw in table.items():
        if not isinstance(raw, dict):
            raise EmotionError(f"{where}: states.{name} must be a table")
        try:
            tag = str(raw["tag"])
            memory_days = float(raw["memory_days"])
            instruction_pt = str(raw["instruction_pt"])
            instruction_en = str(raw["instruction_en"])
        except KeyError as exc:
            raise EmotionError(f"{where}: states.{name} is missing {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            raise EmotionError(f"{where}: states.{name}.memory_days must be a number") from exc
        if not _TAG.match(tag):
            raise EmotionError(f"{where}: states.{name}.tag {tag!r} must look like <!UPPER_CASE>")
        if memory_days < 0:
            raise EmotionError(f"{where}: states.{name}.memory_days must be >= 0")
        states[name] = EmotionalStateConfig(
            name=name,
            tag=tag,
            memory_days=memory_days,
            instruction_pt=instruction_pt,
            instruction_en=instruction_en,
            response_style=str(raw.get("response_style", "balanced")),
        )
    if "neutro" not in states:
        raise EmotionError(f"{where}: a 'neutro' state is required (the default tone)")
    return states
