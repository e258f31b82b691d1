"""The prompt's vocabulary: what the engine itself writes into the system prompt.

The texts live here, in the one package of the project that imports nothing from it (the
prompt builders - core.stages.basic, core.stages.emotion, core.memory.structured - import
the cleaner, so the cleaner cannot import them back): the builders import these constants
and the cleaner derives its patterns from them, so an echoed block is recognised however
the prompt's wording is edited. Only the operator's texts (persona, emotional states) are
not here; the clean stage passes those to the reply check.
"""

from __future__ import annotations

#: How the prompt builder heads each section (``core.stages.basic.PromptStage``).
SECTION_HEADER_FORMAT = "## {title}"
#: The titles of the sections the engine's stages write.
EMOTION_SECTION_TITLE = "Emotional Context Instructions"
RECALL_SECTION_TITLE = "What you remember about this person"
STRUCTURED_SECTION_TITLE = "Structured memories"
HISTORY_SECTION_TITLE = "Recent conversation"
ABOUT_SECTION_TITLE = "About this person"

#: The structured-memories recall text (``core.memory.structured.render_recall``): a banner,
#: the counts, one entry per memory (its content lines indented under the head), a note on
#: how many were left out, then the instruction on unverified entries.
STRUCTURED_RECALL_HEADER = "=== STRUCTURED MEMORIES ==="
STRUCTURED_COUNTS_FORMAT = "{total} total ({verified} verified, {unverified} unverified)"
STRUCTURED_ENTRY_FORMAT = "[{index:03d}] {category} ({priority}) [{mark}] {key}"
STRUCTURED_MORE_FORMAT = "... and {more} more"
STRUCTURED_UNVERIFIED_NOTE = (
    "Entries marked [unverified] were inferred, not confirmed by the person: "
    "do not state them as certain."
)

#: One recalled conversation turn (``core.stages.basic.RecallStage``).
RECALL_LINE_FORMAT = "- {when}, {who} said: {content}"
RECALL_SPEAKER_BOT = "AKIRA"
RECALL_SPEAKER_PERSON = "They"
#: A recalled turn of the person's that carried a feeling (its stored emotion, not neutral).
RECALL_FELT_LINE_FORMAT = "- {when}, {who} felt {feeling} and said: {content}"
#: The person's feelings over the last weeks, one line of the emotional section
#: (``core.emotion.feelings.trajectory_line``).
TRAJECTORY_LINE_FORMAT = "Their feelings over the last {days} days: {trajectory}"

#: The "about this person" section (built-in plugin ``profile``, core.profile.learner).
ABOUT_STYLE_FORMAT = "Their style (mirror it): {style}"
ABOUT_TOPICS_FORMAT = "Topics they care about: {topics}"

#: The last line of the emotional section (``core.stages.emotion.EmotionTracker.section``).
RESPONSE_STYLE_FORMAT = "Response style: {style}"

#: The section headers of the prompt: the ones the builder writes, and a few a model might
#: invent around them. The cleaner (which drops echoed sections) and the neutraliser (which
#: quotes fake ones in user text) use this tuple, so both agree with the prompt. Matching
#: ignores the ``#`` level, case, surrounding ``*``/``_`` emphasis and a trailing colon.
PROMPT_SECTION_HEADERS: tuple[str, ...] = tuple(
    SECTION_HEADER_FORMAT.format(title=title)
    for title in (
        "Persona",
        EMOTION_SECTION_TITLE,
        RECALL_SECTION_TITLE,
        STRUCTURED_SECTION_TITLE,
        HISTORY_SECTION_TITLE,
        ABOUT_SECTION_TITLE,
        "Current message",
        "Instructions",
        "Reply rules",
    )
)

#: Further labels a model uses when it echoes its instructions ("System: ...",
#: "Emotional context: ..."). A line that starts with one of these (optionally followed by a
#: colon and content) is treated like a section header: it and its block are dropped.
ECHO_LABELS: tuple[str, ...] = (
    "system",
    "system prompt",
    "system message",
    "system instructions",
    "developer",
    "developer message",
    "persona",
    "instructions",
    "hidden instructions",
    "internal",
    "internal notes",
    "emotional context",
    "emotional context instructions",
    "emotional state",
    "emotional tag",
    "recalled context",
    "memory context",
    "contexto emocional",
    "instruções",
    "instruções do sistema",
    "instruções de contexto emocional",
)
