"""A generated person with planted habits, written through the real storage writer.

Amsterdam, 100 days from Monday 1 April 2024 (summer time, UTC+02:00). Every day: a night's
sleep (about 7 h 30), HRV and resting heart rate at waking, steps, Garmin stress in the
morning, afternoon and evening; on weekdays a stand-up and a focus block. On random days
(seeded, independent of each other and of the weekday):

- an evening run 19:00-20:00 (~35 % of days): the next morning's stress is lower (serenity
  up) and the next night's HRV higher;
- a late meeting 19:00-20:30 with four people, "Project sync US" (~30 % of weekdays): the
  next night is an hour shorter (vitality down the next morning);
- choir rehearsal 19:30-21:30, "Choir rehearsal" (~30 % of days): a social evening
  (connection up);
- a haircut at 12:00 (~25 % of days): no effect at all (the control).

``planted_days`` says which days got what, for the tests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from common.records import Event, Sample, SleepSession, Workout

TZ = ZoneInfo("Europe/Amsterdam")
FIRST = date(2024, 4, 1)
DAYS = 100
LAST = FIRST + timedelta(days=DAYS - 1)


@dataclass
class Planted:
    run: set[date] = field(default_factory=set)
    late: set[date] = field(default_factory=set)
    choir: set[date] = field(default_factory=set)
    haircut: set[date] = field(default_factory=set)


def _at(d: date, h: float) -> datetime:
    return datetime.combine(d, time(0), tzinfo=TZ) + timedelta(minutes=round(h * 60))


def planted_days(seed: int = 7, days: int = DAYS) -> Planted:
    rng = random.Random(seed)
    p = Planted()
    for i in range(days):
        d = FIRST + timedelta(days=i)
        if rng.random() < 0.35:
            p.run.add(d)
        if d.weekday() < 5 and rng.random() < 0.3:
            p.late.add(d)
        if rng.random() < 0.3:
            p.choir.add(d)
        if rng.random() < 0.25:
            p.haircut.add(d)
    return p


def records(seed: int = 7, days: int = DAYS):
    """Every record of the person (wearable and calendar) over ``days`` days, in the shapes
    importers yield."""
    p = planted_days(seed, days)
    rng = random.Random(seed * 1000 + 1)
    for i in range(days + 1):
        d = FIRST + timedelta(days=i)
        y = d - timedelta(days=1)
        # the night ending on d: shorter after yesterday's late meeting
        sleep = rng.gauss(450, 25) - (60 if y in p.late else 0)
        wake = _at(d, 7.0 + rng.gauss(0, 0.2))
        bed = wake - timedelta(minutes=sleep + 15)
        off = int(wake.utcoffset().total_seconds() // 60)
        yield SleepSession("whoop", f"n{d}", bed.astimezone(UTC), wake.astimezone(UTC), d, sleep_min=sleep,
                           in_bed_min=sleep + 15, efficiency_pct=100 * sleep / (sleep + 15), tz_offset_min=off)
        hrv = rng.gauss(50, 6) + (10 if y in p.run else 0)
        yield Sample("whoop", "hrv_rmssd", wake, wake, hrv, "ms", d, tz_offset_min=off)
        yield Sample("whoop", "resting_heart_rate", wake, wake, rng.gauss(56, 2), "bpm", d, tz_offset_min=off)
        if i == days:
            break
        for h in range(8, 22, 2):
            t = _at(d, h)
            yield Sample("whoop", "steps", t, t + timedelta(hours=1), max(0.0, rng.gauss(900, 200)), "count", d,
                         tz_offset_min=off)
        for h in (9.5, 14.5, 20.5):
            stress = rng.gauss(38, 6) - (14 if h < 12 and y in p.run else 0)
            t = _at(d, h)
            yield Sample("garmin", "stress", t, t, max(1.0, stress), "score", d, tz_offset_min=off)
        if d in p.run:
            yield Workout("whoop", f"run{d}", _at(d, 19).astimezone(UTC), _at(d, 20).astimezone(UTC), d, "running",
                          duration_min=60, tz_offset_min=off)
        yield from _calendar(d, p)


def _event(key: str, d: date, h0: float, h1: float, title: str, attendees: int | None = None) -> Event:
    return Event("ics", "primary", f"{key}-{d.isoformat()}", _at(d, h0).astimezone(UTC),
                 _at(d, h1).astimezone(UTC), False, d, title=title, attendees_count=attendees,
                 timezone="Europe/Amsterdam")


def _calendar(d: date, p: Planted):
    if d.weekday() < 5:
        yield _event("standup", d, 9, 9.25, "Team stand-up", 6)
        yield _event("focus", d, 10, 12, "Focus time")
    if d in p.late:
        yield _event("late", d, 19, 20.5, "Project sync US", 4)
    if d in p.choir:
        yield _event("choir", d, 19.5, 21.5, "Choir rehearsal")
    if d in p.haircut:
        yield _event("haircut", d, 12, 12.5, "Haircut")
