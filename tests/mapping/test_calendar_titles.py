"""The classifier on whole calendars read by the real .ics connector: the demo person's
calendar (rhythm/data/sample/calendar.ics) and a community calendar written for these tests
(tests/mapping/data/community_calendar.ics: weekly meetups whose descriptions say "Fokus",
"programmieren", "Coding", a choir, karaoke, a holiday, a placeholder)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from common.records import Event
from connectors.calendar.ics import read_export
from mapping.actions import NONE, classify_event

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "rhythm" / "data" / "sample" / "calendar.ics"
COMMUNITY = Path(__file__).resolve().parent / "data" / "community_calendar.ics"


def events(path: Path) -> list[Event]:
    recs = read_export(path, window_start="2020-01-01", window_end="2030-01-01")
    return [r for r in recs if isinstance(r, Event)]


def classify(e: Event):
    return classify_event(e.title, e.description, e.attendees_count, e.event_type)


@pytest.fixture(scope="module")
def community() -> list[Event]:
    return events(COMMUNITY)


@pytest.fixture(scope="module")
def sample() -> list[Event]:
    return events(SAMPLE)


def test_community_calendar_meetups_are_not_deep_work(community):
    by_title = {}
    for e in community:
        by_title.setdefault(e.title, set()).add(classify(e).label)
    assert len(community) > 300  # weekly series over a year, expanded
    assert by_title == {
        "Python Meetup Paderborn": {"SOCIALIZE"},
        "Stammtisch Webentwicklung": {"SOCIALIZE"},
        "Coding Dojo": {"SOCIALIZE"},
        "Open Data Abend": {None},  # says nothing; its description's single words do not count
        "Chorprobe": {"SOCIALIZE"},
        "Karaoke": {"SOCIALIZE"},
        "Fokuszeit": {"DEEP_WORK"},
        "Tag der Deutschen Einheit": {NONE},
        "test6": {NONE},
        "Vorstand": {"ADMIN_WORK"},  # says nothing; its description is a Zoom invitation
    }


@pytest.mark.parametrize("calendar", ["community", "sample"])
def test_descriptions_never_change_what_a_title_says(calendar, request):
    evs = request.getfixturevalue(calendar)
    with_description = [e for e in evs if e.description]
    assert with_description
    for e in with_description:
        alone = classify_event(e.title, None, e.attendees_count, e.event_type)
        if alone.label is not None:
            assert classify(e) == alone, e.title


@pytest.mark.parametrize("calendar", ["community", "sample"])
def test_deep_work_only_where_the_title_says_so(calendar, request):
    for e in request.getfixturevalue(calendar):
        c = classify(e)
        if c.action == "DEEP_WORK":
            assert c.method == "title" and c.tier == "strong", e.title
            assert {"focus", "fokus*", "deep work"} & set(c.matched), e.title


def test_the_demo_persons_calendar_is_read_sensibly(sample):
    got = {e.title: classify(e).label for e in sample}
    expected = {
        "Gym – upper body": "EXERCISE",
        "Hardlopen 10k langs de Vecht": "EXERCISE",
        "Team stand-up": "ADMIN_WORK",
        "1:1 met Sanne": "ADMIN_WORK",
        "Focus: roadmap & specs": "DEEP_WORK",
        "Deep work – launch plan": "DEEP_WORK",
        "Movie night 🍿 Netflix": "BINGE_WATCH",
        "Drinks with the climbing crew": "SOCIALIZE",
        "Team offsite dinner": "SOCIALIZE",
        "Koffie met Noor": "SOCIALIZE",
        "Familie-etentje bij mama en papa": "FAMILY_TIME",
        "Mama jarig 🎉": "FAMILY_TIME",
        "Meditatie (Headspace)": "MEDITATE",
        "Workshop: SQL for PMs": "LEARN",
        "Clase de español (B1)": "LEARN",
        "Me time: lezen op de bank": "ME_TIME",
        "Tandarts": NONE,
    }
    assert {t: got[t] for t in expected} == expected
    counts = Counter(classify(e).label for e in sample)
    assert counts[None] <= 0.02 * len(sample)  # nearly every event of the demo person is read
