"""Emotional state rules, driven by explicit message timestamps (no sleeps, no wall clock)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from core.emotion import (
    HOSTILE_NOTE_EN,
    HOSTILE_NOTE_PT,
    EmotionalState,
    EmotionReading,
    EmotionRules,
    apply_reading,
    build_detector,
    current_tone,
    load_emotional_states,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RULES = EmotionRules()
STATES = load_emotional_states()


def feed(state: EmotionalState, *steps: tuple[str, float, datetime]) -> EmotionalState:
    for label, score, at in steps:
        state = apply_reading(state, EmotionReading(label, score), at, RULES)
    return state


def test_reading_under_threshold_keeps_state_but_is_logged() -> None:
    state = feed(EmotionalState(), ("triste", 0.9, T0))
    after = feed(state, ("feliz", 0.3, T0 + timedelta(minutes=1)))
    assert after.emotional_state == "triste"
    assert after.emotion_confidence_score == 0.9
    assert [e.emotion for e in after.emotion_history] == ["triste", "feliz"]
    assert after.emotion_history[-1].confidence == 0.3
    # exactly at the threshold counts as confident
    at_threshold = feed(state, ("feliz", 0.5, T0 + timedelta(minutes=2)))
    assert at_threshold.emotional_state == "feliz"


def test_apply_reading_is_pure() -> None:
    state = EmotionalState()
    new = apply_reading(state, EmotionReading("agressivo", 0.9), T0, RULES)
    assert state.emotional_state == "neutro" and state.emotion_history == []
    assert state.aggressive_count == 0
    assert new.is_hostile and new.aggressive_count == 1


def test_aggression_sets_hostile_and_counts() -> None:
    state = feed(
        EmotionalState(),
        ("agressivo", 0.8, T0),
        ("agressivo", 0.9, T0 + timedelta(minutes=1)),
    )
    assert state.emotional_state == "agressivo"
    assert state.is_hostile
    assert state.aggressive_count == 2
    assert state.last_emotion_change == T0
    tone = current_tone(state, T0 + timedelta(minutes=2), STATES)
    assert tone.tag == "<!STRICT_MODE_AGGRESSIVE>"
    assert tone.hostile_history
    assert HOSTILE_NOTE_EN in tone.instruction("en")
    assert HOSTILE_NOTE_PT in tone.instruction("pt-BR")


def test_unsure_aggression_changes_nothing() -> None:
    state = feed(EmotionalState(), ("agressivo", 0.4, T0))
    assert not state.is_hostile and state.aggressive_count == 0
    assert state.emotional_state == "neutro"


def test_confident_happy_message_calms_but_keeps_count() -> None:
    state = feed(EmotionalState(), ("agressivo", 0.9, T0), ("feliz", 0.8, T0 + timedelta(hours=1)))
    assert not state.is_hostile
    assert state.aggressive_count == 1
    assert state.emotional_state == "feliz"
    tone = current_tone(state, T0 + timedelta(hours=2), STATES)
    assert tone.tag == "<!WARM_FRIENDLY_MODE>"
    assert tone.hostile_history  # the hostile past is still remembered


def test_n_calm_messages_in_a_row_clear_hostility() -> None:
    state = feed(EmotionalState(), ("agressivo", 0.9, T0))
    state = feed(
        state,
        ("neutro", 0.9, T0 + timedelta(minutes=1)),
        ("confuso", 0.3, T0 + timedelta(minutes=2)),
    )
    assert state.is_hostile  # two calm messages are not enough (calming_messages=3)
    assert state.emotional_state == "agressivo"
    # another aggressive message resets the streak
    state = feed(state, ("agressivo", 0.7, T0 + timedelta(minutes=3)))
    state = feed(
        state,
        ("neutro", 0.9, T0 + timedelta(minutes=4)),
        ("neutro", 0.9, T0 + timedelta(minutes=5)),
    )
    assert state.is_hostile
    state = feed(state, ("neutro", 0.9, T0 + timedelta(minutes=6)))
    assert not state.is_hostile
    assert state.aggressive_count == 2
    assert state.emotional_state == "neutro"
    assert current_tone(state, T0 + timedelta(minutes=7), STATES).hostile_history


def test_aggression_remembered_after_7_days_gone_after_30() -> None:
    state = feed(EmotionalState(), ("agressivo", 0.9, T0))
    week = current_tone(state, T0 + timedelta(days=7), STATES)
    assert week.state == "agressivo" and week.hostile_history
    month = current_tone(state, T0 + timedelta(days=30, hours=1), STATES)
    assert month.state == "neutro"
    assert month.tag == "<!NEUTRAL_PROFESSIONAL_MODE>"
    assert not month.hostile_history
    assert month.hostile_note_en is None
    # a new message after the expiry starts from neutral, not hostile; the count stays
    later = feed(state, ("neutro", 0.9, T0 + timedelta(days=31)))
    assert later.emotional_state == "neutro"
    assert not later.is_hostile
    assert later.aggressive_count == 1


def test_each_state_expires_after_its_memory_days() -> None:
    for label, days in (("feliz", 15), ("triste", 20), ("confuso", 10)):
        state = feed(EmotionalState(), (label, 0.9, T0))
        assert current_tone(state, T0 + timedelta(days=days - 1), STATES).state == label
        assert current_tone(state, T0 + timedelta(days=days + 1), STATES).state == "neutro"


def test_neutral_message_does_not_erase_a_remembered_state() -> None:
    state = feed(
        EmotionalState(),
        ("triste", 0.9, T0),
        ("neutro", 0.95, T0 + timedelta(days=2)),
    )
    assert current_tone(state, T0 + timedelta(days=3), STATES).state == "triste"
    # memory counts from the last reading that set the state, not from the neutral one
    assert current_tone(state, T0 + timedelta(days=21), STATES).state == "neutro"


def test_history_is_bounded() -> None:
    rules = EmotionRules(history_limit=5)
    state = EmotionalState()
    for i in range(12):
        state = apply_reading(
            state, EmotionReading("neutro", 0.9), T0 + timedelta(seconds=i), rules
        )
    assert len(state.emotion_history) == 5
    assert state.emotion_history[-1].timestamp == T0 + timedelta(seconds=11)


def test_json_round_trip() -> None:
    state = feed(
        EmotionalState(),
        ("agressivo", 0.9, T0),
        ("feliz", 0.7, T0 + timedelta(hours=3)),
    )
    text = json.dumps(state.to_dict())
    back = EmotionalState.from_dict(json.loads(text))
    assert back == state
    assert EmotionalState.from_dict({}) == EmotionalState()
    assert EmotionalState.from_dict(None) == EmotionalState()


def test_naive_timestamps_compare_as_utc() -> None:
    state = feed(EmotionalState(), ("agressivo", 0.9, T0))
    naive_later = (T0 + timedelta(days=7)).replace(tzinfo=None)
    assert current_tone(state, naive_later, STATES).state == "agressivo"


@pytest.mark.parametrize("kind", ["lexicon", "classifier"])
def test_anxiety_messages_get_a_patient_or_supportive_tone(kind: str) -> None:
    detector = build_detector(kind, embedder=None, strict=True)
    state = EmotionalState()
    for minutes, text in enumerate(["Tenho ansiedade social", "Fico nervoso em grupos"]):
        at = T0 + timedelta(minutes=minutes)
        state = apply_reading(state, detector.detect(text), at, RULES)
    tone = current_tone(state, T0 + timedelta(minutes=2), STATES)
    assert tone.state in ("triste", "confuso"), (kind, state.emotion_history)
    assert tone.tag in ("<!EMPATHETIC_SUPPORTIVE_MODE>", "<!CLEAR_PATIENT_MODE>")
    assert tone.response_style in ("supportive", "step_by_step")


def test_rules_follow_an_edited_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "states.toml"
    text = (
        "[states.neutro]\n"
        'tag = "<!N>"\nmemory_days = 0\ninstruction_pt = "n"\ninstruction_en = "n"\n'
        "[states.agressivo]\n"
        'tag = "<!A>"\nmemory_days = 2\ninstruction_pt = "a"\ninstruction_en = "a"\n'
    )
    path.write_text(text, encoding="utf-8")
    states = load_emotional_states(path)
    rules = EmotionRules.from_config(states)
    state = apply_reading(EmotionalState(), EmotionReading("agressivo", 0.9), T0, rules)
    assert current_tone(state, T0 + timedelta(days=1), states).tag == "<!A>"
    assert current_tone(state, T0 + timedelta(days=3), states).tag == "<!N>"
    # a state the config does not know falls back to neutral
    odd = apply_reading(EmotionalState(), EmotionReading("feliz", 0.9), T0, rules)
    assert current_tone(odd, T0, states).state == "neutro"
