"""Isolation at the pipeline level (the memory graph has its own storage-level property
test): random histories of several people across private chats and groups, through the
real engine. No prompt for person A ever holds person B's words, and a reply in a group
never holds what A said (or asked the bot to remember) in a private chat or another group.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.llm import ChatMessage
from core.types import ChatKind
from tests.conftest import ask, make_message

TOKEN = re.compile(r"tk(\d+)u([abc])c(dm|g1|g2)n(\d+)")
EVENT = st.tuples(
    st.sampled_from("abc"),  # who
    st.sampled_from(["dm", "g1", "g2"]),  # where
    st.sampled_from(["say", "say", "remember"]),  # what
)


def token_model(messages: Sequence[ChatMessage]) -> str:
    """A model that repeats every token it was shown (the worst case for a leak)."""
    seen = sorted({m.group(0) for msg in messages for m in TOKEN.finditer(msg.content)})
    return "lembro de: " + " ".join(seen) if seen else "ok"


_examples = count(1)


@pytest.fixture
def stack() -> dict[str, Any]:
    return {}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(events=st.lists(EVENT, min_size=2, max_size=12))
async def test_no_prompt_or_group_reply_crosses_people_or_privacy_scopes(
    engine_factory, stack: dict[str, Any], events: list[tuple[str, str, str]]
) -> None:
    if not stack:
        stack["engine"], stack["provider"] = await engine_factory(
            token_model, bot={"rate_limit_messages": 0}, memory={"extraction": False}
        )
    engine, provider = stack["engine"], stack["provider"]
    ex = next(_examples)  # fresh people per example, one long-lived bot
    for i, (who, where, what) in enumerate(events):
        token = f"tk{ex}u{who}c{where}n{i}"
        # The same words for everybody, so a search that ignored the owner would match.
        text = f"meu gato azul se chama {token}"
        if what == "remember":
            text = f"/remember gato{i}: gato azul {token}"
        kind = ChatKind.DM if where == "dm" else ChatKind.GROUP
        message = make_message(
            text, user=f"{ex}{who}", kind=kind, chat=None if where == "dm" else f"{ex}{where}"
        )
        prompts_before = len(provider.prompts)
        responder = await ask(engine, message)
        shown = [
            m
            for p in provider.prompts[prompts_before:]
            for msg in p
            for m in TOKEN.finditer(msg.content)
        ]
        replied = [m for text in responder.texts for m in TOKEN.finditer(text)]
        for m in [*shown, *replied]:
            t_ex, t_who, t_where = int(m.group(1)), m.group(2), m.group(3)
            assert (t_ex, t_who) == (ex, who), (events, i, m.group(0))  # another person
            if where != "dm":
                # In a group: only what this person said in this same group.
                assert t_where == where, (events, i, m.group(0))
