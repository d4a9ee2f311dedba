"""Synthetic people with a watch and a calendar (mapping tests, benchmarks/student_real.py),
written through the real storage writer."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from common.records import Event, Sample, SleepSession, Workout
from storage import open_db
from storage.writer import write_records

TZ = timezone(timedelta(hours=1))
ZONE = ZoneInfo("Europe/Amsterdam")  # the people's zone (UTC+01:00 in their winter weeks)
OFF = 60
START = date(2024, 1, 1)  # a Monday


def at(day: date, hour: float) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(hours=hour)


def watch_records(days: int = 42, skip: frozenset[date] = frozenset()):
    """Nightly sleep, daily HRV / resting HR, hourly steps, stress, a Wednesday run."""
    for i in range(days):
        d = START + timedelta(days=i)
        if d in skip:
            continue
        wake = d  # the night ending on d
        sleep = 420 + 40 * math.sin(i / 3)
        start = at(d, -1.0)  # 23:00 the evening before
        yield SleepSession("whoop", f"s{i}", start, start + timedelta(minutes=sleep + 30), wake,
                           sleep_min=sleep, in_bed_min=sleep + 30, awake_min=30, light_min=sleep * 0.55,
                           deep_min=sleep * 0.2, rem_min=sleep * 0.25, efficiency_pct=100 * sleep / (sleep + 30),
                           tz_offset_min=OFF)
        yield Sample("whoop", "hrv_rmssd", at(d, 7), at(d, 7), 45 + 8 * math.sin(i / 3), "ms", d, tz_offset_min=OFF)
        yield Sample("whoop", "resting_heart_rate", at(d, 7), at(d, 7), 58 - 3 * math.sin(i / 3), "bpm", d,
                     tz_offset_min=OFF)
        yield Sample("whoop", "recovery", at(d, 7), at(d, 7), 60 + 20 * math.sin(i / 3), "pct", d, tz_offset_min=OFF)
        for h in range(8, 22):
            yield Sample("apple", "steps", at(d, h), at(d, h + 1), 300 + 20 * h, "count", d, "watch",
                         tz_offset_min=OFF)
        for h in (9, 13, 19):
            yield Sample("garmin", "stress", at(d, h), at(d, h), 30 + (10 if h == 13 else 0), "score", d,
                         tz_offset_min=OFF)
        if d.weekday() == 2:
            yield Workout("whoop", f"w{i}", at(d, 18.5), at(d, 19.5), d, "running", duration_min=60,
                          tz_offset_min=OFF)


def ev(i: int, d: date, h0: float, h1: float, title: str, attendees: int | None = None) -> Event:
    return Event("calendar", "primary", f"e{i}-{d.isoformat()}", at(d, h0), at(d, h1), False, d, title=title,
                 attendees_count=attendees, timezone="Europe/Amsterdam")


def calendar_records(days: int = 42, pause: tuple[date, date] | None = None):
    """Weekday standup + focus + a 1:1; Friday drinks; Sunday lunch with the parents."""
    for i in range(days):
        d = START + timedelta(days=i)
        if pause and pause[0] <= d <= pause[1]:
            continue
        if d.weekday() < 5:
            yield ev(1, d, 9, 10, "Daily standup", 6)
            yield ev(2, d, 10, 12, "Focus time")
            yield ev(3, d, 14, 15, "1:1 with Sarah", 2)
        if d.weekday() == 4:
            yield ev(4, d, 19, 22, "Drinks with friends", 5)
        if d.weekday() == 6:
            yield ev(5, d, 12, 15, "Lunch at my parents'", 4)


def make_db(path, records):
    db = open_db(path)
    write_records(db, records)
    return db
