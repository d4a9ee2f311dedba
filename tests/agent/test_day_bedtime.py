"""A bedtime the person never follows is not repeated word for word (issue 38), pure."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.day.blocks import bedtime, meet_where_they_are
from agent.day.calendar import SleepHabits, frame_day

TZ = ZoneInfo("Europe/Berlin")
DAY = date(2025, 11, 19)


def at(h: int, m: int = 0, d: int = 0) -> datetime:
    return datetime.combine(DAY + timedelta(days=d), time(h, m), tzinfo=TZ)


HABITS = SleepHabits(wake=time(7, 30), bed=time(23, 0), need_min=450.0, nights=21, source="history")


def onsets(h: int, m: int, n: int = 5) -> list[datetime]:
    return [datetime.combine(DAY - timedelta(days=k), time(h, m), tzinfo=TZ) for k in range(n, 0, -1)]


def tonight(recent: list[datetime]) -> tuple[datetime, str]:
    frame = frame_day(DAY, TZ, [], HABITS)
    return bedtime(frame, None, HABITS, at(7, 30, 1), recent_beds=recent)


def test_she_goes_to_bed_at_23_45_every_night_so_the_plan_offers_23_25_and_says_why():
    usual, _ = tonight([])
    assert usual == at(23, 0)
    bed, reason = tonight(onsets(23, 45))
    assert at(23, 15) <= bed <= at(23, 30)  # 15-30 min before her real bedtime, not 45
    assert "23:45" in reason and "earlier" in reason


@pytest.mark.parametrize(
    ("recent", "moved"),
    [
        (onsets(23, 45), True),
        ([*onsets(23, 45, 4), at(23, 5, -1)], False),  # she followed it once lately: keep it
        (onsets(23, 20), False),  # within 30 min: followed closely enough
        (onsets(23, 45, 2), False),  # two nights say too little
        (onsets(1, 30), False),  # 01:30 minus 20 min would cut into her 7 h 30 before 07:30
    ],
)
def test_when_the_bedtime_meets_the_person(recent, moved):
    bed, _ = tonight(recent)
    assert (bed != at(23, 0)) is moved


def test_never_past_what_the_sleep_need_allows():
    real = [datetime.combine(DAY - timedelta(days=k), time(0, 10), tzinfo=TZ) for k in range(5, 0, -1)]
    met = meet_where_they_are(at(23, 0), at(23, 45), real, TZ)
    assert met is None  # 23:50 would be after the latest bedtime 23:45
    assert meet_where_they_are(at(23, 0), at(23, 59), real, TZ)[0] == at(23, 50)


def test_a_bedtime_she_keeps_is_not_walked_earlier_night_after_night():
    """She goes to bed at 23:45 of her own accord and keeps an offer within 30 minutes of it
    (asleep 5 min after it). Nights that kept Rhythm's bedtime are Rhythm's, not hers: two
    weeks on, the offer is still 15-30 min before 23:45 and she still keeps it."""
    real = time(23, 45)
    nights = onsets(23, 45)
    offers: list[datetime] = []
    for k in range(14):
        day = DAY + timedelta(days=k)
        frame = frame_day(day, TZ, [], HABITS)
        bed, _ = bedtime(frame, None, HABITS, datetime.combine(day + timedelta(days=1), time(7, 30), tzinfo=TZ),
                         recent_beds=nights[-14:], suggested=offers)
        own = datetime.combine(day, real, tzinfo=TZ)
        assert own - timedelta(minutes=30) <= bed <= own - timedelta(minutes=15), (k, bed)
        offers.append(bed)
        nights.append(bed + timedelta(minutes=5))  # she keeps it


def test_her_own_nights_still_say_where_her_bedtime_is():
    """Among nights that kept Rhythm's offer, the ones she went to bed on her own say where
    she is now: later than the offer by more than 30 min, the offer follows her."""
    kept = [datetime.combine(DAY - timedelta(days=k), time(23, 30), tzinfo=TZ) for k in range(6, 2, -1)]
    offers = [t - timedelta(minutes=5) for t in kept]
    own = [datetime.combine(DAY - timedelta(days=k), time(0, 20), tzinfo=TZ) for k in (1, 0)]
    met = meet_where_they_are(at(23, 0), at(23, 59, 1), [*kept, *own], TZ, offers)
    assert met == (at(0, 0, 1), at(0, 20, 1))
    # every night kept it: the last offer stands
    assert meet_where_they_are(at(23, 0), at(23, 59), kept, TZ, offers)[0] == at(23, 25)
    # the same nights with no offers known: read as her own (the median, 23:30)
    assert meet_where_they_are(at(23, 0), at(23, 59), kept, TZ)[0] == at(23, 10)


# -- a block moved in the calendar: a time preference --------------------------------------------
def test_a_moved_time_is_where_the_next_block_of_that_action_goes():
    from agent.day.blocks import place, prefer_time

    frame = frame_day(DAY, TZ, [], HABITS)
    p = place(frame, 2, "EXERCISE")  # the evening
    assert p is not None and p.start.time() != time(19, 30)
    moved = prefer_time(frame, 2, p, "EXERCISE", time(19, 30))
    assert moved.start == at(19, 30) and moved.end - moved.start == p.end - p.start
    # outside the slot's free time: as near as it allows, never outside it
    late = prefer_time(frame, 2, p, "EXERCISE", time(23, 50))
    assert late.end <= frame.bed - timedelta(minutes=90) and late.start >= p.start


def test_the_planner_places_a_moved_action_at_the_persons_time_and_says_so():
    from agent.day import DayPlanner
    from tests.agent.test_day import WED, busy_events, inputs

    # a free morning and evening (only the afternoon's offsite), so a block has time to spare
    events = [e for e in busy_events() if not (e.start.date() == WED and not 12 <= e.start.hour < 18)]
    first = DayPlanner(inputs(events=events)).plan()
    # a block with 20 minutes to spare in its free window, wind-down before bed aside (so it can move there)
    blocks = [b for b in first.blocks if b.kind == "block"
              and any(w.start <= b.start and b.end + timedelta(minutes=50) <= w.end for w in first.frame.free)]
    assert blocks
    b = blocks[0]
    wanted = (b.start + timedelta(minutes=20)).astimezone(b.start.tzinfo).time()
    again = DayPlanner(inputs(events=events, preferred_times={b.action: wanted})).plan()
    same = next(x for x in again.blocks if x.slot == b.slot)
    assert (same.action, same.start.time(), same.end - same.start) == (b.action, wanted, b.end - b.start)
    assert any("you moved Rhythm's" in e and f"{wanted:%H:%M}" in e for e in same.evidence)


def test_day_sleeps_after_night_shifts_say_nothing_about_a_bedtime():
    days = [datetime.combine(DAY - timedelta(days=k), time(8, 30), tzinfo=TZ) for k in range(5, 0, -1)]
    assert meet_where_they_are(at(23, 0), at(23, 59), days, TZ) is None
    assert meet_where_they_are(at(23, 0), at(23, 59), [*days, *onsets(23, 45)], TZ) == (at(23, 25), at(23, 45))
