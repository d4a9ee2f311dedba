"""The event classifier on the labelled calendar titles (tests/mapping/data, see its README).

The goal of issue 19: at least 90 % overall and no language below 80 % on the held-out test
set; non-actions get no action; a description never outweighs its title.
"""

from __future__ import annotations

import string
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.actions import ACTIONS, LABELS, NONE, classify_event, keyword_rules
from tests.mapping import classifier_report
from tests.mapping.labelled import (
    DEV_SET,
    GOAL_OVERALL,
    GOAL_PER_LANGUAGE,
    TEST_LANGUAGES,
    TEST_SET,
    classify_row,
    confusion_table,
    load,
    predicted,
    score,
)

TEST_ROWS = load(TEST_SET)
DEV_ROWS = load(DEV_SET)


def test_the_test_set_is_big_multilingual_and_covers_every_label():
    assert len(TEST_ROWS) >= 200
    per_language = Counter(r.language for r in TEST_ROWS)
    assert set(per_language) == set(TEST_LANGUAGES)
    assert min(per_language.values()) >= 40
    assert {r.label for r in TEST_ROWS} == set(LABELS)
    for lang in TEST_LANGUAGES:  # every language has meetings, hobbies, non-actions, descriptions
        rows = [r for r in TEST_ROWS if r.language == lang]
        assert {"ADMIN_WORK", "SOCIALIZE", "ME_TIME", "FAMILY_TIME", NONE} <= {r.label for r in rows}
        assert any(r.description for r in rows) and any(r.attendees for r in rows)
    assert any(r.event_type for r in TEST_ROWS)
    assert any(not set(r.title) <= set(string.printable) for r in TEST_ROWS)  # emoji, accents


def test_the_test_set_is_kept_apart_from_the_dev_set():
    test_titles = {r.title.strip().lower() for r in TEST_ROWS}
    dev_titles = {r.title.strip().lower() for r in DEV_ROWS}
    assert len(test_titles) == len(TEST_ROWS), "a title twice in the test set"
    assert not test_titles & dev_titles


def test_accuracy_goal_overall_and_per_language_on_the_test_set():
    s = score(TEST_ROWS)
    assert s.n == len(TEST_ROWS)
    assert s.accuracy >= GOAL_OVERALL, s.errors
    for lang in TEST_LANGUAGES:
        assert s.language_accuracy(lang) >= GOAL_PER_LANGUAGE, (lang, s.errors)


@pytest.mark.parametrize("rows", [TEST_ROWS, DEV_ROWS], ids=["test", "dev"])
def test_a_named_action_is_almost_never_wrong(rows):
    named = [(r, predicted(classify_row(r))) for r in rows]
    named = [(r, p) for r, p in named if p != NONE]
    wrong = [(r.title, r.label, p) for r, p in named if p != r.label]
    assert len(wrong) <= 0.02 * len(named), wrong


@pytest.mark.parametrize("rows", [TEST_ROWS, DEV_ROWS], ids=["test", "dev"])
def test_non_actions_get_no_action(rows):
    non_actions = [r for r in rows if r.label == NONE]
    assert len(non_actions) >= 50
    got_an_action = [(r.title, predicted(classify_row(r))) for r in non_actions if classify_row(r).action]
    assert not got_an_action
    recognised = [r for r in non_actions if classify_row(r).label == NONE]
    assert len(recognised) >= 0.9 * len(non_actions)  # most as NONE, not merely as unknown


def test_the_confusion_table_adds_up():
    s = score(TEST_ROWS)
    assert sum(s.confusion.values()) == s.n
    assert sum(v for (t, p), v in s.confusion.items() if t == p) == s.correct
    lines = confusion_table(s)
    assert len(lines) == 2 + len({r.label for r in TEST_ROWS})
    for label in LABELS:  # one row per label, its count and recall
        row = next(line for line in lines if line.startswith(f"| {label} |"))
        n = sum(1 for r in TEST_ROWS if r.label == label)
        assert row.split("|")[-3].strip() == str(n)


def test_the_readme_shows_what_the_labelled_sets_give():
    readme = classifier_report.README.read_text(encoding="utf-8")
    start = readme.index(classifier_report.START)
    end = readme.index(classifier_report.END) + len(classifier_report.END) + 1
    assert readme[start:end] == classifier_report.section(), "run python -m tests.mapping.classifier_report --write"


# --- the description rule, on every labelled row --------------------------------------------

MISLEADING = [
    "Fokus: programmieren", "coding, focus, writing", "Deep work session together", "focus time",
    "Join Zoom Meeting https://zoom.us/j/1", "Dinner with friends afterwards", "Meditation and yoga",
    "Netflix", "Reminder: bring the kids", "<p>Wir <b>programmieren</b> gemeinsam</p>",
]


@pytest.mark.parametrize("description", MISLEADING)
def test_a_description_never_changes_what_a_title_says(description):
    for r in TEST_ROWS + DEV_ROWS:
        alone = classify_event(r.title, None, r.attendees, r.event_type)
        if alone.method in ("title", "event_type"):
            assert classify_event(r.title, description, r.attendees, r.event_type) == alone, r.title


DEEP_WORDS = ["fokus", "focus", "programmieren", "coding", "schreiben", "writing", "concentration", "enfoque"]


@settings(max_examples=200, deadline=None)
@given(
    title=st.text(alphabet="qxzjwv 023456789#-", max_size=20),  # no "1": "1-1" is a 1:1, a title that says something
    words=st.lists(st.sampled_from(DEEP_WORDS), min_size=1, max_size=6),
    filler=st.text(alphabet="qxzjwv ,.;", max_size=30),
)
def test_unknown_titles_with_work_words_in_the_description_get_no_action(title, words, filler):
    """No phrase, so nothing: a description's single words never decide (issue 19)."""
    description = filler + " " + ", ".join(words)
    c = classify_event(title, description)
    assert c.action is None and c.label is None and c.confidence == 0.0


@settings(max_examples=200, deadline=None)
@given(title=st.text(alphabet="qxzjwvkq023456789 _#()-", max_size=30))  # no "1": "1_1" is a 1:1
def test_unknown_words_give_no_action(title):
    c = classify_event(title)
    assert c.action is None and c.label is None and c.method == "none"


@settings(max_examples=150, deadline=None)
@given(
    row=st.sampled_from(TEST_ROWS),
    style=st.sampled_from([str.upper, str.lower, str.title, lambda t: f"  {t}!! ", lambda t: f"[{t}]"]),
)
def test_case_and_punctuation_do_not_change_the_class(row, style):
    a = classify_event(row.title, row.description, row.attendees, row.event_type)
    b = classify_event(style(row.title), row.description, row.attendees, row.event_type)
    assert (a.label, a.action) == (b.label, b.action)


def test_every_keyword_alone_gives_its_own_class():
    """No keyword is silently shadowed: a title made of one keyword gets that keyword's class."""
    rules = keyword_rules()
    bad = []
    for k in rules.keywords():
        if k.prefix or k.suffix:
            continue
        c = classify_event(" ".join(k.words))
        if c.label != k.label:
            bad.append((k.text, k.label, c.label))
    assert not bad
    assert set(ACTIONS) <= {k.label for k in rules.keywords()}


# --- issue 40: community titles, a tune split and a held-out split --------------------------


@pytest.mark.parametrize("split", ["community_heldout.csv", "community_heldout2.csv"])
def test_the_community_splits_are_apart_and_the_held_out_split_is_big_and_multilingual(split):
    from tests.mapping.labelled import COMMUNITY_HELDOUT, COMMUNITY_HELDOUT2, COMMUNITY_TUNE, DATA

    held, tune = load(DATA / split), load(COMMUNITY_TUNE)
    other_held = load(COMMUNITY_HELDOUT2 if DATA / split == COMMUNITY_HELDOUT else COMMUNITY_HELDOUT)
    per_language = Counter(r.language for r in held)
    assert len(held) >= 150
    assert set(per_language) == set(TEST_LANGUAGES) and min(per_language.values()) >= 35
    titles = {r.title.strip().lower() for r in held}
    assert len(titles) == len(held)
    others = {r.title.strip().lower() for r in [*tune, *other_held, *TEST_ROWS, *DEV_ROWS]}
    assert not titles & others


def test_community_titles_held_out_stay_above_the_floor():
    """The goal is GOAL_COMMUNITY (0.90); the floor is what the rules reached when frozen."""
    from tests.mapping.labelled import COMMUNITY_HELDOUT, COMMUNITY_TUNE

    assert score(load(COMMUNITY_HELDOUT)).accuracy >= 0.88
    assert score(load(COMMUNITY_TUNE)).accuracy >= 0.96


def test_community_titles_of_the_second_held_out_split_meet_the_goal():
    """Measured once when the rules were frozen: 0.925 on 266 titles (en 0.868, de 0.970,
    es 0.926, fr 0.938); a vocabulary change must not take it under the goal."""
    from tests.mapping.labelled import COMMUNITY_HELDOUT2, GOAL_COMMUNITY

    held = score(load(COMMUNITY_HELDOUT2))
    assert held.accuracy >= GOAL_COMMUNITY
    assert all(ok / n >= 0.85 for ok, n in (held.per_language[lang] for lang in TEST_LANGUAGES))
