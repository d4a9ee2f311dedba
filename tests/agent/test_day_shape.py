"""The day's real shape (issue 36), pure: a night-shift person's day sleep is planned as SLEEP
and free of blocks, a shift night has no bedtime, one bedtime a night, durations are elapsed
time across DST, and "last night" / "no X in 14 days" are true by the person's own history."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent.belief import BeliefState
from agent.day import CalendarEvent, DayInputs, DayPlanner, Night, PersonFacts
from agent.day.calendar import Commitment, elapsed_min, frame_day, shift_patterns, sleep_habits
from agent.day.evidence import since_fact, sleep_fact
from agent.day.plan import Block, _one_at_a_time

NY = ZoneInfo("America/New_York")
DAY = date(2025, 2, 26)  # a Wednesday: night shift Tuesday, Wednesday and Thursday


def at(d: date, h: int, m: int = 0, tz=NY) -> datetime:
    return datetime.combine(d, time(h, m), tzinfo=tz)


def after_hours(t: datetime, hours: float) -> datetime:
    """``hours`` of elapsed time after ``t`` (what a 13-hour shift is)."""
    return (t.astimezone(UTC) + timedelta(hours=hours)).astimezone(t.tzinfo)


def nurse(day: date = DAY, weeks: int = 4, lag_min: int = 40, sleep_h: float = 6.0):
    """A night nurse's calendar and sleeps: runs of three nights 19:00 (13 h), four days off;
    after each night she sleeps ``lag_min`` after it ends for ``sleep_h``; otherwise 23:00-07:00,
    but 21:30 on the day after the last night of a run."""
    events, nights = [], []
    first = day - timedelta(days=7 * weeks)
    for i in range(7 * weeks + 3):
        d = first + timedelta(days=i)
        on = (d - day).days % 7 in (6, 0, 1)  # the day before, the day and the day after
        prev_on = (d - day).days % 7 in (0, 1, 2)
        if on:
            s = at(d, 19)
            events.append(CalendarEvent(s, after_hours(s, 13), "Turno de noche", "ADMIN_WORK"))
        if prev_on:
            end = after_hours(at(d - timedelta(days=1), 19), 13)
            bed = end + timedelta(minutes=lag_min)
            nights.append(Night(bed, bed + timedelta(hours=sleep_h), sleep_h * 60 - 20))
        if not on:  # the transition day after the last night of a run: an early night
            h, m = (21, 30) if (d - day).days % 7 == 2 else (23, 0)
            nights.append(Night(at(d, h, m), at(d + timedelta(days=1), 7), 450.0))
    return events, nights


def planner_inputs(events, nights, day=DAY, now=None, **over) -> DayInputs:
    facts = PersonFacts(meters={"vitality": 0.4, "cognition": 0.5, "progress": 0.5, "serenity": 0.5,
                                "connection": 0.5})
    now = now or at(day, 6)
    base = dict(day=day, tz=NY, events=[e for e in events if day - timedelta(days=1) <= e.start.date() <= day + timedelta(days=2)],
                nights=nights, facts=facts, meters=[0.4, 0.5, 0.5, 0.5, 0.5], belief=BeliefState(noise_sd=0.08),
                now=now, past_events=[e for e in events if e.start.date() < day - timedelta(days=1)])
    base.update(over)
    return DayInputs(**base)


def test_a_night_shift_persons_day_sleep_is_planned_as_sleep_and_free_of_blocks():
    events, nights = nurse()
    dp = DayPlanner(planner_inputs(events, nights)).plan()
    shift_end = after_hours(at(DAY - timedelta(days=1), 19), 13)  # 08:00 this morning
    day_sleep = [b for b in dp.blocks if b.kind == "day_sleep"]
    assert len(day_sleep) == 1 and day_sleep[0].action == "SLEEP"
    sleep = day_sleep[0]
    # her own pattern: asleep 40 min after the end, for six hours
    assert abs(elapsed_min(shift_end, sleep.start) - 40) <= 5
    assert 6 * 60 - 5 <= elapsed_min(sleep.start, sleep.end) <= 6 * 60 + 35
    assert "night shifts" in sleep.rationale
    awake = [b for b in dp.blocks if b.action != "SLEEP"]
    assert awake, "the afternoon after the day sleep still gets a suggestion"
    for b in awake:
        assert b.start >= sleep.end  # never while she sleeps
        assert b.end <= at(DAY, 19)  # nor over tonight's shift
    # tonight is a shift: no bedtime, the day ends when it starts, and it reads sensibly
    assert not [b for b in dp.blocks if b.kind in ("bedtime", "early_night")]
    assert dp.frame.bed == at(DAY, 19) and dp.frame.wake == sleep.end < dp.frame.bed
    assert any("no bedtime tonight" in n for n in dp.notes)
    assert "morning" not in dp.fixed or dp.fixed["morning"] == "SLEEP"


def test_a_new_user_after_a_night_shift_sleeps_soon_after_it_ends():
    events, _ = nurse()
    dp = DayPlanner(planner_inputs(events, [])).plan()
    sleep = next(b for b in dp.blocks if b.kind == "day_sleep")
    assert sleep.start == at(DAY, 8, 30)  # half an hour after 08:00
    assert all(b.start >= sleep.end for b in dp.blocks if b.action != "SLEEP")


def test_the_transition_day_has_an_early_night_and_no_block_over_the_morning_sleep():
    events, nights = nurse()
    day = DAY + timedelta(days=2)  # after the last night of the run
    dp = DayPlanner(planner_inputs(events, nights, day=day)).plan()
    sleep = next(b for b in dp.blocks if b.kind == "day_sleep")
    bed = next(b for b in dp.blocks if b.kind == "bedtime")
    assert all(b.start >= sleep.end for b in dp.blocks if b.action != "SLEEP")
    assert bed.start == at(day, 21, 30)  # her own transition night, not her usual 23:00
    assert "early night after your last night shift" in bed.rationale


def test_a_thirteen_hour_shift_across_dst_is_thirteen_hours():
    for start in (at(date(2025, 3, 8), 20), at(date(2025, 11, 1), 19)):  # spring forward, fall back
        end = after_hours(start, 13)
        c = Commitment(start, end, "Night shift", "ADMIN_WORK", "calendar")
        assert c.minutes == 13 * 60
        assert (end - start) != timedelta(hours=13)  # Python's wall-clock difference is not
        ev = CalendarEvent(start, end, "Night shift", "ADMIN_WORK")
        day = start.date() + timedelta(days=1)
        dp = DayPlanner(planner_inputs([ev], [], day=day, now=at(day, 6))).plan()
        texts = [e for b in dp.blocks for e in b.evidence]
        assert not any("of meetings" in t for t in texts)
        shift = [t for t in texts if t.startswith("a ") and "shift" in t]
        assert all(t.startswith("a 13 h 00 shift") for t in shift)


def test_one_bedtime_a_night_an_early_night_is_the_bedtime_brought_forward():
    tz = NY
    bed = Block("night", "SLEEP", at(DAY, 22, 50), at(DAY + timedelta(days=1), 6, 30), "bedtime", "In bed by 22:50", [], {})
    early = Block("evening", "SLEEP", at(DAY, 21, 50), at(DAY, 22, 50), "early_night",
                  "An early night: in bed by 21:50, not your usual bedtime 22:50", [], {})
    out = _one_at_a_time([early, bed], [])
    assert len(out) == 1  # one sleep block for the night, never a wind-down block beside a bedtime
    (e,) = out
    assert (e.kind, e.slot, e.start, e.end) == ("early_night", "night", early.start, bed.end)
    assert "in bed by 21:50" in e.rationale and e.start.tzinfo is tz
    # over a commitment once brought forward: the usual bedtime stays, never over it
    held = [Commitment(at(DAY, 21, 30), at(DAY, 22, 0), "Call", "ADMIN_WORK", "calendar")]
    assert [(b.kind, b.start) for b in _one_at_a_time([early, bed], held)] == [("bedtime", bed.start)]


def test_day_sleeps_are_no_bedtime_and_the_pattern_is_the_persons_own():
    events, nights = nurse(lag_min=75, sleep_h=5.5)
    habits = sleep_habits(nights, NY)
    assert habits.bed == time(23, 0) and habits.wake == time(7, 0)  # night sleeps only
    p = shift_patterns(events, nights, NY)
    assert p.after_of >= 8 and p.after_seen == p.after_of
    assert abs(p.after_lag_min - 75) < 1
    frame = frame_day(DAY, NY, events, habits, now=at(DAY, 6), patterns=p)
    assert frame.sleeps and frame.sleeps[0].start == after_hours(at(DAY - timedelta(days=1), 19), 13) + timedelta(
        minutes=75)
    assert 0 in frame.asleep and frame.fixed[0] == "SLEEP"


def test_last_night_is_the_last_main_sleep_and_a_day_sleep_says_when():
    _, nights = nurse()
    # at 16:00 on the day, the last main sleep is this morning's day sleep, not a night
    f = sleep_fact(nights, at(DAY, 16), NY)
    assert f is not None and f.text.startswith("your last sleep 5 h 40 (Wed 08:40-14:40)")
    assert "your usual day sleep" in f.text
    # on a day off, it is last night
    g = sleep_fact(nights, at(DAY + timedelta(days=3), 8), NY)
    assert g is not None and g.text.startswith("slept 7 h 30 last night")


def test_no_meditation_in_14_days_counts_the_calendars_meditation_class():
    day = DAY
    cls = CalendarEvent(at(day - timedelta(days=3), 10), at(day - timedelta(days=3), 10, 45), "Meditación",
                        "MEDITATE")
    recent = [(day - timedelta(days=3), "morning", "ADMIN_WORK")]  # meetings dominate that slot
    f = since_fact("MEDITATE", recent, day, events=[cls], before=at(day, 6))
    assert f is not None and f.text == "last meditate 3 days ago (Sun morning)"
    # a hold is not a meditation; nor is one after now
    hold = CalendarEvent(cls.start, cls.end, "maybe meditate?", "MEDITATE", done=False)
    later = CalendarEvent(at(day, 9), at(day, 10), "Meditación", "MEDITATE")
    f = since_fact("MEDITATE", recent, day, events=[hold, later], before=at(day, 6))
    assert f is not None and f.text == "no meditate in your last 14 days"


def test_the_bedtime_before_an_early_start_counts_the_dst_nights_lost_hour():
    """Spring forward (New York, 9 March 2025): a 07:00 start after a 23-hour day. Eight
    hours of sleep plus 15 minutes to fall asleep and an hour to get ready is 9 h 15 of
    elapsed time before 07:00 EDT: 20:45 EST, not the wall clock's 21:45."""
    day = date(2025, 3, 8)
    nights_ = [Night(at(day - timedelta(days=i), 23), at(day - timedelta(days=i - 1), 7), 480.0) for i in range(1, 15)]
    start = at(day + timedelta(days=1), 7)
    ev = CalendarEvent(start, after_hours(start, 8), "Turno de día", "ADMIN_WORK")
    dp = DayPlanner(planner_inputs([ev], nights_, day=day, now=at(day, 6))).plan()
    bed = next(b for b in dp.blocks if b.kind == "bedtime")
    assert elapsed_min(bed.start, start) >= 8 * 60 + 15 + 60
    assert bed.start == at(day, 20, 45)
    assert "07:00 start" in bed.rationale


def test_the_last_time_is_the_latest_slot_of_the_day_not_the_first_by_name():
    # Wednesday's morning and afternoon: the afternoon is the later one ("afternoon" sorts
    # before "morning" by name)
    day = DAY + timedelta(days=1)
    recent = [(DAY, "morning", "LEARN"), (DAY, "afternoon", "LEARN"), (DAY - timedelta(days=2), "evening", "LEARN")]
    f = since_fact("LEARN", recent, day)
    assert f.text == f"last learn yesterday ({DAY:%a} afternoon)"
