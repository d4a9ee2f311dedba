"""Golden days: the fixtures through the real CLI (`rhythm import ...`, `rhythm map`), then
the meters and actions of specific days.

For the real FIT and .ics files, expected values were computed once by this mapping and
checked against the raw rows quoted in each test (a regression guard plus a sanity check of
direction). The WHOOP and Apple Health exports are generated (lab/people/) with
days placed on purpose: their expectations follow from what the generator placed and from
the rules of mapping/README.md (0.5 is usual; z = -2 scores 0.12, z = +2 scores 0.88; a meter
is the weighted mean of its signals' scores), not from a past run.
"""

from __future__ import annotations

import json

import pytest

from lab.people import healthkit as hk_gen
from lab.people import whoop as whoop_gen
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


def _weighted_mean(row, meter):
    """The meter from its evidence: sum(weight x score) / sum(weight) of the present signals."""
    sig = row["evidence"][meter]["signals"].values()
    return sum(s["weight"] * s["score"] for s in sig) / sum(s["weight"] for s in sig)


def _better(signal):
    """How many spreads better than usual (z in the direction that is good for the meter)."""
    return signal["z"] * signal["direction"]


WATCH_VITALITY = ("sleep_min", "sleep_efficiency_pct", "hrv_rmssd_ms", "resting_hr_bpm", "recovery_pct")


def test_whoop_csv_export(run_cli, rhythm_home, whoop_export):
    summary, db = _import_and_map(run_cli, rhythm_home, ("whoop", whoop_export))
    contents = whoop_gen.export_files()[1]
    with db:
        nights = contents.sleeps - contents.naps  # one wake-up day each (172)
        assert summary["first_day"] == contents.first_day.isoformat() and summary["slots_with_meters"] >= 4 * nights
        # 2024-04-23 (whoop_gen.BAD): 214 min asleep from 00:40, recovery 7 %, RHR 79, HRV 17 ms,
        # efficiency 72 %: every watch signal two spreads or more below usual -> each scores
        # <= 0.12 and only the neutral exercise minutes (0.5, weight 0.5 of 11.5) lift vitality
        bad = _meters(db, "2024-04-23", "morning")
        sig = bad["evidence"]["vitality"]["signals"]
        assert sig["recovery_pct"]["value"] == whoop_gen.BAD["recovery"] == 7
        assert sig["sleep_min"]["value"] == whoop_gen.BAD["asleep"] == 214
        assert all(sig[n]["personal"] and _better(sig[n]) <= -2 for n in WATCH_VITALITY)
        assert sig["recovery_pct"]["score"] < 0.2
        assert bad["vitality"] < (11 * 0.12 + 0.5 * 0.5) / 11.5
        assert all(_better(s) <= -2 for s in bad["evidence"]["cognition"]["signals"].values())  # sleep, deep+REM
        assert bad["cognition"] < 0.12
        # 2024-05-08 (whoop_gen.GOOD): 534 min, recovery 97 %, RHR 51, HRV 84 ms after a week of
        # HRV 18 ms above usual: every watch signal 1.5 spreads or more above usual
        good = _meters(db, "2024-05-08", "morning")
        sig = good["evidence"]["vitality"]["signals"]
        assert all(_better(sig[n]) >= 1.5 for n in WATCH_VITALITY)
        assert good["vitality"] > 0.8
        assert _better(good["evidence"]["serenity"]["signals"]["hrv_7d_ms"]) >= 2  # the good week
        assert good["serenity"] > 0.8
        # 2024-03-27 (whoop_gen.GOLDEN["usual"]): every vitality and cognition signal at the
        # median of the 28 days before it -> exactly usual
        usual = _meters(db, "2024-03-27", "morning")
        sig = usual["evidence"]["vitality"]["signals"]
        assert all(sig[n]["z"] == 0 for n in WATCH_VITALITY)
        assert usual["vitality"] == pytest.approx(0.5, abs=1e-3)
        assert usual["cognition"] == pytest.approx(0.5, abs=TOL)  # deep+REM share within rounding
        for row in (bad, good, usual):
            for meter in ("vitality", "cognition", "serenity"):
                assert row[meter] == pytest.approx(_weighted_mean(row, meter), abs=1e-3)
        # a watch alone says nothing about progress or connection
        for row in (bad, good, usual):
            assert row["progress"] is None and row["connection"] is None
            assert 0.2 < row["confidence"] < 0.5
        # WHOOP sleeps: 2024-03-26 22:45 -> 03-27 07:13 (UTC-4) is that night's SLEEP; no nap the next day
        assert _action(db, "2024-03-26", "night")[0] == "SLEEP"
        assert _action(db, "2024-03-27", "afternoon") == (None, 0.0)


def test_apple_health_export(run_cli, rhythm_home, healthkit_zip):
    summary, db = _import_and_map(run_cli, rhythm_home, ("healthkit", healthkit_zip))
    with db:
        # 2021-02-16 (hk_gen.GOLDEN_DAY): SDNN at the median of the 28 days before it, after a
        # week of rising SDNN; RHR 61, 10 bpm above any day of those 28 (43-51, so at least 1.7
        # spreads); only in-bed sleep (no asleep time)
        row = _meters(db, hk_gen.GOLDEN_DAY.isoformat(), "morning")
        sig = row["evidence"]["vitality"]["signals"]
        assert sig["hrv_sdnn_ms"]["z"] == pytest.approx(0, abs=1e-3)
        assert sig["resting_hr_bpm"]["value"] == hk_gen.GOLDEN_RHR and sig["resting_hr_bpm"]["score"] < 0.16
        # (1.5 x 0.5 + 2 x RHR score + 0.5 x 0.5 exercise minutes) / 4
        assert (1.5 * 0.5 + 0.5 * 0.5) / 4 < row["vitality"] < (1.5 * 0.5 + 2 * 0.16 + 0.5 * 0.5) / 4
        assert _better(row["evidence"]["serenity"]["signals"]["hrv_7d_ms"]) > 0  # the rising week
        assert row["serenity"] > 0.5
        for meter in ("vitality", "serenity"):
            assert row[meter] == pytest.approx(_weighted_mean(row, meter), abs=1e-3)
        assert row["cognition"] is None  # no asleep minutes, no stress: nothing to say
        assert "sleep_min" in row["evidence"]["vitality"]["missing"]  # in bed is not asleep
        assert row["confidence"] < 0.2
        # a 2.5 h in-bed record from 05:28 (hk_gen.SHORT_IN_BED) does not make the night SLEEP
        assert hk_gen.SHORT_IN_BED[0].isoformat() == "2021-02-08T05:28:14"
        assert _action(db, "2021-02-07", "night")[0] is None


@pytest.mark.slow
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
        # occurrence was moved to 2021-12-17. The feed marks every occurrence transparent
        # ("free"): an event the person may go to, never counted as done (issue 36), so it
        # is classified but moves no slot action and no meter.
        _, rows = db.query("SELECT local_day, action, transparency FROM events WHERE local_day < '2022-01-01' "
                           "ORDER BY local_day")
        assert [(d.isoformat(), a, t) for d, a, t in rows] == [
            ("2021-11-26", "SOCIALIZE", "transparent"), ("2021-12-17", "SOCIALIZE", "transparent")]
        for day in ("2021-11-26", "2021-12-17", "2021-12-31"):
            assert _action(db, day, "evening")[0] is None
        row = _meters(db, "2021-12-17", "evening")
        assert row["vitality"] is None  # a calendar says nothing about the body
        assert row["connection"] is None  # and a free-marked event says nothing of what was done
        _, rows = db.query("SELECT DISTINCT action FROM events")
        assert rows == [("SOCIALIZE",)]
