"""One truth per metric: the merged layer (storage/views/*_merged.sql, source_priority).

A person with an Apple Watch, an iPhone, an Oura ring and a WHOOP strap on the same days:
each day's steps, sleep and HRV are counted once, by the documented priority, and every
source's rows stay stored.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from common.records import Sample, SleepSession, Workout
from storage import open_db, write_records

TZ = timezone(timedelta(hours=1))
DAY = date(2025, 3, 12)


def at(h: float, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(minutes=round(h * 60))


WATCH = "Mara’s Apple Watch"
PHONE = "Mara’s iPhone"


def four_devices():
    for h in range(8, 20):  # the watch is worn 08-20, the phone carried all day
        yield Sample("healthkit", "steps", at(h), at(h + 1), 400.0, "count", DAY, WATCH, tz_offset_min=60)
    for h in range(7, 22):
        yield Sample("healthkit", "steps", at(h), at(h + 1), 250.0, "count", DAY, PHONE, tz_offset_min=60)
    yield Sample("oura", "steps", at(9), at(10), 380.0, "count", DAY, "oura", tz_offset_min=60)
    # nights from three devices, and one nap on the watch
    yield SleepSession("oura", "o1", at(-1.5), at(6.5), DAY, sleep_min=440, tz_offset_min=60, source_name="oura")
    yield SleepSession("whoop", "w1", at(-1.4), at(6.6), DAY, sleep_min=455, tz_offset_min=60)
    yield SleepSession("healthkit", "h1", at(-1.3), at(6.4), DAY, sleep_min=430, tz_offset_min=60, source_name=WATCH)
    yield SleepSession("healthkit", "h2", at(14), at(14.4), DAY, sleep_min=22, is_nap=True, tz_offset_min=60,
                       source_name=WATCH)
    # HRV from every device
    yield Sample("oura", "hrv_rmssd", at(6.5), at(6.5), 48.0, "ms", DAY, "oura", tz_offset_min=60)
    yield Sample("whoop", "hrv_rmssd", at(6.6), at(6.6), 61.0, "ms", DAY, tz_offset_min=60)
    yield Sample("healthkit", "hrv_sdnn", at(6.0), at(6.0), 70.0, "ms", DAY, WATCH, tz_offset_min=60)
    # one run recorded by the watch and the strap, and a separate walk from the phone
    yield Workout("healthkit", "run-w", at(18), at(18.75), DAY, "running", duration_min=45, source_name=WATCH,
                  tz_offset_min=60)
    yield Workout("whoop", "run-s", at(18.05), at(18.8), DAY, "running", duration_min=45, tz_offset_min=60)
    yield Workout("healthkit", "walk", at(12), at(12.5), DAY, "walking", duration_min=30, source_name=PHONE,
                  tz_offset_min=60)


@pytest.fixture
def db(tmp_path):
    d = open_db(tmp_path / "m.duckdb")
    write_records(d, four_devices())
    yield d
    d.close()


def one(db, sql):
    cols, rows = db.query(sql)
    assert len(rows) == 1, rows
    return dict(zip(cols, rows[0], strict=True))


def test_steps_each_hour_once_from_the_best_device_that_has_it(db):
    r = one(db, "SELECT steps FROM daily_activity")
    # 08-20 from the watch (12 h x 400), 07-08 and 20-22 from the phone (3 h x 250);
    # the ring's 09-10 hour loses to the watch
    assert r["steps"] == 12 * 400 + 3 * 250
    assert one(db, "SELECT count(*) AS n FROM samples WHERE metric = 'steps'")["n"] == 12 + 15 + 1  # all kept


def test_sleep_from_the_ring_over_strap_and_watch_and_naps_apart(db):
    r = one(db, "SELECT source, sleep_min, nap_min FROM daily_sleep WHERE sleep_min IS NOT NULL")
    assert (r["source"], r["sleep_min"]) == ("oura", 440)  # not 440 + 455 + 430
    assert one(db, "SELECT sleep_min FROM daily_summary")["sleep_min"] == 440
    assert one(db, "SELECT sum(sleep_min) AS m FROM sleep_sessions_merged WHERE is_nap")["m"] == 22


def test_hrv_from_the_ring(db):
    r = one(db, "SELECT hrv_rmssd_ms, hrv_sdnn_ms FROM daily_activity")
    assert r["hrv_rmssd_ms"] == 48.0  # the ring's, not the mean with the strap's 61
    assert r["hrv_sdnn_ms"] == 70.0  # the only SDNN there is


def test_a_workout_two_devices_recorded_counts_once(db):
    cols, rows = db.query("SELECT source, workout_id FROM workouts_merged ORDER BY start_ts")
    assert rows == [("healthkit", "walk"), ("healthkit", "run-w")]
    assert one(db, "SELECT workouts, workout_min FROM daily_activity") == {"workouts": 2, "workout_min": 75}


def test_the_priority_can_be_changed(db):
    db.con.execute("UPDATE source_priority SET rank = 0 WHERE grp = 'sleep' AND kind = 'strap'")
    assert one(db, "SELECT source, sleep_min FROM daily_sleep WHERE sleep_min IS NOT NULL") == {
        "source": "whoop", "sleep_min": 455}


def test_meters_read_the_merged_layer(tmp_path):
    """Mapping sees one night and one step count: the steps signal of the morning is the
    watch's (the phone's hour before 08:00 included), not the sum of devices."""
    from zoneinfo import ZoneInfo

    from rhythm.derive import bundle_for

    d = open_db(tmp_path / "m2.duckdb")
    write_records(d, four_devices())
    b = bundle_for(d, DAY, DAY, ZoneInfo("Europe/Amsterdam"))
    assert b.slot_values[(DAY, 0, "steps")] == 250 + 4 * 400  # 07-08 phone, 08-12 watch
    assert [s.source for s in b.main_sleep(DAY)] == ["oura"]
    assert len(b.workouts) == 2
    d.close()


def test_rhythm_sources_shows_and_changes_the_priority(rhythm_home, run_cli):
    import json

    from rhythm.settings import load_settings

    with open_db(load_settings().database) as d:
        write_records(d, four_devices())
    code, out, err = run_cli("sources", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["priority"]["sleep"][:3] == ["ring", "strap", "watch"]
    steps = {(r["source"], r["source_name"]): r for r in doc["sources"] if r["metric"] == "steps"}
    assert steps[("healthkit", WATCH)]["used"] == 12 and steps[("healthkit", PHONE)]["used"] == 3
    assert steps[("healthkit", PHONE)]["rows"] == 15 and steps[("oura", "oura")]["used"] == 0
    code, out, err = run_cli("sources", "--set", "sleep=strap,ring", "--json")
    assert code == 0, err
    assert json.loads(out)["priority"]["sleep"][:2] == ["strap", "ring"]
    code, out, _ = run_cli("sql", "--json", "SELECT source FROM daily_sleep WHERE sleep_min IS NOT NULL")
    assert json.loads(out) == [{"source": "whoop"}]
    for bad in ("sleep=strap,strap", "naps=ring", "sleep", "sleep=satellite"):
        code, _, err = run_cli("sources", "--set", bad)
        assert code == 2 and len(err.strip().splitlines()) == 1, bad


def test_a_day_long_total_stands_for_its_day_only_when_no_better_device_has_the_hours(tmp_path):
    d = open_db(tmp_path / "c.duckdb")
    day2 = DAY + timedelta(days=1)
    recs = [
        # day 1: the ring's day total (from 04:00) and the watch's hours: the watch's hours count
        Sample("oura", "steps", at(4), at(28), 9000.0, "count", DAY, "oura", tz_offset_min=60),
        *[Sample("healthkit", "steps", at(h), at(h + 1), 500.0, "count", DAY, WATCH, tz_offset_min=60)
          for h in range(8, 18)],
        # day 2: the ring's total and the phone's hours: the ring outranks the phone, its total counts
        Sample("oura", "steps", at(4, day2), at(28, day2), 8000.0, "count", day2, "oura", tz_offset_min=60),
        *[Sample("healthkit", "steps", at(h, day2), at(h + 1, day2), 300.0, "count", day2, PHONE, tz_offset_min=60)
          for h in range(8, 18)],
        # the ring's night: HRV and lowest heart rate come with the sleep period
        SleepSession("oura", "n2", at(-1, day2), at(7, day2), day2, sleep_min=430, hrv_rmssd_ms=44.0,
                     resting_hr_bpm=51.0, tz_offset_min=60, source_name="oura"),
    ]
    write_records(d, recs)
    _, rows = d.query("SELECT local_day, steps, hrv_rmssd_ms, resting_hr_bpm FROM daily_activity ORDER BY 1")
    assert rows == [(DAY, 5000.0, None, None), (day2, 8000.0, 44.0, 51.0)]
    d.close()
