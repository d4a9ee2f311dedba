"""The day planner (agent.day), pure: plain data in, a plan out; no database.

A generated busy Wednesday in Berlin after two short nights: a recurring stand-up, a 1:1, an
offsite that fills the afternoon, choir in the evening, a transparent hold, a cancelled
meeting, an all-day holiday; and varied generated days (hypothesis) for the invariants.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.belief import BeliefState
from agent.day import (
    Answer,
    CalendarEvent,
    DayInputs,
    DayPlanner,
    Night,
    PersonFacts,
    with_model_pick,
)
from agent.day.blocks import DURATIONS
from agent.day.calendar import frame_day, sleep_habits
from common.records import ACTIONS, METERS

TZ = ZoneInfo("Europe/Berlin")
WED = date(2025, 11, 19)


def at(d: date, h: int, m: int = 0) -> datetime:
    return datetime.combine(d, time(h, m), tzinfo=TZ)


def busy_events(day: date = WED) -> list[CalendarEvent]:
    nxt = day + timedelta(days=1)
    return [
        CalendarEvent(at(day, 9), at(day, 9, 15), "Stand-up", "ADMIN_WORK"),
        CalendarEvent(at(day, 10), at(day, 10, 30), "1:1 with Sam", "ADMIN_WORK"),
        CalendarEvent(at(day, 12), at(day, 18), "Offsite", None),
        CalendarEvent(at(day, 19), at(day, 21), "Choir rehearsal", "SOCIALIZE"),
        CalendarEvent(at(day, 8), at(day, 8, 45), "Focus hold", "DEEP_WORK", transparency="transparent"),
        CalendarEvent(at(day, 14), at(day, 15), "Budget sync", "ADMIN_WORK", status="cancelled"),
        CalendarEvent(at(day, 16), at(day, 17), "Declined review", "ADMIN_WORK", self_response="declined"),
        CalendarEvent(at(day, 0), at(nxt, 0), "Buß- und Bettag", None, all_day=True),
        CalendarEvent(at(day, 7, 30), at(day, 8), "Rhythm: focus", "DEEP_WORK", rhythm_block=True),
        CalendarEvent(at(nxt, 8), at(nxt, 9), "Early call", "ADMIN_WORK"),
    ]


def nights(day: date = WED, short: int = 2, n: int = 21) -> list[Night]:
    out = []
    for i in range(n, 0, -1):
        d = day - timedelta(days=i - 1)
        if i <= short:
            out.append(Night(at(d, 1, 15), at(d, 6, 30), 290.0 + 10 * i))
        else:
            out.append(Night(at(d - timedelta(days=1), 23, 15), at(d, 7, 0), 445.0 - 5 * (i % 3)))
    return out


def inputs(**over) -> DayInputs:
    ns = nights()
    facts = PersonFacts(
        sleep_min={x.wake.date(): x.sleep_min for x in ns},
        hrv_ms={WED - timedelta(days=i): (34.0 if i == 0 else 52.0 + i % 4) for i in range(28)},
        resting_hr={WED - timedelta(days=i): (61.0 if i == 0 else 55.0 + i % 2) for i in range(28)},
        meters={"vitality": 0.31, "cognition": 0.44, "progress": None, "serenity": 0.52, "connection": 0.6},
        meters_when="last night",
    )
    base = dict(day=WED, tz=TZ, events=busy_events(), nights=ns, facts=facts,
                meters=[0.31, 0.44, 0.5, 0.52, 0.6], belief=BeliefState(noise_sd=0.08), now=at(WED, 6, 45))
    base.update(over)
    return DayInputs(**base)


def _overlaps(a0, a1, b0, b1) -> bool:
    return a0 < b1 and b0 < a1


def test_the_day_as_it_is():
    dp = DayPlanner(inputs()).plan()
    titles = [c.title for c in dp.frame.commitments]
    assert titles == ["Stand-up", "1:1 with Sam", "Offsite", "Choir rehearsal"]  # not the hold,
    # the cancelled or declined ones, the all-day holiday, Rhythm's own block or tomorrow's call
    assert dp.frame.wake.time() == time(7, 0) and dp.frame.bed.time() == time(23, 15)  # her own nights
    assert dp.fixed == {"afternoon": "ADMIN_WORK"}  # the offsite: unclassified, planned as work-like
    assert any(n.startswith("afternoon: your calendar decides (Offsite 12:00-18:00)") for n in dp.notes)
    for w in dp.frame.free:
        assert w.minutes >= 30 and not any(_overlaps(w.start, w.end, c.start, c.end) for c in dp.frame.commitments)


def test_blocks_fit_the_day_with_evidence_and_effects():
    dp = DayPlanner(inputs()).plan()
    assert {b.slot for b in dp.blocks} == {"morning", "evening", "night"}  # the afternoon is fixed
    for b in dp.blocks:
        assert b.start < b.end and b.action in ACTIONS
        if b.kind != "bedtime":
            assert not any(_overlaps(b.start, b.end, c.start, c.end) for c in dp.frame.commitments), b
            assert any(w.start <= b.start and b.end <= w.end for w in dp.frame.free), b
            least, _, most = DURATIONS[b.action]
            assert least <= (b.end - b.start).total_seconds() / 60 <= max(most, 120)
        assert b.evidence and all(any(ch.isdigit() for ch in e) for e in b.evidence[:2])
        assert b.expected_effect and set(b.expected_effect) <= set(METERS)
        assert b.rationale and "Expected:" in b.rationale
    night = [b for b in dp.blocks if b.slot == "night"][0]
    assert night.action == "SLEEP" and night.kind == "bedtime" and night.rationale.startswith("In bed by")
    assert night.start >= at(WED, 21)  # never before the choir ends


def test_the_evidence_uses_her_numbers_against_her_baseline():
    dp = DayPlanner(inputs()).plan()
    text = " ".join(e for b in dp.blocks for e in b.evidence)
    assert "two short nights" in text or "slept 5 h" in text
    assert "HRV 34 ms vs your" in text or "resting heart rate 61 bpm vs your" in text


def test_tomorrows_early_start_moves_the_bedtime():
    late = DayPlanner(inputs(events=[e for e in busy_events() if e.title != "Early call"])).plan()
    early_events = [*busy_events()[:-1], CalendarEvent(at(WED + timedelta(days=1), 6, 0),
                                                        at(WED + timedelta(days=1), 7, 0), "Flight", None)]
    early = DayPlanner(inputs(events=early_events)).plan()
    bed = {p: [b for b in d.blocks if b.kind == "bedtime"][0].start for p, d in (("late", late), ("early", early))}
    assert bed["early"] < bed["late"]
    assert bed["early"] <= at(WED + timedelta(days=1), 5, 0) - timedelta(minutes=420)


def test_ignored_suggestions_change_the_plan():
    first = DayPlanner(inputs()).plan()
    answers = [Answer(WED - timedelta(days=k), b.slot, b.action, "ignore")
               for k in range(1, 4) for b in first.blocks if b.kind != "bedtime"]
    again = DayPlanner(inputs(answers=answers)).plan()
    before = {b.slot: b.action for b in first.blocks if b.kind != "bedtime"}
    after = {b.slot: b.action for b in again.blocks if b.kind != "bedtime"}
    assert before and any(after.get(s) != a for s, a in before.items())
    text = " ".join(e for b in again.blocks for e in b.evidence)
    assert "you ignored 3 " in text  # the answers behind the change are said


def test_no_end_of_week_cliff_on_sunday_night():
    """A Sunday is planned like any day: the night is for sleeping, and nothing favours work
    just because a simulated week would end."""
    sun = date(2025, 11, 23)
    dp = DayPlanner(inputs(day=sun, events=[], nights=nights(sun, short=0), now=None)).plan()
    assert [b for b in dp.blocks if b.slot == "night"][0].action == "SLEEP"
    assert dp.horizon[-1][0] == (sun + timedelta(days=1)).isoformat()  # it looks past Sunday


def test_a_models_pick_goes_through_the_same_checks():
    planner = DayPlanner(inputs())
    dp = planner.plan()
    morning = [b for b in dp.blocks if b.slot == "morning"][0]
    ok, note = with_model_pick(planner, dp, "morning", "SOCIALIZE", "llm:student")
    assert not ok and "cannot hold" in note  # a workday morning: no party between meetings
    assert [b for b in dp.blocks if b.slot == "morning"][0] == morning
    ok, note = with_model_pick(planner, dp, "afternoon", "DEEP_WORK", "llm:student")
    assert not ok and "no open time" in note  # the offsite owns the afternoon
    ok, note = with_model_pick(planner, dp, "morning", morning.action, "llm:student")
    assert ok and [b for b in dp.blocks if b.slot == "morning"][0].chosen_by == "llm:student"


def test_no_sleep_history_falls_back_to_default_hours_and_says_so():
    dp = DayPlanner(inputs(nights=[], facts=PersonFacts())).plan()
    assert dp.frame.wake.time() == time(7, 0) and dp.frame.bed.time() == time(23, 0)
    assert any("no sleep history" in n for n in dp.notes)
    assert all(b.evidence for b in dp.blocks)


def test_sleep_habits_read_bedtimes_after_midnight_as_late_evening():
    ns = [Night(at(WED - timedelta(days=i), 0, 40), at(WED - timedelta(days=i), 8, 10), 450) for i in range(10)]
    h = sleep_habits(ns, TZ)
    assert (h.bed, h.wake) == (time(0, 40), time(8, 10))
    f = frame_day(WED, TZ, [], h)
    assert f.bed == at(WED + timedelta(days=1), 0, 40)


DAYS = st.lists(
    st.tuples(st.integers(6, 22), st.sampled_from([0, 15, 30, 45]), st.integers(15, 240),
              st.sampled_from([*ACTIONS, None]), st.sampled_from([None, "transparent", "cancelled"])),
    max_size=9,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=DAYS, now_h=st.sampled_from([None, 6, 9, 13, 19]))
def test_any_day_blocks_never_overlap_commitments(events, now_h):
    evs = []
    for h, m, dur, action, flag in events:
        s = at(WED, h, m)
        evs.append(CalendarEvent(s, s + timedelta(minutes=dur), f"e{h}{m}", action,
                                 transparency="transparent" if flag == "transparent" else None,
                                 status="cancelled" if flag == "cancelled" else None))
    now = None if now_h is None else at(WED, now_h)
    dp = DayPlanner(inputs(events=evs, now=now, n_samples=3)).plan()
    for b in dp.blocks:
        if now is not None and b.kind != "bedtime":
            assert b.start >= now
        if b.kind != "bedtime":
            assert not any(_overlaps(b.start, b.end, c.start, c.end) for c in dp.frame.commitments)
        assert b.evidence and b.expected_effect
    fixed = set(dp.fixed)
    assert not fixed & {b.slot for b in dp.blocks}


@pytest.mark.parametrize("offset_days", [0, 3, 5])
def test_busy_week_days(offset_days):
    """Every day of the week plans (Monday to Sunday), fixed slots get no block."""
    d = WED + timedelta(days=offset_days)
    dp = DayPlanner(inputs(day=d, events=busy_events(d), nights=nights(d), now=None)).plan()
    assert "afternoon" in dp.fixed and all(b.slot != "afternoon" for b in dp.blocks)
