"""Learning a person's profile from their messages, live and imported.

For each message the person wrote (never the bot's replies): its topics (the memory
graph's tags that are taxonomy topics, ``config/topics.toml``), its other tags, and its
style sample are added to the person's counters, weighted by the message's own time
(:mod:`core.profile.decay`). The counters are storage's
(:class:`core.storage.api.ProfileStore`), added atomically, so an import beside the
running bot loses nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from core.cleaner.vocabulary import ABOUT_STYLE_FORMAT, ABOUT_TOPICS_FORMAT
from core.memory.tags import Tagger, content_words
from core.profile.decay import forward_weight
from core.profile.style import describe_traits, measure
from core.profile.summary import (
    LANGUAGE,
    MIN_TAG_MENTIONS,
    STYLE,
    TAG,
    TOPIC,
    PersonProfile,
    summarise,
)
from core.storage.api import ProfileStore
from core.storage.profile_records import ProfileCount
from core.storage.records import MemoryNode, NodeType


class ProfileLearner:
    """Adds what each message says to the person's counters and reads the profile back.

    ``tagger``: the memory graph's (its topic list); with the graph off, messages have no
    tags and their topics are found here by the taxonomy's keywords."""

    def __init__(
        self,
        store: ProfileStore,
        *,
        tagger: Tagger | None = None,
        half_life_days: float = 30.0,
        max_topics: int = 5,
    ) -> None:
        self.store = store
        self.tagger = tagger or Tagger()
        self.topics = frozenset(t.name for t in self.tagger.topics)
        self.half_life_days = half_life_days
        self.max_topics = max_topics

    def counts(self, node: MemoryNode) -> list[ProfileCount]:
        """What one message adds (nothing for the bot's own replies or empty texts)."""
        if node.type is not NodeType.USER_MESSAGE or not node.content.strip():
            return []
        at = node.timestamp
        weight = forward_weight(at, self.half_life_days)
        tags = node.tags or self.tagger.keyword_topics(content_words(node.content))
        counts = [
            ProfileCount(TOPIC if tag in self.topics else TAG, tag, weight, 1.0, at)
            for tag in dict.fromkeys(tags)
            # A keyword of a topic ("trabalho" of work) is counted as that topic.
            if tag in self.topics or not self.tagger.keyword_topics([tag])
        ]
        sample = measure(node.content)
        counts += [
            ProfileCount(STYLE, name, weight * amount, amount, at)
            for name, amount in sample.amounts().items()
        ]
        if sample.language:
            counts.append(ProfileCount(LANGUAGE, sample.language, weight, 1.0, at))
        return counts

    async def learn(self, node: MemoryNode) -> None:
        await self.store.add(node.owner, self.counts(node))

    async def learn_many(self, nodes: Iterable[MemoryNode]) -> None:
        """An import's messages: one addition per person (a transaction each)."""
        by_owner: dict[str, list[ProfileCount]] = defaultdict(list)
        for node in nodes:
            by_owner[node.owner].extend(self.counts(node))
        for owner, counts in by_owner.items():
            await self.store.add(owner, _merged(counts))

    def topic_label(self, name: str, language: str | None) -> str:
        """A topic as a person reads it: a taxonomy topic's first word in ``language``
        (its description starts "trabalho, ...; work, ..."), else the tag itself."""
        for topic in self.tagger.topics:
            if topic.name == name:
                pt, _, en = topic.description.partition(";")
                part = pt if (language or "pt") == "pt" or not en.strip() else en
                word = part.split(",")[0].strip()
                return word or name.replace("_", " ")
        return name.replace("_", " ")

    async def profile(self, owner: str, *, at: datetime | None = None) -> PersonProfile:
        """The person's profile as of ``at`` (a message's ``sent_at``; default their
        latest learned message)."""
        counters = await self.store.counters(owner, min_tag_total=MIN_TAG_MENTIONS)
        return summarise(
            counters, half_life_days=self.half_life_days, at=at, max_topics=self.max_topics
        )


def _merged(counts: Sequence[ProfileCount]) -> list[ProfileCount]:
    """One addition per counter (sums; the latest time), so a large import writes each
    counter once."""
    merged: dict[tuple[str, str], ProfileCount] = {}
    for count in counts:
        key = (count.kind, count.name)
        seen = merged.get(key)
        if seen is None:
            merged[key] = count
            continue
        merged[key] = ProfileCount(
            count.kind,
            count.name,
            seen.weight + count.weight,
            seen.total + count.total,
            max(seen.at, count.at),
            min(seen.first_at or seen.at, count.first_at or count.at),
        )
    return list(merged.values())


def about_section(profile: PersonProfile, *, topics: bool = True) -> str | None:
    """The "about this person" prompt text: the style to mirror and (with ``topics``) the
    topics they care about; None when nothing is known yet."""
    lines = []
    traits = profile.style.traits()
    if traits:
        style = describe_traits(traits, profile.style.languages)
        lines.append(ABOUT_STYLE_FORMAT.format(style=style))
    if topics and profile.favorite_topics:
        named = ", ".join(t.label for t in profile.favorite_topics)
        lines.append(ABOUT_TOPICS_FORMAT.format(topics=named))
    return "\n".join(lines) or None
