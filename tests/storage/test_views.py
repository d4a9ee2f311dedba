"""Analysis views (storage/views/*.sql): each has a test on known data."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from common.records import Event, Sample, SleepSession, Workout
from storage import open_db, write_records

TZ = timezone(timedelta(hours=-5))
DAY = date(2024, 5, 6)


def at(h: int, m: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, h, m, tzinfo=TZ)


@pytest.fixture
def db(tmp_path):
    d = open_db(tmp_path / "v.duckdb")
    recs = [
        # steps written by both the watch and the phone: the day total is the larger source total
        Sample("healthkit", "steps", at(9), at(10), 1000, "count", DAY, source_name="Watch"),
        Sample("healthkit", "steps", at(11), at(12), 500, "count", DAY, source_name="Watch"),
        Sample("healthkit", "steps", at(9), at(10), 900, "count", DAY, source_name="iPhone"),
        Sample("healthkit", "resting_heart_rate", at(8), at(8), 52, "bpm", DAY),
        Sample("whoop", "resting_heart_rate", at(7), at(7), 54, "bpm", DAY),
        Sample("whoop", "hrv_rmssd", at(7), at(7), 80, "ms", DAY),
        SleepSession("whoop", "s1", at(23, 0, DAY - timedelta(days=1)), at(7), DAY, sleep_min=420,
                     in_bed_min=460, deep_min=90, rem_min=100, efficiency_pct=91),
        SleepSession("whoop", "nap", at(14), at(14, 30), DAY, sleep_min=25, is_nap=True),
        Workout("garmin", "w1", at(17), at(18), DAY, "running", duration_min=60),
        Event("calendar", "c", "e1", at(10), at(11), False, DAY, title="1:1", attendees_count=2),
        Event("calendar", "c", "e2", at(13), at(15), False, DAY, title="Workshop"),
        Event("calendar", "c", "e3", at(16), at(17), False, DAY, title="Gone", status="cancelled"),
        Event("calendar", "c", "e4", at(0), at(0, 0, DAY + timedelta(days=1)), True, DAY, title="Holiday"),
    ]
    write_records(d, recs)
    yield d
    d.close()


def one(db, sql):
    cols, rows = db.query(sql)
    assert len(rows) == 1, rows
    return dict(zip(cols, rows[0], strict=True))


def test_daily_sleep_separates_naps(db):
    r = one(db, "SELECT * FROM daily_sleep")
    assert r["sleep_min"] == 420 and r["nap_min"] == 25 and r["sessions"] == 2


def test_daily_activity_never_sums_sources_twice(db):
    r = one(db, "SELECT * FROM daily_activity")
    assert r["steps"] == 1500  # each hour from the watch: 1500, not 2400 with the iPhone's 900
    assert r["resting_hr_bpm"] == pytest.approx(54)  # the strap's, over an unknown device's 52
    assert r["hrv_rmssd_ms"] == 80 and r["workouts"] == 1 and r["workout_min"] == 60


def test_daily_calendar_skips_cancelled_and_counts_all_day_apart(db):
    r = one(db, "SELECT * FROM daily_calendar")
    assert r["timed_events"] == 2 and r["all_day_events"] == 1
    assert r["busy_min"] == 180 and r["attendees"] == 2


def test_daily_summary_joins_every_source(db):
    r = one(db, "SELECT * FROM daily_summary")
    assert r["local_day"] == DAY
    assert (r["sleep_min"], r["steps"], r["events"], r["workouts"]) == (420, 1500, 2, 1)


def test_daily_calendar_leaves_rhythms_own_blocks_out(tmp_path):
    from common.rhythm_blocks import GOOGLE_ID_PREFIX, RHYTHM_UID_SUFFIX, is_rhythm_event_id

    d = open_db(tmp_path / "b.duckdb")
    ids = ["meeting-1", f"rhythm-2024-05-06-morning{RHYTHM_UID_SUFFIX}", f"{GOOGLE_ID_PREFIX}{'a' * 32}",
           f"rhythm-2024-05-06-evening{RHYTHM_UID_SUFFIX}/20240506T180000Z"]
    write_records(d, [Event("calendar", "c", eid, at(9 + i), at(10 + i), False, DAY, title=eid) for i, eid in enumerate(ids)])
    r = one(d, "SELECT * FROM daily_calendar")
    kept = [eid for eid in ids if not is_rhythm_event_id(eid)]  # the SQL and the Python predicate agree
    assert r["timed_events"] == len(kept) == 1 and r["busy_min"] == 60
    d.close()
