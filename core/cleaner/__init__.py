"""Reply cleaning and user-text neutralising: "nothing internal reaches a user".

One concept per module, every public name importable from ``core.cleaner``:

* :mod:`~core.cleaner.vocabulary` - what the engine writes into the prompt (section titles,
  block formats, labels); the prompt builders import it, the cleaner derives its patterns
  from it.
* :mod:`~core.cleaner.patterns` - the tag patterns and :func:`contains_internal_marker`, the
  strict oracle both sides (and every leak test of the project) agree on. Every pattern it
  knows starts with an angle bracket (or a look-alike / HTML entity) or a square bracket;
  that is what lets both directions give a hard guarantee: as a last resort they remove or
  defang those brackets.
* :mod:`~core.cleaner.reply` - :func:`clean_reply` (thinking, tags, template tokens, echoed
  sections and blocks), built on :mod:`~core.cleaner.tokens`, :mod:`~core.cleaner.blocks`,
  :mod:`~core.cleaner.echo` and :mod:`~core.cleaner.splice`.
* :mod:`~core.cleaner.guard` - :func:`guard_reply`, the check of a reply against this
  turn's actual instructions in every encoding (decoded by :mod:`~core.cleaner.decode`),
  and the per-turn canary.
* :mod:`~core.cleaner.neutralise` - :func:`neutralise_user_text` for what a person typed.
* :mod:`~core.cleaner.unicode` - :func:`fix_unicode`.
"""

from __future__ import annotations

from core.cleaner.blocks import is_prompt_block_line, is_prompt_section_header
from core.cleaner.decode import decoded, letters
from core.cleaner.guard import (
    CANARY_FORMAT,
    GuardedReply,
    PromptInstructions,
    canary_line,
    guard_reply,
    instruction_texts,
    new_canary,
    reads_as_reply,
)
from core.cleaner.neutralise import neutralise_user_text
from core.cleaner.patterns import contains_internal_marker
from core.cleaner.reply import CleanedReply, clean_reply
from core.cleaner.unicode import fix_unicode
from core.cleaner.vocabulary import (
    ABOUT_SECTION_TITLE,
    ABOUT_STYLE_FORMAT,
    ABOUT_TOPICS_FORMAT,
    ECHO_LABELS,
    EMOTION_SECTION_TITLE,
    HISTORY_SECTION_TITLE,
    PROMPT_SECTION_HEADERS,
    RECALL_FELT_LINE_FORMAT,
    RECALL_LINE_FORMAT,
    RECALL_SECTION_TITLE,
    RECALL_SPEAKER_BOT,
    RECALL_SPEAKER_PERSON,
    RESPONSE_STYLE_FORMAT,
    SECTION_HEADER_FORMAT,
    STRUCTURED_COUNTS_FORMAT,
    STRUCTURED_ENTRY_FORMAT,
    STRUCTURED_MORE_FORMAT,
    STRUCTURED_RECALL_HEADER,
    STRUCTURED_SECTION_TITLE,
    STRUCTURED_UNVERIFIED_NOTE,
    TRAJECTORY_LINE_FORMAT,
)

__all__ = [
    "ABOUT_SECTION_TITLE",
    "ABOUT_STYLE_FORMAT",
    "ABOUT_TOPICS_FORMAT",
    "CANARY_FORMAT",
    "ECHO_LABELS",
    "EMOTION_SECTION_TITLE",
    "HISTORY_SECTION_TITLE",
    "PROMPT_SECTION_HEADERS",
    "RECALL_FELT_LINE_FORMAT",
    "RECALL_LINE_FORMAT",
    "RECALL_SECTION_TITLE",
    "RECALL_SPEAKER_BOT",
    "RECALL_SPEAKER_PERSON",
    "RESPONSE_STYLE_FORMAT",
    "SECTION_HEADER_FORMAT",
    "STRUCTURED_COUNTS_FORMAT",
    "STRUCTURED_ENTRY_FORMAT",
    "STRUCTURED_MORE_FORMAT",
    "STRUCTURED_RECALL_HEADER",
    "STRUCTURED_SECTION_TITLE",
    "STRUCTURED_UNVERIFIED_NOTE",
    "TRAJECTORY_LINE_FORMAT",
    "CleanedReply",
    "GuardedReply",
    "PromptInstructions",
    "canary_line",
    "clean_reply",
    "contains_internal_marker",
    "decoded",
    "fix_unicode",
    "guard_reply",
    "instruction_texts",
    "is_prompt_block_line",
    "is_prompt_section_header",
    "letters",
    "neutralise_user_text",
    "new_canary",
    "reads_as_reply",
]
