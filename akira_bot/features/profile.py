"""Built-in plugin ``profile``: what AKIRA learns about each person (core.profile).

- learns from every message the person writes (a stage after ``persist``: the message's
  tags are the memory graph's) and from imports (``akira-bot memory import`` finds the
  learner among the services);
- the "About this person" prompt section: the style to mirror and the topics they care
  about. In a group chat the topics are left out unless private memories may be shared
  there (``AKIRA_MEMORY__SHARE_PRIVATE_IN_GROUPS``): they were learned from every chat;
- ``/profile``: the person's favourite topics, style and message counts, privately.

The counters live in storage (``storage.profiles``), which exports and erases them with
the rest of the person's data whether or not this plugin is on. Settings:
``AKIRA_PROFILE__HALF_LIFE_DAYS``, ``AKIRA_PROFILE__MAX_TOPICS``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from akira_bot.commands.profile import profile_text
from core.cleaner import ABOUT_SECTION_TITLE
from core.memory.graph import GraphMemory
from core.pipeline import CallNext, TurnContext
from core.profile import ProfileLearner, about_section
from core.stages.basic import allowed_scopes
from core.storage.records import MemoryNode
from core.types import Reply, ReplyKind

if TYPE_CHECKING:
    from akira_bot.plugins import PluginAPI

log = logging.getLogger(__name__)

ABOUT_ORDER = 30  # after the tone (10-20), before recalled memories (40)


def setup(api: PluginAPI) -> None:
    settings, services = api.settings, api.services
    memory = services.memory
    learner = ProfileLearner(
        services.storage.profiles,
        tagger=memory.tagger if isinstance(memory, GraphMemory) else None,
        half_life_days=settings.profile.half_life_days,
        max_topics=settings.profile.max_topics,
    )
    services.storage.profiles.half_life_days = settings.profile.half_life_days
    api.provide(learner)

    after = "persist" if "persist" in api.pipeline.names else None

    async def learn_from(node: MemoryNode) -> None:
        try:
            await learner.learn(node)
        except Exception:
            # The profile enriches the reply; it must never cost the person their answer.
            log.exception("profile learning failed for a message of %s", node.owner)

    @api.stage("profile_learn", after=after)
    async def learn(ctx: TurnContext, call_next: CallNext) -> None:
        if ctx.node is not None:
            # After the memory has tagged the message, which it may do off the
            # person's path (the topics come with its vector).
            await memory.then(ctx.owner, learn_from(ctx.node), "profile learning")
        await call_next()

    @api.prompt_section(ABOUT_SECTION_TITLE, order=ABOUT_ORDER)
    async def about(ctx: TurnContext) -> str | None:
        profile = await learner.profile(ctx.owner, at=ctx.message.sent_at)
        return about_section(profile, topics=allowed_scopes(ctx) is None)

    @api.command(
        "profile",
        "What I learned about you: topics and how you write",
        description_pt="O que aprendi sobre você: assuntos e jeito de escrever",
    )
    async def profile(ctx: TurnContext, args: str) -> Reply:
        learned = await learner.profile(ctx.owner, at=ctx.message.sent_at)
        index = await services.storage.profiles.node_index(ctx.owner)
        text = profile_text(learned, index, ctx.language, learner.topic_label)
        return Reply(text, ReplyKind.COMMAND, private=True)
