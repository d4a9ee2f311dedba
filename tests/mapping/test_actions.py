"""Event classification (rules vs learned, multilingual) and the slot-action precedence."""

from __future__ import annotations

import pytest

from common.records import ACTIONS
from mapping.actions import (
    LABELS,
    SlotEvidence,
    classify_event,
    evaluate,
    labelled_events,
    learned_model,
    normalize,
    rule_classify,
    slot_action,
    train,
)


def test_labelled_set_is_big_multilingual_and_split_once():
    rows = labelled_events()
    assert len(rows) >= 300
    assert {r.lang for r in rows} >= {"en", "de", "fr", "es", "nl", "pt", "it"}
    assert {r.label for r in rows} == set(LABELS)
    test = [r for r in rows if r.split == "test"]
    assert 0.2 <= len(test) / len(rows) <= 0.3
    titles = [r.title.lower() for r in rows]
    assert len(titles) == len(set(titles)), "no title in both splits"
    for label in LABELS:
        assert any(r.label == label for r in test), f"{label} missing from the held-out split"


def test_learned_classifier_beats_the_keyword_rules_on_held_out_events():
    res = evaluate("test")
    assert res["n"] >= 80
    assert res["learned_accuracy"] > res["rules_accuracy"]
    assert res["learned_accuracy"] >= 0.75


def test_training_is_deterministic():
    rows = [r for r in labelled_events() if r.split == "train"]
    a, b = train(rows), train(rows)
    assert (a.w == b.w).all() and (a.b == b.b).all()
    assert learned_model() is learned_model()  # trained once per process


@pytest.mark.parametrize(
    ("title", "action"),
    [
        ("Weekly team meeting", "ADMIN_WORK"),
        ("Teambesprechung", "ADMIN_WORK"),
        ("Réunion d'équipe", "ADMIN_WORK"),
        ("Reunión con el cliente", "ADMIN_WORK"),
        ("Focus time", "DEEP_WORK"),
        ("Fokuszeit", "DEEP_WORK"),
        ("Morning run", "EXERCISE"),
        ("Hardlopen", "EXERCISE"),
        ("Salle de sport", "EXERCISE"),
        ("Palestra", "EXERCISE"),
        ("Yoga", "EXERCISE"),
        ("Meditación", "MEDITATE"),
        ("Meditazione guidata", "MEDITATE"),
        ("Dinner with mom", "FAMILY_TIME"),
        ("Kinder abholen", "FAMILY_TIME"),
        ("Drinks with friends", "SOCIALIZE"),
        ("Karaoke", "SOCIALIZE"),
        ("Apéro chez Paul", "SOCIALIZE"),
        ("Netflix", "BINGE_WATCH"),
        ("Cours d'espagnol", "LEARN"),
        ("Corso di inglese", "LEARN"),
        ("Mittagsschlaf", "SLEEP"),
    ],
)
def test_obvious_titles_in_several_languages(title, action):
    assert classify_event(title).action == action


@pytest.mark.parametrize("title", ["Dentist", "Zahnarzt", "Flight to Lisbon", "Vacaciones", "Busy"])
def test_appointments_and_blockers_get_no_action(title):
    c = classify_event(title)
    assert c.action is None and c.label == "OTHER"


@pytest.mark.parametrize("title", [None, "", "   ", "🙂🙂", "xq zzv", "'; DROP TABLE events; --"])
def test_unknown_or_hostile_titles_fall_back_gracefully(title):
    c = classify_event(title)
    assert c.action in (None, *ACTIONS)
    assert 0.0 <= c.confidence <= 1.0


def test_empty_title_with_attendees_is_a_meeting_with_low_confidence():
    c = classify_event("", attendees=5)
    assert c.action == "ADMIN_WORK" and c.confidence < 0.5


def test_google_event_type_wins():
    assert classify_event("Whatever", event_type="focusTime").action == "DEEP_WORK"
    assert classify_event("Team lunch", event_type="outOfOffice").action is None


def test_rules_match_word_starts_and_whole_short_words():
    assert rule_classify("Running club").label == "EXERCISE"
    assert rule_classify("Spanish lesson").label == "LEARN"  # "spa" must be a whole word
    assert rule_classify("Painting").label == "ME_TIME"  # "pai" (father, pt) is whole-word only
    assert normalize("Réunion  d'équipe!") == "reunion dequipe"


# --- slot actions -----------------------------------------------------------------------------


def ev(**kw) -> SlotEvidence:
    e = SlotEvidence()
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def test_sleep_covering_most_of_the_slot_is_sleep_even_with_a_calendar_event():
    e = ev(sleep_min=400.0)
    e.add_event("DEEP_WORK", 120, 0.9)
    action, conf, evidence = slot_action(e, 3)
    assert action == "SLEEP" and conf > 0.8 and evidence["rule"] == "sleep"


def test_workout_beats_the_calendar_and_mindful_session():
    e = ev(workout_min=45.0, mindful_min=20.0, workout_sports=["running"])
    e.add_event("ADMIN_WORK", 200, 0.9)
    action, _, evidence = slot_action(e, 0)
    assert action == "EXERCISE" and evidence["sports"] == ["running"]


def test_mindful_session_beats_the_calendar():
    e = ev(mindful_min=15.0)
    e.add_event("ADMIN_WORK", 200, 0.9)
    assert slot_action(e, 1)[0] == "MEDITATE"


def test_dominant_calendar_action_by_minutes():
    e = SlotEvidence()
    e.add_event("ADMIN_WORK", 60, 0.9)
    e.add_event("DEEP_WORK", 180, 0.8)
    action, conf, _ = slot_action(e, 0)
    assert action == "DEEP_WORK" and 0 < conf < 1


def test_short_naps_and_short_events_are_not_enough():
    e = ev(sleep_min=60.0, workout_min=5.0)
    e.add_event("SOCIALIZE", 15, 0.9)
    assert slot_action(e, 1) == (None, 0.0, slot_action(e, 1)[2])


def test_nothing_known_is_no_action():
    action, conf, evidence = slot_action(SlotEvidence(), 2)
    assert action is None and conf == 0.0 and evidence["rule"] == "none"
