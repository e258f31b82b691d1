"""What /profile and the admins' /user say about a learned profile (built-in plugin
``profile``), in the person's language."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from akira_bot.commands.texts import PROFILE_TRAITS, tr
from core.profile import PersonProfile
from core.storage.profile_records import NodeIndexEntry
from core.storage.records import NodeType

TopicLabel = Callable[[str, str | None], str]


def _word(code: str, language: str | None) -> str:
    names = PROFILE_TRAITS.get(code)
    return names.get(language or "pt", names["pt"]) if names else code


def style_words(profile: PersonProfile, language: str | None) -> str:
    """``mensagens curtas, informal, usa emoji, escreve em português``; '' when unknown."""
    traits = profile.style.traits()
    if not traits:
        return ""
    return ", ".join(_word(code, language) for code in [*traits, *profile.style.languages])


def topic_words(profile: PersonProfile, language: str | None, label: TopicLabel) -> str:
    return ", ".join(f"{label(t.name, language)} ({t.mentions})" for t in profile.favorite_topics)


def profile_text(
    profile: PersonProfile,
    index: Sequence[NodeIndexEntry],
    language: str | None,
    label: TopicLabel,
) -> str:
    """/profile's reply: favourite topics (with how often each came up), the style, how
    many of their messages are kept and since when."""
    if profile.empty:
        return tr("profile_empty", language)
    lines = [tr("profile_header", language)]
    if profile.favorite_topics:
        lines.append(tr("profile_topics", language, topics=topic_words(profile, language, label)))
    style = style_words(profile, language)
    if style:
        lines.append(tr("profile_style", language, style=style))
    said = [entry for entry in index if entry.type == NodeType.USER_MESSAGE.value]
    if said:
        total = sum(entry.count for entry in said)
        lines.append(tr("profile_messages", language, messages=total, since=said[0].period))
    lines.append(tr("profile_footer", language))
    return "\n".join(lines)


def admin_profile_text(profile: PersonProfile, language: str | None, label: TopicLabel) -> str:
    """The learned profile's lines of /user."""
    return tr(
        "user_profile",
        language,
        topics=topic_words(profile, language, label) or "-",
        style=style_words(profile, language) or "-",
    )
