"""Loading config/emotional_states.toml and user-edited copies of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.emotion import EmotionError, load_emotional_states

SHIPPED = Path(__file__).resolve().parents[3] / "config" / "emotional_states.toml"

EXPECTED = {
    "agressivo": ("<!STRICT_MODE_AGGRESSIVE>", 30),
    "feliz": ("<!WARM_FRIENDLY_MODE>", 15),
    "triste": ("<!EMPATHETIC_SUPPORTIVE_MODE>", 20),
    "confuso": ("<!CLEAR_PATIENT_MODE>", 10),
    "neutro": ("<!NEUTRAL_PROFESSIONAL_MODE>", 0),
}


def test_shipped_states_tags_and_days() -> None:
    states = load_emotional_states()
    assert {name: (s.tag, s.memory_days) for name, s in states.items()} == EXPECTED
    for state in states.values():
        assert state.instruction_pt and state.instruction_en and state.response_style
        assert state.instruction("pt-BR") == state.instruction_pt
        assert state.instruction("en") == state.instruction_en
    # the package resource and the file in the checkout are the same thing
    assert load_emotional_states(SHIPPED) == states


def test_user_added_state(tmp_path: Path) -> None:
    text = SHIPPED.read_text(encoding="utf-8") + (
        "\n[states.ansioso]\n"
        'tag = "<!CALM_REASSURING_MODE>"\n'
        "memory_days = 7\n"
        'response_style = "reassuring"\n'
        'instruction_pt = "Tranquilize o usuário."\n'
        'instruction_en = "Reassure the user."\n'
    )
    path = tmp_path / "emotional_states.toml"
    path.write_text(text, encoding="utf-8")
    states = load_emotional_states(path)
    assert set(states) == {*EXPECTED, "ansioso"}
    assert states["ansioso"].tag == "<!CALM_REASSURING_MODE>"
    assert states["ansioso"].memory_days == 7
    assert states["ansioso"].instruction("pt") == "Tranquilize o usuário."


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[states.feliz]\ntag = "<!F>"\nmemory_days = 1\ninstruction_pt = "x"\ninstruction_en = "x"\n',
            "neutro",
        ),
        (
            '[states.neutro]\ntag = "<!N>"\ninstruction_pt = "x"\ninstruction_en = "x"\n',
            "memory_days",
        ),
        (
            '[states.neutro]\ntag = "NOTATAG"\nmemory_days = 0\ninstruction_pt = "x"\ninstruction_en = "x"\n',
            "tag",
        ),
        (
            '[states.neutro]\ntag = "<!N>"\nmemory_days = -1\ninstruction_pt = "x"\ninstruction_en = "x"\n',
            ">= 0",
        ),
        ("[states\n", "cannot read"),
    ],
)
def test_invalid_files_name_the_problem(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(EmotionError, match=message):
        load_emotional_states(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmotionError, match="cannot read"):
        load_emotional_states(tmp_path / "nope.toml")
