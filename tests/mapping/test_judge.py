"""The judge (mapping/judge.py), pure: a block and what was stored in, a judgement or nothing out."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from mapping.judge import Block, Pushed, Seen, Span, judge, judge_block

TZ = ZoneInfo("Europe/Berlin")
DAY = date(2025, 11, 19)


def at(h: int, m: int = 0, d: int = 0) -> datetime:
    return datetime.combine(DAY + timedelta(days=d), time(h, m), tzinfo=TZ)


RUN = Block(1, "EXERCISE", "block", at(17, 30), at(18, 15))
OLD_WORKOUT = Span(at(7, 0, -5), at(7, 40, -5), "running", source="whoop")  # the device logs workouts
LATER = at(9, 0, 1)  # wearable data arrived the next morning


@pytest.mark.parametrize(
    ("workouts", "steps", "want", "conf_min"),
    [
        ([Span(at(17, 42), at(18, 20), "running", source="whoop")], [], "accept", 0.9),  # overlapping
        ([Span(at(18, 50), at(19, 30), "cycling")], [], "accept", 0.5),  # 35 min after
        ([Span(at(19, 30), at(20, 0), "cycling")], [], "ignore", 0.6),  # 75 min after: not the block's
        ([], [Span(at(17, 30), at(18, 0), value=3100.0)], "accept", 0.5),  # a walk: a steps episode
        ([], [Span(at(17, 30), at(18, 0), value=400.0)], "ignore", 0.6),
    ],
)
def test_exercise_is_judged_by_workouts_near_the_block(workouts, steps, want, conf_min):
    seen = Seen(workouts=[OLD_WORKOUT, *workouts], steps=steps, data_until=LATER)
    j = judge_block(RUN, seen, TZ)
    assert j is not None and j.response == want and j.source == "implicit"
    assert conf_min <= j.confidence <= 1.0


def test_a_near_workouts_confidence_falls_with_its_distance():
    confs = [judge_block(RUN, Seen(workouts=[Span(at(18, 15) + timedelta(minutes=g), at(19, 0) + timedelta(minutes=g))],
                                   data_until=LATER), TZ).confidence for g in (0, 20, 40, 59)]
    assert confs == sorted(confs, reverse=True) and confs[0] > confs[-1]


def test_the_evidence_names_the_workout_and_its_times():
    seen = Seen(workouts=[Span(at(17, 42), at(18, 20), "running", source="whoop")], data_until=LATER)
    assert judge_block(RUN, seen, TZ).evidence == ("whoop workout 17:42-18:20 (running)",)


@pytest.mark.parametrize(
    "seen",
    [
        Seen(data_until=LATER),  # the device never logged a workout: it may not log them
        Seen(workouts=[OLD_WORKOUT], data_until=at(18, 0)),  # no data past the block yet
        Seen(workouts=[OLD_WORKOUT], data_until=LATER,  # doing something else useful instead
             events=[Span(at(17, 0), at(19, 0), "FAMILY_TIME")]),
    ],
)
def test_exercise_stays_unknown_when_the_data_cannot_tell(seen):
    assert judge_block(RUN, seen, TZ) is None


BED = Block(2, "SLEEP", "bedtime", at(22, 40), at(7, 0, 1))


@pytest.mark.parametrize(
    ("onset", "want"),
    [
        (at(22, 55), "accept"),  # 15 min after
        (at(23, 10), "accept"),  # 30 min after
        (at(21, 50), "accept"),  # earlier
        (at(23, 25), None),  # 45 min: doubtful, left to the person
        (at(0, 30, 1), "ignore"),  # 110 min later
    ],
)
def test_a_bedtime_is_judged_by_the_onsets_distance(onset, want):
    seen = Seen(sleeps=[Span(onset, at(7, 10, 1), "main")], data_until=LATER)
    j = judge_block(BED, seen, TZ)
    assert (j.response if j else None) == want


@pytest.mark.parametrize(
    ("onset", "want"),
    [
        (at(21, 45), "accept"),  # in bed by its start
        (at(23, 10), "ignore"),  # at the usual time: 100 min after the early night's start
        (at(7, 20, 1), None),  # a sleep in the morning is not the night's onset
    ],
)
def test_an_early_night_is_judged_from_its_start_not_its_end(onset, want):
    """An early night runs from the bedtime brought forward to the morning, like a bedtime:
    the onset is measured from its start (never from the morning it ends at)."""
    early = Block(2, "SLEEP", "early_night", at(21, 30), at(7, 0, 1))
    j = judge_block(early, Seen(sleeps=[Span(onset, onset + timedelta(hours=8), "main")], data_until=LATER), TZ)
    assert (j.response if j else None) == want


def test_an_ignored_bedtimes_confidence_rises_with_the_distance():
    c = [judge_block(BED, Seen(sleeps=[Span(at(22, 40) + timedelta(minutes=m), at(7, 0, 1), "main")]), TZ).confidence
         for m in (60, 90, 150)]
    assert c[0] < c[1] < c[2] <= 0.95


def test_a_nap_counts_only_for_the_nap_and_no_sleep_data_is_unknown():
    nap = Block(3, "SLEEP", "nap", at(14, 0), at(14, 25))
    assert judge_block(nap, Seen(sleeps=[Span(at(14, 5), at(14, 30), "nap")]), TZ).response == "accept"
    assert judge_block(nap, Seen(data_until=LATER), TZ) is None
    assert judge_block(BED, Seen(data_until=LATER), TZ) is None


def test_a_nap_block_spent_walking_about_is_an_ignore():
    """Hourly steps prorated to the block: 600 steps in 14:00-15:00 put 250 in a 25-minute nap
    block (10 a minute): up and about. A desk hour (60 steps) says nothing; a nap still wins."""
    nap = Block(3, "SLEEP", "nap", at(14, 0), at(14, 25))
    walking = [Span(at(14, 0), at(15, 0), value=600.0)]
    j = judge_block(nap, Seen(steps=walking, data_until=LATER), TZ)
    assert (j.response, j.source, j.confidence) == ("ignore", "implicit", 0.6) and "250 steps" in j.evidence[0]
    assert judge_block(nap, Seen(steps=[Span(at(14, 0), at(15, 0), value=60.0)], data_until=LATER), TZ) is None
    napped = Seen(steps=walking, sleeps=[Span(at(14, 5), at(14, 30), "nap")], data_until=LATER)
    assert judge_block(nap, napped, TZ).response == "accept"


def test_no_nap_from_a_device_that_records_naps_is_an_ignore():
    nap = Block(3, "SLEEP", "nap", at(14, 0), at(14, 25))
    earlier = Span(at(13, 30, -6), at(14, 0, -6), "nap")  # her strap logged a nap last week
    j = judge_block(nap, Seen(sleeps=[earlier], data_until=LATER), TZ)
    assert (j.response, j.confidence) == ("ignore", 0.6) and "records naps" in j.evidence[0]
    assert judge_block(nap, Seen(sleeps=[earlier], data_until=at(14, 40)), TZ) is None  # no data past it yet
    old = Span(at(13, 30, -40), at(14, 0, -40), "nap")
    assert judge_block(nap, Seen(sleeps=[old], data_until=LATER), TZ) is None  # not lately: maybe not logged


@pytest.mark.parametrize("action", ["FAMILY_TIME", "SOCIALIZE", "LEARN", "MEDITATE"])
def test_calendar_visible_actions_by_an_event_of_that_class(action):
    b = Block(4, action, "block", at(18, 0), at(19, 30))
    near = Seen(events=[Span(at(18, 30), at(20, 0), action)])
    other = Seen(events=[Span(at(18, 30), at(20, 0), "DEEP_WORK" if action != "DEEP_WORK" else "LEARN")])
    assert judge_block(b, near, TZ).response == "accept"
    assert judge_block(b, other, TZ) is None  # the calendar was never read after the block
    assert judge_block(b, Seen(data_until=LATER), TZ) is None


def _kept(action: str, n: int) -> list[Span]:
    """``n`` events of ``action`` of the person's in the weeks before DAY."""
    return [Span(at(19, 0, -2 - 3 * k), at(20, 30, -2 - 3 * k), action) for k in range(n)]


@pytest.mark.parametrize("action", ["FAMILY_TIME", "SOCIALIZE", "LEARN", "MEDITATE"])
def test_no_event_where_the_person_keeps_them_is_a_doubtful_ignore(action):
    """A person who keeps this class in their calendar (4+ in 28 days), a calendar read after
    the block, and nothing of it near: an ignore at confidence 0.5, saying why."""
    from mapping.judge import ABSENT_CONFIDENCE, KEEPS_SURE

    b = Block(4, action, "block", at(18, 0), at(19, 30))
    j = judge_block(b, Seen(events=_kept(action, KEEPS_SURE), calendar_read_at=LATER), TZ)
    assert j is not None and (j.response, j.source, j.confidence) == ("ignore", "implicit", ABSENT_CONFIDENCE)
    assert f"{KEEPS_SURE} in 28 days" in j.evidence[0] and "18:00-19:30" in j.evidence[0]
    assert judge_block(b, Seen(events=_kept(action, 9), calendar_read_at=LATER), TZ).confidence == ABSENT_CONFIDENCE
    # unknown: the calendar not read since the block, or something else of theirs instead
    assert judge_block(b, Seen(events=_kept(action, 6), calendar_read_at=at(18, 30)), TZ) is None
    assert judge_block(b, Seen(events=_kept(action, 6), calendar_read_at=None), TZ) is None
    instead = Span(at(17, 45), at(19, 30), "EXERCISE" if action != "EXERCISE" else "LEARN")
    assert judge_block(b, Seen(events=[*_kept(action, 6), instead], calendar_read_at=LATER), TZ) is None


@pytest.mark.parametrize("action", ["FAMILY_TIME", "LEARN"])
def test_an_absence_counts_less_the_fewer_such_events_the_person_keeps(action):
    """Fewer than four such events in 28 days: still an ignore, at a share of 0.5 by the count
    (one who logs it rarely may have done it unlogged); none at all: never read as not done."""
    from mapping.judge import ABSENT_CONFIDENCE

    b = Block(4, action, "block", at(18, 0), at(19, 30))
    conf = []
    for n in (1, 2, 3, 4):
        j = judge_block(b, Seen(events=_kept(action, n), calendar_read_at=LATER), TZ)
        assert j is not None and j.response == "ignore" and f"{n} in 28 days" in j.evidence[0]
        conf.append(j.confidence)
    assert conf == sorted(set(conf)) and 0 < conf[0] and conf[-1] == ABSENT_CONFIDENCE
    assert judge_block(b, Seen(events=_kept(action, 0), calendar_read_at=LATER), TZ) is None
    # events of another class do not count as keeping this one
    other = "SOCIALIZE" if action != "SOCIALIZE" else "LEARN"
    assert judge_block(b, Seen(events=_kept(other, 6), calendar_read_at=LATER), TZ) is None
    # events older than 28 days say nothing about what the person keeps now
    old = [Span(at(19, 0, -30 - k), at(20, 0, -30 - k), action) for k in range(6)]
    assert judge_block(b, Seen(events=old, calendar_read_at=LATER), TZ) is None


def test_work_blocks_by_tasks_or_focus_events_with_lower_confidence():
    b = Block(5, "DEEP_WORK", "block", at(9, 0), at(10, 30))
    done = judge_block(b, Seen(tasks=[Span(at(10, 10), at(10, 10))]), TZ)
    focus = judge_block(b, Seen(events=[Span(at(9, 0), at(10, 0), "DEEP_WORK")]), TZ)
    assert done.response == "accept" and done.confidence <= 0.6
    assert focus.response == "accept" and focus.confidence <= 0.6
    assert judge_block(b, Seen(data_until=LATER), TZ) is None
    assert judge_block(Block(6, "BINGE_WATCH", "block", at(20, 0), at(21, 0)), Seen(data_until=LATER), TZ) is None
    # a meeting in a deep-work block is the meeting (something else instead), and a focus hold
    # over a sliver of the block says nothing
    assert judge_block(b, Seen(events=[Span(at(9, 0), at(10, 0), "ADMIN_WORK")]), TZ) is None
    assert judge_block(b, Seen(events=[Span(at(10, 10), at(11, 0), "DEEP_WORK")]), TZ) is None


def test_blocks_whose_time_has_not_passed_are_not_judged():
    seen = Seen(workouts=[Span(at(17, 42), at(18, 20))], data_until=LATER)
    assert judge([RUN], seen, at(18, 0)) == []
    assert [j.recommendation_id for j in judge([RUN], seen, at(18, 30))] == [1]


# -- the calendar as the answer surface ---------------------------------------------------------
PUSHED = Pushed(1, "rhmblockabc", RUN.start, RUN.end, at(7, 0))


def test_a_deleted_pushed_block_is_an_ignore_once_the_calendar_was_synced():
    seen = Seen(pushed={1: PUSHED}, calendar_synced_at=at(20, 0))
    j = judge_block(RUN, seen, TZ)
    assert (j.response, j.source) == ("ignore", "calendar")
    # not synced since the push: nothing known
    assert judge_block(RUN, Seen(pushed={1: PUSHED}, calendar_synced_at=at(6, 0)), TZ) is None


def test_a_moved_block_is_an_accept_at_the_other_time_read_against_the_data_there():
    moved = Span(at(19, 0), at(19, 45))
    seen = Seen(pushed={1: PUSHED}, rhythm_events={"rhmblockabc": moved}, calendar_synced_at=at(20, 0),
                workouts=[OLD_WORKOUT, Span(at(19, 5), at(19, 40), "running")], data_until=LATER)
    j = judge_block(RUN, seen, TZ)
    assert (j.response, j.source, j.moved) == ("accept", "calendar", (moved.start, moved.end))
    assert any("19:00-19:45" in e for e in j.evidence) and any("workout 19:05-19:40" in e for e in j.evidence)


def test_a_deleted_block_done_anyway_is_an_accept():
    seen = Seen(pushed={1: PUSHED}, calendar_synced_at=at(20, 0), workouts=[Span(at(17, 40), at(18, 10))])
    assert judge_block(RUN, seen, TZ).response == "accept"


def test_a_kept_block_is_what_the_data_says():
    kept = Seen(pushed={1: PUSHED}, rhythm_events={"rhmblockabc": Span(RUN.start, RUN.end)},
                calendar_synced_at=at(20, 0), workouts=[OLD_WORKOUT], data_until=LATER)
    j = judge_block(RUN, kept, TZ)
    assert (j.response, j.source) == ("ignore", "implicit")
