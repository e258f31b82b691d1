"""A plugin that adds a pipeline stage and a prompt section.

    AKIRA_BOT__PLUGINS='["examples.faq.faq"]' akira-bot chat

- the stage ``faq`` (after ``persist``: the question is still stored) answers the
  questions in ``ANSWERS`` itself, word for word, without asking the model;
- the prompt section "House rules" joins every prompt the model does get.
"""

from __future__ import annotations

import unicodedata

from akira_bot import PluginAPI, Reply, ReplyKind, TurnContext
from core.pipeline import CallNext

ANSWERS = {
    "what time do you open": "We open at 9:00 and close at 18:00, Monday to Saturday.",
    "que horas voces abrem": "Abrimos às 9h e fechamos às 18h, de segunda a sábado.",
}
HOUSE_RULES = "Be brief. Never promise discounts. The shop is called Loja Akira."


def normalise(text: str) -> str:
    """Lower case, no accents, no punctuation at the ends: "Que horas vocês abrem?"
    finds "que horas voces abrem"."""
    plain = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return " ".join(plain.strip(" ?!.").split())


async def faq_stage(ctx: TurnContext, call_next: CallNext) -> None:
    answer = ANSWERS.get(normalise(ctx.text))
    if answer is None:
        await call_next()  # not a known question: recall, prompt, the model...
        return
    await ctx.send(Reply(answer, ReplyKind.COMMAND))  # and stop the chain here


async def house_rules(ctx: TurnContext) -> str:
    return HOUSE_RULES


def setup(api: PluginAPI) -> None:
    api.stage("faq", after="persist")(faq_stage)
    api.prompt_section("House rules", order=10, instruction=True)(house_rules)
