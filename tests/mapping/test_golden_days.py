"""Golden days: the real fixtures through the real CLI (`rhythm import ...`, `rhythm map`),
then the meters and actions of specific days, within tolerance.

Expected values were computed once by this mapping and checked against the raw rows quoted in
each test (a golden day is a regression guard plus a sanity check of direction).
"""

from __future__ import annotations

import json

import pytest

from storage import open_db

TOL = 0.02


def _import_and_map(run_cli, rhythm_home, *imports):
    for source, path in imports:
        code, out, err = run_cli("import", source, str(path), "--json")
        assert code == 0, err
    code, out, err = run_cli("map", "--json")
    assert code == 0, err
    return json.loads(out), open_db(rhythm_home / "rhythm.duckdb", read_only=True)


def _meters(db, day, slot):
    cols, rows = db.query(
        "SELECT vitality, cognition, progress, serenity, connection, confidence, evidence FROM meters "
        "WHERE local_day = ? AND slot = ?", [day, slot])
    assert rows, f"no meters for {day} {slot}"
    row = dict(zip(cols, rows[0], strict=True))
    row["evidence"] = json.loads(row["evidence"])
    return row


def _action(db, day, slot):
    _, rows = db.query("SELECT action, confidence FROM slot_actions WHERE local_day = ? AND slot = ?", [day, slot])
    return rows[0]


def test_whoop_csv_export(run_cli, rhythm_home, fixtures_dir):
    summary, db = _import_and_map(run_cli, rhythm_home, ("whoop", fixtures_dir / "whoop/export_csv"))
    with db:
        assert summary["first_day"] <= "2024-01-01" and summary["slots_with_meters"] >= 170 * 4
        # 2024-06-11: recovery 8 %, RHR 105, HRV 6 ms, 220 min asleep -> a very low vitality
        bad = _meters(db, "2024-06-11", "morning")
        assert bad["vitality"] == pytest.approx(0.097, abs=TOL)
        assert bad["cognition"] == pytest.approx(0.315, abs=TOL)
        sig = bad["evidence"]["vitality"]["signals"]
        assert sig["recovery_pct"]["value"] == 8 and sig["sleep_min"]["value"] == 220
        assert sig["recovery_pct"]["personal"] and sig["recovery_pct"]["score"] < 0.2
        # 2024-04-01: recovery 99 %, RHR 72, HRV 50 ms, 515 min asleep -> a very good day
        good = _meters(db, "2024-04-01", "morning")
        assert good["vitality"] == pytest.approx(0.903, abs=TOL)
        assert good["serenity"] == pytest.approx(0.778, abs=TOL)
        # 2024-03-05: an ordinary day (411 min, recovery 46 %) sits near "usual"
        usual = _meters(db, "2024-03-05", "morning")
        assert usual["vitality"] == pytest.approx(0.513, abs=TOL)
        assert usual["cognition"] == pytest.approx(0.465, abs=TOL)
        assert usual["serenity"] == pytest.approx(0.376, abs=TOL)
        # a watch alone says nothing about progress or connection
        for row in (bad, good, usual):
            assert row["progress"] is None and row["connection"] is None
            assert 0.2 < row["confidence"] < 0.5
        # WHOOP sleeps: 2024-03-04 22:24 -> 03-05 06:46 (UTC-4) is that night's SLEEP
        assert _action(db, "2024-03-04", "night")[0] == "SLEEP"
        assert _action(db, "2024-03-05", "afternoon") == (None, 0.0)


def test_apple_health_export(run_cli, rhythm_home, fixtures_dir):
    summary, db = _import_and_map(run_cli, rhythm_home, ("healthkit", fixtures_dir / "apple_health/k0rventen_test-export.zip"))
    with db:
        # 2021-02-02: SDNN 71.8 ms (7-day mean rising), RHR 45; only in-bed sleep (no asleep time)
        row = _meters(db, "2021-02-02", "morning")
        assert row["vitality"] == pytest.approx(0.422, abs=TOL)
        assert row["serenity"] == pytest.approx(0.469, abs=TOL)
        assert row["cognition"] is None  # no asleep minutes, no stress: nothing to say
        assert "sleep_min" in row["evidence"]["vitality"]["missing"]  # in bed is not asleep
        assert row["confidence"] < 0.2
        # a 2.5 h in-bed record from 05:28 does not make the night SLEEP
        assert _action(db, "2021-01-31", "night")[0] is None


def test_garmin_fit_activity(run_cli, rhythm_home, fixtures_dir):
    summary, db = _import_and_map(
        run_cli, rhythm_home,
        ("garmin", fixtures_dir / "garmin_fit/fitparse_activity-small-fenix2-run.fit"),
        ("garmin", fixtures_dir / "garmin_fit/fitparse_garmin-fenix-5-walk.fit"),
    )
    with db:
        assert summary["actions"] == {"EXERCISE": 1}
        action, conf = _action(db, "2015-08-15", "afternoon")  # the 47 min fenix 2 run
        assert action == "EXERCISE" and conf > 0.8
        # the 45-second walk is no workout slot
        assert _action(db, "2017-06-11", "afternoon")[0] is None


def test_apple_health_short_workout_is_not_a_slot_action(run_cli, rhythm_home, fixtures_dir):
    _, db = _import_and_map(run_cli, rhythm_home, ("healthkit", fixtures_dir / "apple_health/dogsheep_export.xml"))
    with db:
        _, rows = db.query("SELECT count(*) FROM slot_actions WHERE action = 'EXERCISE'")
        assert rows[0][0] == 0  # a 5-minute run is below the 20-minute threshold


@pytest.mark.slow
def test_ics_calendar_with_a_moved_occurrence(run_cli, rhythm_home, fixtures_dir, monkeypatch):
    monkeypatch.setenv("RHYTHM_ICS_WINDOW_PAST_DAYS", "3650")
    _, db = _import_and_map(run_cli, rhythm_home, ("ics", fixtures_dir / "google_calendar/ics/rie_issue_62_moved_event.ics"))
    with db:
        # "Karaoke", last Friday of the month 21:30 Berlin, no duration; the 2021-12-31
        # occurrence was moved to 2021-12-17.
        assert _action(db, "2021-11-26", "evening")[0] == "SOCIALIZE"
        assert _action(db, "2021-12-17", "evening")[0] == "SOCIALIZE"
        assert _action(db, "2021-12-31", "evening")[0] is None
        row = _meters(db, "2021-12-17", "evening")
        assert row["vitality"] is None  # a calendar says nothing about the body
        # one social event this week against a usual of none: connection above usual
        assert row["connection"] == pytest.approx(0.690, abs=TOL)
        social = row["evidence"]["connection"]["signals"]["social_events_7d"]
        assert social["value"] == 1 and social["baseline"] == 0 and social["personal"]
        _, rows = db.query("SELECT DISTINCT action FROM events")
        assert rows == [("SOCIALIZE",)]
