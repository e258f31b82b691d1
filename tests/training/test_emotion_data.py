"""Training-data readers: the strict BRIGHTER mapping and the training-only mixed rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.emotion.data import (
    MIXED_RULES,
    mixed_state,
    read_brighter,
    read_brighter_mixed,
)
from training.emotion.train import is_portuguese, load_training_examples, source_key

HEADER = "id,text,anger,disgust,fear,joy,sadness,surprise\n"
ROWS = {
    "raiva pura": "1,0,0,0,0,0",
    "raiva e tristeza": "1,0,0,0,1,0",
    "nojo e medo": "0,1,1,0,0,0",
    "raiva mas alegria": "1,0,0,1,0,0",
    "alegria e surpresa": "0,0,0,1,0,1",
    "medo apenas": "0,0,1,0,0,0",
    "nada": "0,0,0,0,0,0",
}


def _brighter(path: Path) -> Path:
    lines = [f"r{i},{text},{flags}\n" for i, (text, flags) in enumerate(ROWS.items())]
    path.write_text(HEADER + "".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("emotions", "agressivo", "lenient"),
    [
        (["anger", "sadness"], "agressivo", "agressivo"),
        (["disgust", "fear", "surprise"], "agressivo", "agressivo"),
        (["anger", "joy"], None, None),  # aggression and joy together: no reading
        (["joy", "surprise"], None, "feliz"),
        (["sadness", "fear"], None, "triste"),
        (["fear"], None, None),
        (["anger"], None, None),  # the strict mapping reads it already
        (["anger", "disgust"], None, None),
        ([], None, None),
    ],
)
def test_mixed_rules(emotions: list[str], agressivo: str | None, lenient: str | None) -> None:
    assert MIXED_RULES == ("agressivo", "lenient")
    assert mixed_state(emotions, "agressivo") == agressivo
    assert mixed_state(emotions, "lenient") == lenient


def test_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        mixed_state(["anger", "sadness"], "loose")


def test_mixed_rows_are_only_the_rows_the_strict_reading_drops(tmp_path: Path) -> None:
    path = _brighter(tmp_path / "track_a_train_ptbr.csv")
    strict = {e.text: e.label for e in read_brighter(path)}
    assert strict == {"raiva pura": "agressivo", "nada": "neutro"}
    mixed = read_brighter_mixed(path, "lenient")
    assert {e.text: e.label for e in mixed} == {
        "raiva e tristeza": "agressivo",
        "nojo e medo": "agressivo",
        "alegria e surpresa": "feliz",
    }
    assert not set(strict) & {e.text for e in mixed}
    assert {source_key(e) for e in mixed} == {"brighter_ptbr_mixed"}
    assert is_portuguese("brighter_ptbr_mixed")


def test_mixed_rows_come_last_so_the_other_rows_keep_their_index(tmp_path: Path) -> None:
    goemotions = tmp_path / "emotion" / "goemotions"
    brighter = tmp_path / "emotion" / "brighter"
    goemotions.mkdir(parents=True)
    brighter.mkdir()
    (goemotions / "emotions.txt").write_text("anger\nneutral\n", encoding="utf-8")
    (goemotions / "train.tsv").write_text("so angry\t0\ta\nok then\t1\tb\n", encoding="utf-8")
    _brighter(brighter / "track_a_train_eng.csv")
    _brighter(brighter / "track_a_train_ptbr.csv")
    plain = load_training_examples(tmp_path, None)
    extended = load_training_examples(tmp_path, None, mixed_pt="agressivo")
    assert extended[: len(plain)] == plain
    assert [source_key(e) for e in extended[len(plain) :]] == ["brighter_ptbr_mixed"] * 2
