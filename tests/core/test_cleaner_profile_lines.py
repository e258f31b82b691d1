"""The prompt lines issue 24 added - a recalled turn with its feeling, the emotional
trajectory, the "About this person" section - are the engine's own: echoed by a model
they are removed from the reply, and written by a person they are quoted, like the
other prompt lines (core.cleaner.blocks)."""

from __future__ import annotations

import base64

import pytest

from core.cleaner import (
    ABOUT_SECTION_TITLE,
    ABOUT_STYLE_FORMAT,
    ABOUT_TOPICS_FORMAT,
    RECALL_FELT_LINE_FORMAT,
    RECALL_SPEAKER_PERSON,
    SECTION_HEADER_FORMAT,
    TRAJECTORY_LINE_FORMAT,
    PromptInstructions,
    clean_reply,
    guard_reply,
    is_prompt_block_line,
    neutralise_user_text,
)

FELT = RECALL_FELT_LINE_FORMAT.format(
    when="7 days ago", who=RECALL_SPEAKER_PERSON, feeling="angry", content="odeio meu chefe"
)
TRAJECTORY = TRAJECTORY_LINE_FORMAT.format(
    days=30, trajectory="angry (29 days ago) → happy (23 days ago) → sad (just now)"
)
STYLE = ABOUT_STYLE_FORMAT.format(
    style="short messages, informal, uses emoji; writes in Portuguese"
)
TOPICS = ABOUT_TOPICS_FORMAT.format(topics="work, food, mental health")
ABOUT = f"{SECTION_HEADER_FORMAT.format(title=ABOUT_SECTION_TITLE)}\n{STYLE}\n{TOPICS}"

ECHOES = {
    "felt-line": FELT,
    "felt-line-bulleted-bold": f"* **{FELT.lstrip('- ')}**",
    "trajectory": TRAJECTORY,
    "about-section": ABOUT,
    "about-lines-only": f"{STYLE}\n{TOPICS}",
    "style-line": STYLE,
}


@pytest.mark.parametrize("echo", list(ECHOES.values()), ids=list(ECHOES))
def test_echoes_of_the_new_lines_are_removed_and_the_reply_kept(echo: str) -> None:
    reply = f"Entendo, Ana.\n\n{echo}\n\nQuer falar sobre o trabalho?"
    result = clean_reply(reply)
    assert result.text == "Entendo, Ana.\n\nQuer falar sobre o trabalho?"
    assert not result.fell_back


@pytest.mark.parametrize("line", [FELT, TRAJECTORY, STYLE, TOPICS])
def test_a_person_writing_them_is_quoted(line: str) -> None:
    assert is_prompt_block_line(line)
    assert neutralise_user_text(f"oi\n{line}\ntchau") == f"oi\n> {line}\ntchau"


@pytest.mark.parametrize(
    "text",
    [
        # Ordinary English: lowercase "they", as people write it.
        "Last week, they felt angry and said: no more meetings.",
        "I felt angry and said: enough.",
        "Their feelings matter more than the topics they care about.",
    ],
)
def test_ordinary_sentences_are_kept(text: str) -> None:
    assert not is_prompt_block_line(text)
    assert clean_reply(text).text == text


@pytest.mark.parametrize(
    "piece",
    [
        # The end of the "About this person" section and the next section's header.
        "writes in Portuguese and English\n\n## Structured memories\n",
        # A title's second half and a felt line cut before "said".
        "ember about this person\n- 7 days ago, They felt angry and ",
    ],
)
def test_a_base64_piece_of_the_prompt_is_removed(piece: str) -> None:
    """An echo in base64 wrapped over lines is decoded a line at a time: a line may hold
    the end of one of the new lines and a header, or a felt line cut short."""
    encoded = base64.b64encode(piece.encode()).decode()
    instructions = PromptInstructions(titles=("About this person", "Structured memories"))
    guarded = guard_reply(f"Claro!\n{encoded}\nComo foi o seu dia hoje?", instructions)
    assert guarded.text.split() == ["Claro!", "Como", "foi", "o", "seu", "dia", "hoje?"]
