"""Signal extraction from the tables: local time, slots, real zeros vs missing."""

from __future__ import annotations

from datetime import date, timedelta

from common.records import Event, Sample
from lab.people.watch_calendar import OFF, START, ZONE, at, calendar_records, make_db, watch_records
from mapping.features import day_signals, slot_signals, union_min
from mapping.rules import default_rules
from rhythm.derive import bundle_for, rebuild

MODEL = default_rules().model


def test_union_counts_overlaps_once():
    a, b = at(START, 9), at(START, 10)
    assert union_min([(a, b), (a, b), (at(START, 9.5), at(START, 11))], at(START, 6), at(START, 12)) == 120


def test_samples_land_in_their_local_slot_and_unmeasured_stress_is_dropped(tmp_path):
    d = START
    recs = [
        Sample("garmin", "stress", at(d, 11.9), at(d, 11.9), 50, "score", d, tz_offset_min=OFF),
        Sample("garmin", "stress", at(d, 12.1), at(d, 12.1), 20, "score", d, tz_offset_min=OFF),
        Sample("garmin", "stress", at(d, 12.2), at(d, 12.2), -1, "score", d, tz_offset_min=OFF),
        Sample("garmin", "steps", at(d, 23.5), at(d, 23.6), 100, "count", d, tz_offset_min=OFF),
        Sample("garmin", "steps", at(d, 25.0), at(d, 25.1), 50, "count", d + timedelta(days=1), tz_offset_min=OFF),
    ]
    db = make_db(tmp_path / "s.duckdb", recs)
    b = bundle_for(db, d, d, ZONE)
    morning = slot_signals(b, d, 0, {}, MODEL)
    afternoon = slot_signals(b, d, 1, {}, MODEL)
    night = slot_signals(b, d, 3, {}, MODEL)
    assert morning["stress"] == 50 and afternoon["stress"] == 20  # the -1 is "not measured"
    assert night["steps"] == 150  # 23:30 and 01:00 are the same night
    assert morning["steps"] == 0.0  # the day has steps elsewhere: an empty slot is a real 0
    assert "busy_min" not in morning  # no calendar at all: missing, not 0
    db.close()


def test_watch_day_signals(tmp_path):
    db = make_db(tmp_path / "w.duckdb", watch_records(days=10))
    b = bundle_for(db, START, START + timedelta(days=9), ZONE)
    sig = day_signals(b, START + timedelta(days=5), MODEL)
    assert {"sleep_min", "sleep_efficiency_pct", "deep_rem_share", "hrv_rmssd_ms", "resting_hr_bpm",
            "recovery_pct", "hrv_7d_ms"} <= set(sig)
    assert abs(sig["deep_rem_share"] - 0.45) < 1e-9
    assert day_signals(b, START + timedelta(days=30), MODEL) == {}  # nothing that day
    db.close()


def test_calendar_signals_and_event_time_zones(tmp_path):
    db = make_db(tmp_path / "c.duckdb", calendar_records(days=14))
    b = bundle_for(db, START, START + timedelta(days=13), ZONE)
    labels = {e.key: {"Daily standup": "ADMIN_WORK", "Focus time": "DEEP_WORK"}.get(e.title) for e in b.events}
    wed = START + timedelta(days=9)
    s = slot_signals(b, wed, 0, labels, MODEL)
    # 09-10 standup (6 people), 10-12 focus: 3 h busy in one block, 1 h meeting, 3 h work
    assert s["busy_min"] == 180 and s["meeting_min"] == 60 and s["focus_min"] == 120 + 60
    assert s["longest_block_min"] == 180
    assert s["work_blocks_7d"] >= 5
    assert slot_signals(b, wed, 3, labels, MODEL)["busy_min"] == 0  # covered calendar: real 0
    db.close()


def test_an_event_without_a_duration_counts_for_the_slot_action(tmp_path):
    d = date(2024, 1, 5)
    e = Event("calendar", "c", "k1", at(d, 21.5), at(d, 21.5), False, d, title="Karaoke",
              timezone="Europe/Berlin")
    db = make_db(tmp_path / "p.duckdb", [e])
    rebuild(db, tz=ZONE, today=d)
    _, rows = db.query("SELECT action FROM slot_actions WHERE local_day = ? AND slot = 'evening'", [d])
    assert rows == [("SOCIALIZE",)]
    db.close()
