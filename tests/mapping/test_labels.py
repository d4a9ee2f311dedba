"""A person's labels and learned labels, the pure part (mapping/labels.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.rows import EventFacts
from mapping import labels as L
from mapping.actions import LABELS, classify_event
from mapping.labels import LabelBook, LabelError, classify_with_labels, learn, new_label


def book(*labels, events=()):
    return LabelBook.build(labels, events)


# -- a person's labels -------------------------------------------------------------------------
def test_a_persons_label_overrides_the_table_for_that_title_whatever_its_case_and_punctuation():
    assert classify_event("Yoga mit Anna").action == "EXERCISE"
    b = book(new_label("Yoga mit Anna", "socialize"))
    for title in ("Yoga mit Anna", "YOGA mit anna!!", "  yoga – mit Anna "):
        c = classify_with_labels(title, book=b)
        assert (c.action, c.method, c.tier, c.confidence) == ("SOCIALIZE", "label", "exact", 1.0)
    assert classify_with_labels("Yoga", book=b).action == "EXERCISE"  # another title: the table


def test_a_label_follows_its_recurring_series_when_an_occurrence_is_renamed():
    b = book(new_label("Plenum", "ADMIN_WORK"), events=[("Plenum", "series-1"), ("Sonderplenum!", "series-1")])
    renamed = classify_with_labels("Kollektivabend", series_id="series-1", book=b)
    assert (renamed.action, renamed.tier) == ("ADMIN_WORK", "series")
    assert classify_with_labels("Kollektivabend", series_id="series-2", book=b).action is None


def test_a_label_reaches_titles_sharing_its_distinctive_words_only():
    b = book(new_label("Chaostreff", "SOCIALIZE"), new_label("Weekly team sync", "DEEP_WORK"))
    c = classify_with_labels("Chaostreff: Lightning Talks", book=b)
    assert (c.action, c.tier) == ("SOCIALIZE", "words")
    # "weekly", "team", "sync" are stop words or keywords: that label has no distinctive word
    assert L.distinctive_words("Weekly team sync") == frozenset()
    assert classify_with_labels("Team sync with Acme", book=b).action == "ADMIN_WORK"
    assert classify_with_labels("Weekly team sync", book=b).action == "DEEP_WORK"


def test_distinctive_words_leave_out_short_words_numbers_stop_words_and_keywords():
    assert L.distinctive_words("Chaostreff 2024 mit Bob und Frieda im Club") == {"chaostreff", "frieda"}


def test_a_pattern_matches_titles_as_a_glob_on_their_normal_form():
    b = book(new_label("Chaos*", "SOCIALIZE"))
    assert classify_with_labels("Chaos Communication Camp", book=b).tier == "pattern"
    assert classify_with_labels("Das Chaos", book=b).action is None


def test_none_says_not_an_action_and_keeps_its_source():
    c = classify_with_labels("Gym", book=book(new_label("gym", "none")))
    assert (c.action, c.label, c.method) == (None, "NONE", "label")


@pytest.mark.parametrize("action", ["WALKING", "", "exercise!", "DEEP WORK x"])
def test_a_bad_action_is_one_line_that_lists_the_actions(action):
    with pytest.raises(LabelError) as e:
        new_label("Chaostreff", action)
    assert "\n" not in str(e.value) and "EXERCISE" in str(e.value) and "NONE" in str(e.value)


@pytest.mark.parametrize("pattern", ["", "  ", "*", "!!!", "* *"])
def test_an_empty_pattern_is_refused(pattern):
    with pytest.raises(LabelError):
        new_label(pattern, "EXERCISE")


@pytest.mark.parametrize("action", [a.lower() for a in LABELS] + ["deep-work", "Family Time"])
def test_every_action_is_accepted_in_any_case(action):
    assert new_label("x y", action).action in LABELS


def test_the_persons_label_wins_over_a_learned_one_at_every_step():
    mine = new_label("Velmora", "SOCIALIZE")
    learned = new_label("Velmora", "EXERCISE", L.LEARNED, "Velmora: 4 of 4 times a workout overlapped")
    for order in ((mine, learned), (learned, mine)):
        assert classify_with_labels("Velmora", book=book(*order)).method == "label"
    b = book(new_label("Velmora hall", "SOCIALIZE"), new_label("Velmora", "EXERCISE", L.LEARNED),
             events=[("Velmora", "s")])
    # exact learned title vs the person's words: the person's label still wins
    assert classify_with_labels("Velmora hall", book=b).method == "label"


def test_a_learned_label_never_overrides_a_strong_keyword_but_fills_a_weak_one():
    b = book(new_label("Team lunch run", "SLEEP", L.LEARNED), new_label("Termin Velmora", "EXERCISE", L.LEARNED))
    assert classify_with_labels("Team lunch run", book=b).method == "title"  # strong keywords
    c = classify_with_labels("Termin Velmora", book=b)  # "Termin": a weak NONE
    assert (c.action, c.method, c.confidence) == ("EXERCISE", "learned", L.LEARNED_CONFIDENCE)


def test_a_proposed_learned_label_is_not_applied():
    b = book(new_label("Velmora", "EXERCISE", L.LEARNED, applied=False))
    assert classify_with_labels("Velmora", book=b).action is None


@settings(max_examples=150, deadline=None)
@given(title=st.text(max_size=40), action=st.sampled_from(LABELS))
def test_a_label_always_applies_to_its_own_title(title, action):
    try:
        lab = new_label(title, action)
    except LabelError:
        return
    if "*" in title:
        return
    c = classify_with_labels(title, book=book(lab))
    assert c.label == action and c.method == "label"


# -- learned labels ------------------------------------------------------------------------------
def facts(title, n, workout=0, sleep=0, steps=0, worn=True, minutes=60.0):
    out = []
    for i in range(n):
        out.append(EventFacts(title, minutes, minutes if i < workout else 0.0, minutes if i < sleep else 0.0,
                              8000.0 if i < steps else 300.0, worn))
    return out


def test_a_title_that_coincides_with_workouts_is_learned_with_its_evidence():
    [lab] = learn(facts("Chaostreff", 4, workout=4))
    assert (lab.action, lab.origin, lab.applied) == ("EXERCISE", "learned", True)
    assert lab.evidence == "Chaostreff: 4 of 4 times a workout overlapped"


@pytest.mark.parametrize(("n", "k", "applied"), [(3, 3, True), (5, 4, True), (5, 3, False), (2, 2, False),
                                                 (4, 3, False), (10, 8, True)])
def test_the_apply_thresholds(n, k, applied):
    [lab] = learn(facts("Velmora", n, workout=k))
    assert lab.applied is applied
    assert applied == (n >= L.APPLY_MIN_OCCURRENCES and k / n >= L.APPLY_MIN_SHARE)


def test_too_few_or_too_rare_coincidences_propose_nothing():
    assert learn(facts("Velmora", 1, workout=1)) == []
    assert learn(facts("Velmora", 6, workout=2)) == []


def test_sleep_is_learned_and_steps_alone_are_only_proposed():
    [nap] = learn(facts("Quiyor", 4, sleep=4))
    assert (nap.action, nap.applied) == ("SLEEP", True) and "asleep" in nap.evidence
    [walk] = learn(facts("Nordrunde", 6, steps=6))
    assert (walk.action, walk.applied) == ("EXERCISE", False) and "steps" in walk.evidence


def test_days_without_a_wearable_count_for_nothing():
    assert learn(facts("Velmora", 5, workout=0, worn=False)) == []
    worn = facts("Velmora", 3, workout=3) + facts("Velmora", 3, worn=False)
    [lab] = learn(worn)
    assert lab.evidence == "Velmora: 3 of 3 times a workout overlapped"


def test_a_strong_keyword_title_or_one_the_person_labelled_is_not_learned():
    assert learn(facts("Team meeting", 5, workout=5)) == []  # the table knows it
    assert learn(facts("Velmora", 5, workout=5), skip={"velmora"}) == []  # the person's label wins
    assert learn(facts("Lunch", 5, workout=5))[0].action == "EXERCISE"  # "Lunch": a weak NONE


def test_a_workout_that_only_touches_an_event_does_not_count():
    edge = [EventFacts("Velmora", 60.0, 15.0, 0.0, None, True) for _ in range(5)]
    assert learn(edge) == []
