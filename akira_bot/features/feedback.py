"""Built-in plugin ``feedback``: a person's thumbs up / down on a bot reply is stored as
feedback on that turn (``storage.feedback``, core.storage.api.FeedbackStore).

Two halves:

- after each answer is stored, the platform ids of the messages that carried it
  (``ctx.extras["reply_message_ids"]``, what the responder returned) are linked to the
  reply node, per chat (Telegram numbers messages per chat);
- each reaction (``api.on_reaction``: Telegram ``message_reaction`` updates, Discord
  reaction events, made platform-free by the adapters) is looked up among the links *of
  the person who reacted*: a reaction to a message that is not the bot's, to an unknown
  or forgotten one, or to the reply another person got in a group finds nothing and is
  ignored (logged at debug level). Nothing is answered to a reaction.

Only 👍 and 👎 count (with any skin tone); every other emoji is ignored: a ❤️ or a 😂
says something, but not clearly "good answer" or "bad answer", and a guessed label would
make the ratio mean less. Up and down are kept apart, so removing one reaction removes
that rating alone. ``/mood`` corrections are the other kind of feedback; they live with
the ``/mood`` command (akira_bot.commands.mood), on the same store.
"""

from __future__ import annotations

import logging

from akira_bot.plugins import PluginAPI
from core.pipeline import CallNext, TurnContext
from core.services import Services
from core.stages.basic import REPLY_MESSAGE_IDS
from core.storage.feedback_records import Rating, ReplyRating
from core.storage.records import MemoryNode
from core.types import IncomingReaction

log = logging.getLogger(__name__)

THUMBS = {"👍": Rating.UP, "👎": Rating.DOWN}
# Skin-tone modifiers (Fitzpatrick 1-2 .. 6) and the emoji presentation selector: 👍🏽 is 👍.
_MODIFIERS = "".join(chr(c) for c in range(0x1F3FB, 0x1F400)) + "\ufe0f"


def rating_of(emoji: str) -> Rating | None:
    """👍 -> up, 👎 -> down (any skin tone); None for every other emoji."""
    return THUMBS.get(emoji.strip().rstrip(_MODIFIERS))


async def link_reply_messages(ctx: TurnContext, call_next: CallNext) -> None:
    """After ``remember``: the messages the answer went out as point at its node."""
    node = ctx.extras.get("reply_node")
    message_ids = ctx.extras.get(REPLY_MESSAGE_IDS)
    if isinstance(node, MemoryNode) and message_ids:
        try:
            await ctx.services.storage.feedback.link_replies(
                ctx.owner, ctx.message.chat.id, message_ids, node.id, ctx.message.sent_at
            )
        except Exception:  # the answer is out and stored; only its feedback link is lost
            log.exception("could not link the reply messages of %s", ctx.owner)
    await call_next()


async def record_reaction(reaction: IncomingReaction, services: Services) -> None:
    """Store the thumbs a person added to (or took from) a reply they got."""
    added = [(rating, emoji) for emoji in reaction.added if (rating := rating_of(emoji))]
    removed = [rating for emoji in reaction.removed if (rating := rating_of(emoji))]
    if not added and not removed:
        return  # other emoji: not feedback
    store = services.storage.feedback
    node_id = await store.reply_node(reaction.owner, reaction.chat.id, reaction.message_id)
    if node_id is None:
        log.debug(
            "reaction of %s to message %s in chat %s: not a reply they got; ignored",
            reaction.owner,
            reaction.message_id,
            reaction.chat.id,
        )
        return
    for rating in removed:
        await store.unrate(reaction.owner, node_id, rating)
    for rating, emoji in added:
        await store.rate(
            ReplyRating(
                owner=reaction.owner,
                node_id=node_id,
                rating=rating,
                chat_id=reaction.chat.id,
                message_id=reaction.message_id,
                emoji=emoji,
                at=reaction.sent_at,
            )
        )


def setup(api: PluginAPI) -> None:
    after = "remember" if "remember" in api.pipeline.names else None
    api.stage("feedback_links", after=after)(link_reply_messages)
    api.on_reaction(record_reaction)
