"""Event classification rules (mapping/data/keywords.toml) and the slot-action precedence.

Accuracy on the labelled sets is in test_classifier_accuracy.py; real .ics files in
test_calendar_titles.py.
"""

from __future__ import annotations

import copy
import tomllib
from importlib import resources

import pytest

from common.records import ACTIONS
from mapping.actions import (
    LABELS,
    NONE,
    SlotEvidence,
    classify_event,
    keyword_hits,
    keyword_rules,
    normalize,
    parse_rules,
    slot_action,
)


@pytest.mark.parametrize(
    ("title", "action"),
    [
        ("Weekly team meeting", "ADMIN_WORK"),
        ("Teambesprechung", "ADMIN_WORK"),
        ("Réunion d'équipe", "ADMIN_WORK"),
        ("Reunión con el cliente", "ADMIN_WORK"),
        ("Focus time", "DEEP_WORK"),
        ("Fokuszeit", "DEEP_WORK"),
        ("🎧 deep work", "DEEP_WORK"),
        ("Morning run", "EXERCISE"),
        ("Hardlopen", "EXERCISE"),
        ("Salle de sport", "EXERCISE"),
        ("Palestra", "EXERCISE"),
        ("Yoga", "EXERCISE"),
        ("Meditación", "MEDITATE"),
        ("Meditazione guidata", "MEDITATE"),
        ("Dinner with mom", "FAMILY_TIME"),
        ("Kinder abholen", "FAMILY_TIME"),
        ("Elternabend", "FAMILY_TIME"),
        ("Anniversaire de maman", "FAMILY_TIME"),
        ("Drinks with friends", "SOCIALIZE"),
        ("Karaoke", "SOCIALIZE"),
        ("Apéro chez Paul", "SOCIALIZE"),
        ("Stammtisch", "SOCIALIZE"),
        ("Netflix", "BINGE_WATCH"),
        ("Cours d'espagnol", "LEARN"),
        ("Corso di inglese", "LEARN"),
        ("Mittagsschlaf", "SLEEP"),
        ("Massage", "ME_TIME"),
        ("Gaming", "ME_TIME"),
    ],
)
def test_obvious_titles_in_several_languages(title, action):
    c = classify_event(title)
    assert c.action == action and c.label == action and c.method == "title" and c.confidence >= 0.5


# --- regressions from issue 19 ----------------------------------------------------------------


@pytest.mark.parametrize("title", ["Choir rehearsal", "Chorprobe", "Répétition de la chorale", "Ensayo del coro"])
def test_choir_rehearsal_is_a_group_hobby(title):
    assert classify_event(title).action == "SOCIALIZE"


@pytest.mark.parametrize("title", ["Election Day", "Presidents' Day", "test6", "Tax Day", "Weekly recurring"])
def test_holidays_and_placeholders_from_real_calendars_get_no_action(title):
    c = classify_event(title)
    assert c.action is None and c.label == NONE and c.method == "title"


@pytest.mark.parametrize(
    ("title", "description"),
    [
        ("Python Meetup", "Wir programmieren gemeinsam, Fokus auf Testing"),
        ("Stammtisch Webentwicklung", "Programmieren, Fokus, Coding"),
        ("JS user group", "Live coding and a deep focus on testing"),
        ("Meetup Python Lyon", "Programmation et concentration"),
    ],
)
def test_meetups_stay_meetups_whatever_their_description_says(title, description):
    c = classify_event(title, description)
    assert c.action == "SOCIALIZE" and c == classify_event(title)


@pytest.mark.parametrize(
    "description", ["Fokus", "programmieren", "coding", "Fokus: programmieren, schreiben", "focus, coding, writing"]
)
def test_single_description_words_never_turn_an_unknown_title_into_an_action(description):
    c = classify_event("Open Data Abend", description)
    assert c.action is None and c.label is None and c.method == "none" and c.confidence == 0.0


def test_a_description_phrase_helps_only_a_title_that_says_nothing():
    zoom = "Join Zoom Meeting https://us02web.zoom.us/j/81234567"
    c = classify_event("Alex / Jamie", zoom)
    assert c.action == "ADMIN_WORK" and c.method == "description" and c.confidence < 0.5
    assert classify_event("Yoga", zoom).action == "EXERCISE"
    assert classify_event("Busy", "focus time").label == NONE  # a weak title cue still beats it
    assert classify_event("Q3", "<p>Focus time, booked by Clockwise</p>").action == "DEEP_WORK"


@pytest.mark.parametrize("title", [None, "", "   ", "🙂🙂", "xq zzv", "'; DROP TABLE users; --", "Evening", 42])
def test_unknown_or_hostile_titles_get_no_action_and_no_confidence(title):
    c = classify_event(title)
    assert c.action is None and c.label is None and c.confidence == 0.0 and c.method == "none"


def test_a_title_that_says_nothing_with_attendees_is_a_meeting_with_low_confidence():
    c = classify_event("Project Falcon", attendees=5)
    assert c.action == "ADMIN_WORK" and c.method == "attendees" and c.confidence < 0.5
    assert classify_event("Project Falcon", attendees=1).action is None
    assert classify_event("Busy", attendees=5).label == NONE  # a recognised non-action stays one


def test_google_event_type_wins():
    assert classify_event("Whatever", event_type="focusTime").action == "DEEP_WORK"
    assert classify_event("Team lunch", event_type="outOfOffice").action is None
    assert classify_event("Geburtstag: Anna", event_type="birthday").label == NONE
    assert classify_event("Gym", event_type="default").action == "EXERCISE"  # unknown types: the title


# --- non-actions: recognised, with a confidence --------------------------------------------


@pytest.mark.parametrize(
    "title",
    [
        "Dentist", "Zahnarzt", "Kinderarzt – U7", "RDV médecin", "Peluquería", "Car service",
        "Flight to Lisbon", "ICE nach Hamburg", "Vol Paris → Montréal", "Vuelo a Madrid",
        "Vacaciones", "Urlaub", "Out of office",
        "Reminder: renew passport", "Erinnerung: Müll rausbringen",
        "Christmas Day", "Pfingstmontag", "Lundi de Pâques", "Nochebuena", "Mother's Day",
        "Tom's birthday", "Geburtstag Markus", "Cumpleaños de Andrés",
        "TBD", "Hold", "Busy", "Blocked", "Privat", "Occupé",
        "Lunch", "Groceries", "Faire les courses",
    ],
)
def test_titles_that_are_not_actions_are_recognised_as_none(title):
    c = classify_event(title)
    assert c.action is None and c.label == NONE and c.confidence >= 0.5 and c.matched


@pytest.mark.parametrize(
    ("title", "action"),
    [
        ("Hold: focus", "DEEP_WORK"),  # a placeholder word loses to an action
        ("Blocked – deep work", "DEEP_WORK"),
        ("Birthday party", "SOCIALIZE"),
        ("Geburtstagsfeier bei Jonas", "SOCIALIZE"),
        ("Kindergeburtstag", "FAMILY_TIME"),
        ("Mum's birthday 🎂", "FAMILY_TIME"),
        ("Christmas party", "SOCIALIZE"),
        ("Mother's Day brunch with Mum", "FAMILY_TIME"),
        ("Lunch with Priya", "SOCIALIZE"),
        ("Team lunch", "SOCIALIZE"),
        ("Massagetermin", "ME_TIME"),
        ("Kundentermin", "ADMIN_WORK"),
    ],
)
def test_weak_non_action_cues_lose_to_any_action(title, action):
    assert classify_event(title).action == action


@pytest.mark.parametrize(
    ("title", "label"),
    [
        ("Dentist with the kids", NONE),  # an appointment beats everything
        ("Dinner with Mum", "FAMILY_TIME"),
        ("Run with friends", "EXERCISE"),
        ("Drinks with the climbing crew", "SOCIALIZE"),
        ("Movie night with friends", "SOCIALIZE"),
        ("Family movie night", "FAMILY_TIME"),
        ("Pottery class", "ME_TIME"),
        ("Yoga class", "EXERCISE"),
        ("Piano lesson", "ME_TIME"),
        ("Parent-teacher conference", "FAMILY_TIME"),
        ("Focus: quarterly review doc", "DEEP_WORK"),
        ("Revue de code", "ADMIN_WORK"),
        ("Fußball-EM schauen", "BINGE_WATCH"),
        ("Book club", "SOCIALIZE"),
    ],
)
def test_precedence_between_classes(title, label):
    c = classify_event(title)
    assert c.label == label
    assert c.tier == "strong"


# --- matching -----------------------------------------------------------------------------


def test_normalisation_strips_case_accents_and_splits_digits():
    assert normalize("Réunion  d'équipe!") == "reunion d equipe"
    assert normalize("FUSSBALL") == normalize("Fußball") == "fussball"
    assert normalize("test6 1:1") == "test 6 1 1"


@pytest.mark.parametrize(
    ("a", "b"),
    [("Réunion", "REUNION"), ("Fußballtraining", "FUSSBALLTRAINING"), ("Méditation", "meditation"),
     ("Cañas con amigos", "canas con AMIGOS"), ("Töpferkurs", "Topferkurs")],
)
def test_case_and_diacritics_do_not_matter(a, b):
    assert classify_event(a) == classify_event(b)


@pytest.mark.parametrize(
    ("title", "action"),
    [
        ("Spanish lesson", "LEARN"),  # "spa" is a whole word only
        ("Interview: backend candidate", "ADMIN_WORK"),  # "=date" never inside "candidate"
        ("Weiterbildung Datenschutz", "LEARN"),  # ... nor "Datenschutz"
        ("Strength training", "EXERCISE"),  # "=train" is not "training"
        ("Household chores", None),  # "chor" is no part of "chores"
        ("Transport to the venue", None),  # "sport" is no part of "transport"
    ],
)
def test_word_boundaries(title, action):
    assert classify_event(title).action == action


@pytest.mark.parametrize(
    ("title", "action", "parts"),
    [
        ("Chorprobe", "SOCIALIZE", {"chor"}),
        ("Fußballtraining", "EXERCISE", {"fussball"}),
        ("Teammeeting", "ADMIN_WORK", {"meeting"}),
        ("Kindergeburtstag", "FAMILY_TIME", {"kinder"}),
        ("Abteilungsmeeting", "ADMIN_WORK", {"meeting"}),
        ("Quartalsplanung", "ADMIN_WORK", {"planung"}),
        ("Yogakurs", "EXERCISE", {"yoga"}),
        ("Zahnarzttermin", None, {"zahnarzt"}),
        # issue 40: a first part that is a verb's stem (schwimm-en, wander-n, turn-en)
        ("Schwimmverein", "EXERCISE", {"schwimmen"}),
        ("Wandergruppe", "EXERCISE", {"wandern"}),
        ("Turnverein", "EXERCISE", {"turnen"}),
    ],
)
def test_german_compounds_are_read_as_their_parts(title, action, parts):
    c = classify_event(title)
    assert c.action == action and parts <= set(c.matched)


@pytest.mark.parametrize(
    ("title", "label", "part", "not_part"),
    [
        ("Bibelkreis", "SOCIALIZE", "kreis", "reis"),  # "reis" is a trip in Dutch
        ("Landkreis Sitzung", "ADMIN_WORK", "sitzung", "reis"),
    ],
)
def test_the_longest_keyword_at_a_compounds_end_wins(title, label, part, not_part):
    c = classify_event(title)
    assert c.label == label and part in c.matched
    assert not_part not in {k.text for k in keyword_hits(title)}


def test_a_phrase_uses_up_its_words():
    assert [k.text for k in keyword_hits("Mother's Day")] == ["mother s day"]
    assert classify_event("Mother's Day").label == NONE
    assert classify_event("Series marathon").action == "BINGE_WATCH"  # not "marathon"
    assert classify_event("Conference call").action == "ADMIN_WORK"  # not "conference"


def test_emoji_are_weak_cues():
    assert classify_event("🏋️‍♀️").action == "EXERCISE"
    assert classify_event("🍿").action == "BINGE_WATCH"
    assert classify_event("Stand-up 🍿").action == "ADMIN_WORK"


# --- the rules file --------------------------------------------------------------------------


def _doc():
    text = resources.files("mapping").joinpath("data/keywords.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def test_the_shipped_rules_cover_every_class_in_both_orders():
    rules = keyword_rules()
    assert set(rules.weak_order) == set(LABELS)
    assert set(LABELS) <= set(rules.strong_order)
    assert {k.label for k in rules.keywords()} == set(LABELS)
    assert sum(1 for _ in rules.keywords()) > 1000


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d["classes"].update({"WORK": {"strong": ["x"]}}),
        lambda d: d["rules"]["strong_order"].remove("EXERCISE"),
        lambda d: d["rules"]["weak_order"].append("NONE"),
        lambda d: d["classes"]["EXERCISE"]["strong"].append("netflix"),  # in two classes
        lambda d: d["classes"]["EXERCISE"]["strong"].append("=gym"),  # twice, once whole-word only
        lambda d: d["classes"]["EXERCISE"]["strong"].append("*gym*"),
        lambda d: d["classes"]["EXERCISE"]["strong"].append("=morning run"),
        lambda d: d["emoji"].update({"🦄": "UNICORN"}),
        lambda d: d["event_types"].update({"focusTime": "FOCUS"}),
    ],
)
def test_bad_rules_are_rejected(break_it):
    doc = copy.deepcopy(_doc())
    break_it(doc)
    with pytest.raises(ValueError, match="keywords.toml"):
        parse_rules(doc)


def test_every_action_can_be_named_and_nothing_else():
    labels = {classify_event(t).action for t in ["Gym", "Focus time", "Standup", "Lecture", "Nap", "Meditation",
                                                  "Kids pickup", "Drinks", "Spa", "Netflix"]}
    assert labels == set(ACTIONS)


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
