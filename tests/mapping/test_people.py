"""A person with only a watch, only a calendar, both, or nothing for a day (synthetic records
through the real writer, then `mapping.build.rebuild`)."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

from lab.people.watch_calendar import START, ZONE, calendar_records, make_db, watch_records
from rhythm.derive import rebuild

TODAY = date(2024, 3, 1)
GAP = START + timedelta(days=30)


def meters(db, day):
    cols, rows = db.query(
        "SELECT slot, vitality, cognition, progress, serenity, connection, confidence, evidence "
        "FROM meters WHERE local_day = ?", [day])
    return {r[0]: dict(zip(cols, r, strict=True)) for r in rows}


def actions(db, day):
    _, rows = db.query("SELECT slot, action, confidence FROM slot_actions WHERE local_day = ?", [day])
    return {r[0]: (r[1], r[2]) for r in rows}


@pytest.fixture(scope="module")
def watch_db(tmp_path_factory):
    db = make_db(tmp_path_factory.mktemp("w") / "w.duckdb", watch_records(skip=frozenset({GAP})))
    summary = rebuild(db, tz=ZONE, today=TODAY)
    yield db, summary
    db.close()


@pytest.fixture(scope="module")
def calendar_db(tmp_path_factory):
    pause = (START + timedelta(days=14), START + timedelta(days=34))
    db = make_db(tmp_path_factory.mktemp("c") / "c.duckdb", calendar_records(pause=pause))
    yield db, rebuild(db, tz=ZONE, today=TODAY)
    db.close()


def test_only_a_watch(watch_db):
    db, summary = watch_db
    assert summary["first_day"] == "2024-01-01" and summary["slots_with_meters"] > 0
    day = START + timedelta(days=35)
    m = meters(db, day)
    for slot, row in m.items():
        assert row["vitality"] is not None and row["cognition"] is not None and row["serenity"] is not None
        assert row["progress"] is None and row["connection"] is None, slot  # no calendar: never invented
        ev = json.loads(row["evidence"])
        assert "sleep_min" in ev["vitality"]["signals"] and "focus_min" in ev["progress"]["missing"]
        assert 0 < row["confidence"] < 1
    a = actions(db, day)
    assert a["night"][0] == "SLEEP"  # 23:00 -> next morning
    wednesday = START + timedelta(days=37)
    assert wednesday.weekday() == 2
    assert actions(db, wednesday)["evening"][0] == "EXERCISE"
    assert actions(db, wednesday)["afternoon"] == (None, 0.0)


def test_nothing_for_a_day(watch_db):
    db, _ = watch_db
    m = meters(db, GAP)
    assert set(m) == {"morning", "afternoon", "evening", "night"}  # the rows exist ...
    for row in m.values():  # ... with nothing in them
        assert all(row[k] is None for k in ("vitality", "cognition", "progress", "serenity", "connection"))
        assert row["confidence"] == 0.0
    a = actions(db, GAP)
    assert a["morning"] == a["afternoon"] == a["evening"] == (None, 0.0)
    assert a["night"][0] == "SLEEP"  # that night's sleep ends the day after: it is recorded
    # the night before the gap had no sleep recorded (that sleep would have ended on the gap day)
    assert actions(db, GAP - timedelta(days=1))["night"][0] is None


def test_worse_night_lowers_morning_vitality(watch_db):
    db, _ = watch_db
    # sleep follows 420 + 40 sin(i/3): day 38 sleeps ~ 460, day 33 ~ 380 (same baseline era)
    good, bad = START + timedelta(days=38), START + timedelta(days=33)
    assert meters(db, good)["morning"]["vitality"] > meters(db, bad)["morning"]["vitality"]


def test_only_a_calendar(calendar_db):
    db, summary = calendar_db
    day = START + timedelta(days=37)  # a Wednesday after the pause
    m = meters(db, day)
    for row in m.values():
        assert row["vitality"] is None  # no wearable: no vitality
        assert row["progress"] is not None and row["connection"] is not None
    a = actions(db, day)
    assert a["morning"][0] == "DEEP_WORK"  # 2 h focus beats the 1 h standup
    assert a["afternoon"][0] == "ADMIN_WORK"  # the 1:1 (60 min)
    assert a["night"] == (None, 0.0)
    friday = START + timedelta(days=39)
    assert actions(db, friday)["evening"][0] == "SOCIALIZE"
    sunday = START + timedelta(days=41)
    assert actions(db, sunday)["afternoon"][0] == "FAMILY_TIME"
    assert summary["events_classified"] > 0
    _, rows = db.query("SELECT DISTINCT title, action FROM events ORDER BY title")
    assert dict(rows) == {
        "1:1 with Sarah": "ADMIN_WORK", "Daily standup": "ADMIN_WORK", "Drinks with friends": "SOCIALIZE",
        "Focus time": "DEEP_WORK", "Lunch at my parents'": "FAMILY_TIME",
    }


def test_calendar_pause_is_nothing_not_zero(calendar_db):
    db, _ = calendar_db
    mid = START + timedelta(days=24)  # > 7 days from any event
    for row in meters(db, mid).values():
        assert row["progress"] is None and row["connection"] is None and row["confidence"] == 0.0


def test_more_meetings_than_usual_lower_serenity_and_cognition(tmp_path):
    recs = list(calendar_records())
    day = START + timedelta(days=36)  # a Tuesday
    from lab.people.watch_calendar import ev

    recs += [ev(9, day, 12.0, 13.5, "Budget review", 5), ev(10, day, 15, 17.5, "Vendor negotiation", 4)]
    db = make_db(tmp_path / "m.duckdb", recs)
    rebuild(db, tz=ZONE, today=TODAY)
    busy, usual = meters(db, day)["afternoon"], meters(db, day - timedelta(days=7))["afternoon"]
    assert busy["serenity"] < usual["serenity"] and busy["cognition"] < usual["cognition"]
    db.close()


def test_rebuild_is_idempotent_and_since_only_touches_later_days(watch_db, tmp_path):
    db = make_db(tmp_path / "i.duckdb", watch_records(days=20))
    rebuild(db, tz=ZONE, today=TODAY)
    _, before = db.query("SELECT local_day, slot, vitality FROM meters ORDER BY 1, 2")
    rebuild(db, tz=ZONE, today=TODAY)
    _, again = db.query("SELECT local_day, slot, vitality FROM meters ORDER BY 1, 2")
    assert before == again and len(before) == 20 * 4
    since = START + timedelta(days=15)
    s = rebuild(db, since, tz=ZONE, today=TODAY)
    assert s["first_day"] == since.isoformat()
    _, after = db.query("SELECT local_day, slot, vitality FROM meters ORDER BY 1, 2")
    assert after == before
    db.close()


def test_a_failed_rebuild_leaves_the_tables_as_they_were(tmp_path, monkeypatch):
    db = make_db(tmp_path / "f.duckdb", watch_records(days=10))
    rebuild(db, tz=ZONE, today=TODAY)
    _, before = db.query("SELECT * FROM meters ORDER BY 1, 2")
    import storage.derived as derived

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(derived, "_table", boom)
    with pytest.raises(RuntimeError):
        rebuild(db, tz=ZONE, today=TODAY)
    _, after = db.query("SELECT * FROM meters ORDER BY 1, 2")
    assert after == before
    db.close()


def test_empty_database_maps_to_nothing(tmp_path):
    db = make_db(tmp_path / "e.duckdb", [])
    s = rebuild(db, tz=ZONE, today=TODAY)
    assert s["slots"] == 0 and s["first_day"] is None
    db.close()
