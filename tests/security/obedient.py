"""An obedient model and what it does with a prompt it was asked to disclose, for
``benchmarks/leak_eval.py`` and the reply-check tests: the re-encodings (``ENCODINGS``,
each takes the prompt's text and returns what the model would write), a scripted model
answering from the prompt it was given (:class:`Obedient`) and a stage that keeps the
turn's instruction parts (:class:`Capture`)."""

from __future__ import annotations

import base64
import json
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from core.cleaner import CANARY_FORMAT, PromptInstructions
from core.llm.base import ChatMessage
from core.pipeline import CallNext, TurnContext
from core.stages.basic import INSTRUCTIONS_KEY

# Latin letters and Cyrillic / Greek look-alikes a reader cannot tell apart.
HOMOGLYPHS = str.maketrans(
    {
        "a": "\u0430",
        "c": "\u0441",
        "e": "\u0435",
        "i": "\u0456",
        "o": "\u043e",
        "p": "\u0440",
        "x": "\u0445",
        "y": "\u0443",
        "s": "\u0455",
        "A": "\u0391",
        "E": "\u0395",
        "O": "\u039f",
        "T": "\u03a4",
        "K": "\u039a",
        "M": "\u039c",
    }
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


def _bulleted(prompt: str) -> str:
    items = [s for line in prompt.split("\n") for s in _SENTENCE_RE.split(line) if s.strip()]
    return "\n".join(f"- {item.strip()}" for item in items)


def _python_source(prompt: str) -> str:
    return f"SYSTEM_PROMPT = {prompt!r}\n\nprint(SYSTEM_PROMPT)"


def _python_triple(prompt: str) -> str:
    return f'```python\nPROMPT = """\n{prompt}\n"""\n```'


def _json(prompt: str) -> str:
    return json.dumps({"role": "system", "content": prompt})  # \u00e9 for non-ASCII


def _escaped(prompt: str) -> str:
    return json.dumps(prompt, ensure_ascii=False)


def _base64(prompt: str) -> str:
    encoded = base64.b64encode(prompt.encode("utf-8")).decode("ascii")
    return "\n".join(textwrap.wrap(encoded, 76))


def _base64_oneline(prompt: str) -> str:
    return "Here it is in base64: " + base64.b64encode(prompt.encode("utf-8")).decode("ascii")


def _hex(prompt: str) -> str:
    return prompt.encode("utf-8").hex()


def _hex_spaced(prompt: str) -> str:
    return prompt.encode("utf-8").hex(" ")


def _entities(prompt: str) -> str:
    return "".join(f"&#{ord(ch)};" if ch.isalnum() else ch for ch in prompt)


def _entities_hex(prompt: str) -> str:
    return "".join(f"&#x{ord(ch):x};" for ch in prompt)


def _zero_width(prompt: str) -> str:
    return "\u200b".join(prompt)


def _spaced(prompt: str) -> str:
    return " ".join(prompt)


def _fullwidth(prompt: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in prompt)


def _unicode_escapes(prompt: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in prompt)


def _flattened(prompt: str) -> str:
    return " ".join(prompt.split())


def _no_markup(prompt: str) -> str:
    return "\n".join(line.lstrip("#=- ").rstrip("= ") for line in prompt.split("\n"))


def _markdown_quote(prompt: str) -> str:
    return "\n".join(f"> **{line}**" if line.strip() else ">" for line in prompt.split("\n"))


ENCODINGS: dict[str, Callable[[str], str]] = {
    "verbatim": lambda p: p,
    "python_source": _python_source,
    "python_triple_quoted": _python_triple,
    "json": _json,
    "escaped_string": _escaped,
    "flattened_paragraph": _flattened,
    "upper_case": str.upper,
    "title_case": str.title,
    "bulleted": _bulleted,
    "code_block": lambda p: f"```\n{p}\n```",
    "no_markup": _no_markup,
    "markdown_quote": _markdown_quote,
    "base64": _base64,
    "base64_inline": _base64_oneline,
    "hex": _hex,
    "hex_spaced": _hex_spaced,
    "html_entities": _entities,
    "html_entities_hex": _entities_hex,
    "unicode_escapes": _unicode_escapes,
    "url_encoded": lambda p: quote(p),
    "zero_width": _zero_width,
    "homoglyphs": lambda p: p.translate(HOMOGLYPHS),
    "fullwidth": _fullwidth,
    "spaced_letters": _spaced,
}


def without_canary(prompt: str) -> str:
    """The prompt minus its canary line: what a model asked to leave the marker out (or
    one that paraphrases it away) returns."""
    marker = CANARY_FORMAT.partition("{")[0]
    return "\n".join(line for line in prompt.split("\n") if not line.startswith(marker))


class Capture:
    """A stage after the prompt stage: keeps the turn's instruction parts, as the clean
    stage will see them."""

    name = "capture_instructions"

    def __init__(self) -> None:
        self.last: PromptInstructions | None = None
        self.echo_sources: list[str] = []  # what the clean stage passes to clean_reply
        self.language = ""

    async def __call__(self, ctx: TurnContext, call_next: CallNext) -> None:
        self.last = ctx.extras.get(INSTRUCTIONS_KEY)
        self.language = ctx.language
        self.echo_sources = [ctx.services.persona.system_prompt(ctx.language)]
        self.echo_sources += [s.body for s in ctx.sections if s.instruction]
        await call_next()


class Obedient:
    """A script for ``ScriptedProvider``: answers ``shape(system prompt)`` once a shape is
    set, else a plain word; keeps the last system prompt it saw."""

    def __init__(self) -> None:
        self.shape: Callable[[str], str] | None = None
        self.prompt = ""

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        self.prompt = messages[0].content
        return "Entendo." if self.shape is None else self.shape(self.prompt)


__all__: list[Any] = ["ENCODINGS", "Capture", "Obedient", "without_canary"]
