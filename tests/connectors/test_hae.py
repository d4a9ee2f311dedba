"""Health Auto Export: `rhythm import hae` on files written from the app's published format
(lab/people/hae.py), through the real CLI and database."""

from __future__ import annotations

import json
import random
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from connectors.hae.metrics import JSON_METRICS
from lab.people import hae

FIRST = date(2024, 3, 4)


def sql(run_cli, query: str) -> list[dict]:
    code, out, err = run_cli("sql", "--json", query)
    assert code == 0, err
    return json.loads(out)


def one(run_cli, query: str):
    rows = sql(run_cli, query)
    assert len(rows) == 1
    return next(iter(rows[0].values()))


def imported(run_cli, path: Path) -> dict:
    code, out, err = run_cli("import", "hae", path, "--json")
    assert code == 0, err
    return json.loads(out)


def day_totals(run_cli, metric: str) -> dict[str, float]:
    """Per local day, the largest per-series total (how daily_activity and mapping count)."""
    rows = sql(run_cli, f"""
        SELECT local_day, max(t) AS total FROM (
            SELECT local_day, source_name, sum(value) AS t FROM samples
            WHERE source = 'hae' AND metric = '{metric}' GROUP BY ALL) GROUP BY local_day""")
    return {r["local_day"]: r["total"] for r in rows}


def counts(run_cli) -> dict[str, int]:
    tables = ("samples", "sleep_sessions", "workouts", "runs")
    out = {t: one(run_cli, f"SELECT count(*) FROM {t}") for t in tables}
    out["raw"] = one(run_cli, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'raw_hae'")
    if out["raw"]:
        out["raw_rows"] = one(run_cli, "SELECT count(*) FROM raw_hae")
    return out


# -- overlapping daily files ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("seed,offset", [(1, "+0100"), (2, "-0500"), (3, "+0530")])
def test_overlapping_daily_files_count_each_bucket_once(rhythm_home, run_cli, tmp_path, seed, offset):
    files = hae.daily_files(tmp_path / "export", FIRST, 5, seed=seed, offset=offset)
    summary = imported(run_cli, tmp_path / "export")
    assert summary["duplicates_skipped"] > 0  # the files repeat the previous day
    full_days = [FIRST - timedelta(days=1) + timedelta(days=i) for i in range(5)]  # each some file's "yesterday"
    steps, energy = day_totals(run_cli, "steps"), day_totals(run_cli, "active_energy")
    distance = day_totals(run_cli, "distance")
    for d in full_days:
        truth = hae.day_data(d, seed, offset)
        assert steps[d.isoformat()] == truth.total("step_count")
        assert energy[d.isoformat()] == pytest.approx(truth.total("active_energy"), rel=1e-9)
        assert distance[d.isoformat()] == pytest.approx(truth.total("walking_running_distance") * 1000, rel=1e-9)
    daily = {r["local_day"]: r["steps"] for r in sql(run_cli, "SELECT local_day, steps FROM daily_activity")}
    assert all(daily[d.isoformat()] == steps[d.isoformat()] for d in full_days)  # the view agrees
    # one row per minute that had steps, over everything the files held
    minutes = {p["t"] for d in [*full_days, full_days[-1] + timedelta(days=1)]
               for p in hae.day_data(d, seed, offset).points["step_count"]
               if p["t"] < datetime(d.year, d.month, d.day, 21, tzinfo=p["t"].tzinfo) or d in full_days}
    assert one(run_cli, "SELECT count(*) FROM samples WHERE metric = 'steps'") == len(minutes)
    assert one(run_cli, "SELECT count(DISTINCT tz_offset_min) FROM samples") == 1
    # every file again, one by one and in another order: nothing new
    before = counts(run_cli)
    random.Random(seed).shuffle(files)
    for f in files:
        again = imported(run_cli, f)
        assert again["duplicates_skipped"] == again["records"]
    after = counts(run_cli)
    assert {k: v for k, v in after.items() if k != "runs"} == {k: v for k, v in before.items() if k != "runs"}


def test_a_zip_of_the_daily_files_is_the_folder(rhythm_home, run_cli, tmp_path):
    files = hae.daily_files(tmp_path / "export", FIRST, 3)
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as zf:
        for f in files:
            zf.write(f, f"Health/{f.name}")
        zf.writestr("Health/Outdoor Run-20240304_0710.gpx", "<gpx/>")  # route files are not ours
    from_zip = imported(run_cli, tmp_path / "export.zip")
    from_folder = imported(run_cli, tmp_path / "export")
    assert from_zip["records"] == from_folder["records"] == from_folder["duplicates_skipped"]


# -- one bucket, whatever devices it names ---------------------------------------------------------
def _steps_doc(points: list[tuple[str, int, str]], units: str = "count") -> dict:
    return {"data": {"metrics": [{"name": "step_count", "units": units, "data": [
        {"date": d, "qty": q, "source": s} for d, q, s in points]}], "workouts": []}}


def test_a_bucket_is_one_row_whatever_device_names_it_carries(rhythm_home, run_cli, tmp_path):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps(_steps_doc([
        ("2024-03-04 09:00:00 +0100", 120, "Apple Watch|iPhone"),
        ("2024-03-04 09:01:00 +0100", 80, "iPhone"),
        ("2024-03-04 09:02:00 +0100", 60, "Rob’s Apple Watch|Rob’s iPhone"),
    ])))
    # the same minutes exported again: devices reordered, repeated, one more after the Watch synced
    b.write_text(json.dumps(_steps_doc([
        ("2024-03-04 09:00:00 +0100", 120, "iPhone|Apple Watch"),
        ("2024-03-04 09:01:00 +0100", 95, "Apple Watch|iPhone|Apple Watch"),
        ("2024-03-04 09:02:00 +0100", 60, " Rob’s iPhone | Rob’s Apple Watch "),
    ])))
    imported(run_cli, a)
    second = imported(run_cli, b)
    assert second["tables"]["samples"]["inserted"] == 0 and second["tables"]["samples"]["existing"] == 3
    rows = sql(run_cli, "SELECT value, device, source_name FROM samples ORDER BY start_ts")
    assert [r["value"] for r in rows] == [120, 95, 60]  # the later export wins, never added
    assert [r["device"] for r in rows] == ["Apple Watch|iPhone", "Apple Watch|iPhone", "Rob’s Apple Watch|Rob’s iPhone"]
    assert {r["source_name"] for r in rows} == {"hae_minutes"}
    assert day_totals(run_cli, "steps") == {"2024-03-04": 275}


def test_an_hour_is_counted_once_across_exports_and_devices(rhythm_home, run_cli, tmp_path):
    hours = [f"2024-03-04 {h:02d}:00:00 +0100" for h in (8, 9, 10)]
    first = tmp_path / "HealthAutoExport-1.json"
    first.write_text(json.dumps(_steps_doc([(h, 1000, "Apple Watch") for h in hours])))
    later = tmp_path / "HealthAutoExport-2.json"
    later.write_text(json.dumps(_steps_doc([(h, 1000, "Apple Watch|iPhone") for h in hours]
                                           + [("2024-03-04 11:00:00 +0100", 500, "iPhone")])))
    imported(run_cli, tmp_path)
    rows = sql(run_cli, "SELECT source_name, epoch(end_ts) - epoch(start_ts) AS secs FROM samples")
    assert len(rows) == 4 and {(r["source_name"], r["secs"]) for r in rows} == {("hae_hours", 3600)}
    assert day_totals(run_cli, "steps") == {"2024-03-04": 3500}


def test_a_day_exported_by_minute_and_by_day_is_not_added_up(rhythm_home, run_cli, tmp_path):
    d = hae.day_data(FIRST)
    (tmp_path / "minutes.json").write_text(hae.dumps(hae.payload([d])))
    (tmp_path / "days.csv").write_text(hae.metrics_csv([d], bucket="days"))
    imported(run_cli, tmp_path)
    series = {r["source_name"] for r in sql(run_cli, "SELECT DISTINCT source_name FROM samples WHERE metric = 'steps'")}
    assert series == {"hae_minutes", "hae_days"}
    assert day_totals(run_cli, "steps")[FIRST.isoformat()] == d.total("step_count")
    assert one(run_cli, f"SELECT steps FROM daily_activity WHERE local_day = '{FIRST}'") == d.total("step_count")


# -- units ----------------------------------------------------------------------------------------
def test_unit_variants_are_stored_in_the_same_units(run_cli, tmp_path, monkeypatch):
    days = [hae.day_data(FIRST + timedelta(days=i), seed=7) for i in range(4)]
    results = {}
    for label, units in (("metric", hae.METRIC), ("imperial", hae.IMPERIAL)):
        monkeypatch.setenv("RHYTHM_HOME", str(tmp_path / label))
        path = tmp_path / f"{label}.json"
        path.write_text(hae.dumps(hae.payload(days, units=units)))
        imported(run_cli, path)
        results[label] = {r["metric"]: (r["n"], r["total"], r["unit"]) for r in sql(run_cli, """
            SELECT metric, count(*) AS n, sum(value) AS total, any_value(unit) AS unit FROM samples GROUP BY metric""")}
        results[label]["workouts"] = sql(run_cli, "SELECT energy_kcal, distance_m, avg_hr_bpm FROM workouts ORDER BY 1")
    metric, imperial = results["metric"], results["imperial"]
    assert {"active_energy", "basal_energy", "distance", "heart_rate", "skin_temp", "steps"} <= set(metric)
    assert metric.keys() == imperial.keys()
    for m in metric:
        if m == "workouts":
            continue
        n, total, unit = metric[m]
        assert imperial[m][0] == n and imperial[m][2] == unit, m
        assert imperial[m][1] == pytest.approx(total, rel=2e-5), m  # kJ, mi, degF, lb rounded as the app does
    assert metric["distance"][2] == "m" and metric["active_energy"][2] == "kcal" and metric["skin_temp"][2] == "degC"
    assert metric["workouts"] and len(imperial["workouts"]) == len(metric["workouts"])
    for x, y in zip(metric["workouts"], imperial["workouts"], strict=True):
        assert y["energy_kcal"] == pytest.approx(x["energy_kcal"], rel=1e-5)
        assert (y["distance_m"] is None) == (x["distance_m"] is None)
        assert y["distance_m"] is None or y["distance_m"] == pytest.approx(x["distance_m"], rel=1e-5)


@pytest.mark.parametrize("name,units,qty,metric,value", [
    ("active_energy", "kJ", 41.84, "active_energy", 10.0),
    ("active_energy", "Cal", 10, "active_energy", 10.0),
    ("walking_running_distance", "mi", 1, "distance", 1609.344),
    ("walking_running_distance", "m", 250, "distance", 250.0),
    ("apple_exercise_time", "hr", 0.5, "exercise_time", 30.0),
    ("heart_rate_variability", "ms", 42, "hrv_sdnn", 42.0),
    ("respiratory_rate", "count/min", 14, "respiratory_rate", 14.0),
    ("blood_oxygen_saturation", "%", 0.97, "spo2", 97.0),
    ("blood_oxygen_saturation", "%", 98, "spo2", 98.0),
    ("apple_sleeping_wrist_temperature", "degF", 97.7, "skin_temp", 36.5),
    ("weight_body_mass", "lb", 154.3236, "weight", 70.0),
    ("vo2_max", "ml/(kg·min)", 41.2, "vo2max", 41.2),
])
def test_each_unit_variant_converts(rhythm_home, run_cli, tmp_path, name, units, qty, metric, value):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"data": {"metrics": [{"name": name, "units": units, "data": [
        {"date": "2024-03-04 10:00:00 +0100", "qty": qty, "source": "Apple Watch"}]}]}}))
    imported(run_cli, path)
    rows = sql(run_cli, "SELECT metric, value FROM samples")
    assert [r["metric"] for r in rows] == [metric]
    assert rows[0]["value"] == pytest.approx(value, rel=1e-4)


# -- heart rate, sleep, workouts ------------------------------------------------------------------
def test_heart_rate_keeps_min_and_max_beside_the_average(rhythm_home, run_cli, tmp_path):
    path = tmp_path / "hr.json"
    path.write_text(json.dumps({"data": {"metrics": [{"name": "heart_rate", "units": "count/min", "data": [
        {"date": "2024-03-04 10:00:00 +0100", "Min": 61, "Avg": 66.5, "Max": 74, "source": "Apple Watch"},
        {"date": "2024-03-04 10:01:00 +0100", "Min": 63, "Avg": 64, "Max": 65, "source": "Apple Watch"}]}]}}))
    imported(run_cli, path)
    rows = sql(run_cli, "SELECT value, detail, unit, source_name, epoch(end_ts) - epoch(start_ts) AS secs "
                        "FROM samples ORDER BY start_ts")
    assert [(r["value"], json.loads(r["detail"])) for r in rows] == [(66.5, {"min": 61, "max": 74}),
                                                                     (64, {"min": 63, "max": 65})]
    assert {(r["unit"], r["source_name"], r["secs"]) for r in rows} == {("bpm", "hae", 0)}


def test_per_stage_and_aggregated_sleep_are_one_night(rhythm_home, run_cli, tmp_path):
    days = [hae.day_data(FIRST + timedelta(days=i), seed=11) for i in range(3)]
    stages = tmp_path / "stages.json"
    stages.write_text(hae.dumps(hae.payload(days, sleep="stages", drop=tuple(hae.UNIT_OF))))
    imported(run_cli, stages)
    nights = sql(run_cli, "SELECT * FROM sleep_sessions ORDER BY local_day")
    assert [n["session_id"] for n in nights] == [f"night:{d.day}" for d in days]
    for n, d in zip(nights, days, strict=True):
        assert n["sleep_min"] == pytest.approx(hae.expected_sleep_min(d), abs=1e-6)
        bed = next((s, e) for st, s, e, _ in d.segments if st == "In Bed")
        assert n["in_bed_min"] == pytest.approx((bed[1] - bed[0]).total_seconds() / 60)
        assert n["deep_min"] + n["rem_min"] + n["light_min"] == pytest.approx(n["sleep_min"])
        assert not n["is_nap"] and n["tz_offset_min"] == 60
    segments = sum(len(d.segments) for d in days)
    assert one(run_cli, "SELECT count(*) FROM samples WHERE metric = 'sleep_stage'") == segments
    # the aggregated form of the same nights, and the stages again: still one row a night
    agg = tmp_path / "aggregated.json"
    agg.write_text(hae.dumps(hae.payload(days, sleep="aggregated", drop=tuple(hae.UNIT_OF))))
    second = imported(run_cli, agg)
    assert second["tables"]["sleep_sessions"]["inserted"] == 0
    again = sql(run_cli, "SELECT session_id, sleep_min, in_bed_min, deep_min FROM sleep_sessions ORDER BY local_day")
    assert [a["session_id"] for a in again] == [n["session_id"] for n in nights]
    for a, n in zip(again, nights, strict=True):
        assert a["sleep_min"] == pytest.approx(n["sleep_min"], abs=0.01)  # hours written to 4 decimals
        assert a["deep_min"] == pytest.approx(n["deep_min"], abs=0.01)
    assert one(run_cli, "SELECT count(*) FROM daily_sleep") == 3


def test_the_older_aggregated_sleep_form_has_no_stages(rhythm_home, run_cli, tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"data": {"metrics": [{"name": "sleep_analysis", "units": "hr", "data": [{
        "date": "2024-03-05", "asleep": 7.25, "sleepStart": "2024-03-04 23:40:00 +0100",
        "sleepEnd": "2024-03-05 07:05:00 +0100", "sleepSource": "Apple Watch", "inBed": 7.9,
        "inBedStart": "2024-03-04 23:10:00 +0100", "inBedEnd": "2024-03-05 07:15:00 +0100", "inBedSource": "iPhone"}]}]}}))
    imported(run_cli, path)
    n = sql(run_cli, "SELECT * FROM sleep_sessions")[0]
    assert n["session_id"] == "night:2024-03-05" and n["local_day"] == "2024-03-05"
    assert (n["sleep_min"], n["in_bed_min"]) == (435, pytest.approx(474))
    assert n["deep_min"] is None and n["rem_min"] is None and n["awake_min"] is None  # never invented
    assert n["efficiency_pct"] == pytest.approx(91.8)


def test_workouts_with_heart_rate_data(rhythm_home, run_cli, tmp_path):
    days = [hae.day_data(FIRST + timedelta(days=i), seed=5) for i in range(8)]
    made = [w for d in days for w in d.workouts]
    assert any(w["with_summary"] for w in made) and any(not w["with_summary"] for w in made)
    path = tmp_path / "workouts.json"
    path.write_text(hae.dumps(hae.payload(days, units=hae.IMPERIAL)))
    imported(run_cli, path)
    rows = sql(run_cli, "SELECT * FROM workouts ORDER BY start_ts")
    assert len(rows) == len(made)
    for r, w in zip(rows, made, strict=True):
        hr = w["hr_minutes"]
        assert r["sport"] == w["name"].lower().replace(" ", "_")
        assert r["workout_id"] == f"{w['start'].astimezone(UTC):%Y-%m-%dT%H:%MZ}/{r['sport']}"
        assert r["avg_hr_bpm"] == pytest.approx(round(sum(a for _, _, a, _ in hr) / len(hr), 1), abs=0.051)
        assert r["max_hr_bpm"] == max(x for *_, x in hr)
        assert r["duration_min"] == pytest.approx(w["duration"] / 60, abs=1e-3)
        assert r["energy_kcal"] == pytest.approx(w["energy_kcal"], rel=1e-5)
        assert (r["distance_m"] is None) == (w["distance_km"] is None)
    raw = sql(run_cli, "SELECT natural_key, payload FROM raw_hae WHERE kind = 'workout'")
    assert {x["natural_key"] for x in raw} == {r["workout_id"] for r in rows}
    assert all(json.loads(x["payload"])["heartRateData"] for x in raw)  # kept as received


# -- CSV ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("zone,offset", [("Europe/Amsterdam", 60), ("America/New_York", -300)])
def test_csv_metrics_and_workouts_in_the_configured_zone(rhythm_home, run_cli, tmp_path, monkeypatch, zone, offset):
    monkeypatch.setenv("RHYTHM_TIMEZONE", zone)
    days = [hae.day_data(FIRST + timedelta(days=i), seed=9) for i in range(4)]
    folder = tmp_path / "csv"
    folder.mkdir()
    (folder / "HealthAutoExport-2024-03-04-2024-03-07.csv").write_text(hae.metrics_csv(days, units=hae.IMPERIAL))
    (folder / "Workouts-2024-03-04-2024-03-07.csv").write_text(hae.workouts_csv(days, units=hae.IMPERIAL))
    (folder / "Outdoor Run-Heart Rate-20240304_0710.csv").write_text("Date/Time,Min (count/min),Max (count/min),"
                                                                     "Avg (count/min)\n2024-03-04 07:10:00,120,130,125\n")
    imported(run_cli, folder)
    steps = day_totals(run_cli, "steps")
    for d in days:
        assert steps[d.day.isoformat()] == d.total("step_count")
    assert {r["o"] for r in sql(run_cli, "SELECT DISTINCT tz_offset_min AS o FROM samples")} == {offset}
    assert one(run_cli, "SELECT count(*) FROM samples WHERE metric = 'steps'") == 4  # one row a day
    first_row = sql(run_cli, "SELECT epoch(start_ts) AS t, source_name FROM samples WHERE metric = 'steps' "
                             "ORDER BY start_ts LIMIT 1")[0]
    assert first_row["t"] == datetime(2024, 3, 4, tzinfo=ZoneInfo(zone)).timestamp()  # local midnight
    assert first_row["source_name"] == "hae_days"
    nights = sql(run_cli, "SELECT local_day, sleep_min, deep_min FROM sleep_sessions ORDER BY 1")
    assert [n["local_day"] for n in nights] == [d.day.isoformat() for d in days]
    for n, d in zip(nights, days, strict=True):
        assert n["sleep_min"] == pytest.approx(hae.expected_sleep_min(d), abs=0.01)
    workouts = sql(run_cli, "SELECT * FROM workouts ORDER BY start_ts")
    made = [w for d in days for w in d.workouts]
    assert len(workouts) == len(made) and all(w["tz_offset_min"] == offset for w in workouts)
    for r, w in zip(workouts, made, strict=True):
        assert r["energy_kcal"] == pytest.approx(w["energy_kcal"], rel=1e-5)  # written in kJ
        assert r["max_hr_bpm"] == max(x for *_, x in w["hr_minutes"])


def test_a_workout_in_json_and_in_csv_is_one_workout(rhythm_home, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Amsterdam")  # the JSON's +0100 in March
    days = [hae.day_data(FIRST + timedelta(days=i), seed=5) for i in range(5)]
    (tmp_path / "a.json").write_text(hae.dumps(hae.payload(days)))
    (tmp_path / "Workouts-x.csv").write_text(hae.workouts_csv(days))
    imported(run_cli, tmp_path)
    assert one(run_cli, "SELECT count(*) FROM workouts") == sum(len(d.workouts) for d in days)


# -- raw payloads ---------------------------------------------------------------------------------
def test_raw_payloads_are_kept_as_received(rhythm_home, run_cli, tmp_path):
    d = hae.day_data(FIRST, seed=3)
    doc = hae.payload([d])
    doc["data"]["stateOfMind"] = [{"id": "som-1", "kind": "momentaryEmotion", "valence": 0.4,
                                   "start": "2024-03-04 12:00:00 +0100", "end": "2024-03-04 12:00:00 +0100"}]
    path = tmp_path / "day.json"
    path.write_text(hae.dumps(doc))
    imported(run_cli, path)
    kinds = {r["kind"]: r["n"] for r in sql(run_cli, "SELECT kind, count(*) AS n FROM raw_hae GROUP BY kind")}
    assert kinds["stateOfMind"] == 1 and kinds["workout"] == len(d.workouts)
    for name in ("dietary_water", "step_count", "heart_rate"):  # used or not, every point is kept
        rows = sql(run_cli, f"SELECT payload FROM raw_hae WHERE kind = 'metric' AND natural_key LIKE '{name}|%'")
        pieces = [json.loads(r["payload"]) for r in rows]
        assert all(len(p["data"]) <= 120 for p in pieces)  # small rows (payload.CHUNK_POINTS)
        sent = next(m for m in doc["data"]["metrics"] if m["name"] == name)
        assert {p["units"] for p in pieces} == {sent["units"]}
        kept = sorted((pt for p in pieces for pt in p["data"]), key=lambda pt: pt["date"])
        assert kept == sorted(sent["data"], key=lambda pt: pt["date"])
    stored = {r["metric"] for r in sql(run_cli, "SELECT DISTINCT metric FROM samples")}
    assert stored == {JSON_METRICS[m["name"]].metric for m in doc["data"]["metrics"]
                      if m["name"] in JSON_METRICS and m["data"]}  # dietary_water, time_in_daylight: raw only


# -- bad input: one line, nothing stored ---------------------------------------------------------
def _bad_cases(tmp_path: Path) -> list[tuple[Path, list[str]]]:
    good = hae.payload([hae.day_data(FIRST, seed=4)])
    text = hae.dumps(good)
    cases = []

    def case(name: str, content: str, *expected: str) -> None:
        p = tmp_path / name
        p.write_text(content)
        cases.append((p, [name, *expected]))

    case("truncated.json", text[: len(text) // 2], "line ", "column", "invalid JSON")
    doc = json.loads(text)
    hr = [m["name"] for m in doc["data"]["metrics"]].index("heart_rate")
    doc["data"]["metrics"][hr]["data"][17]["date"] = "2024-13-04 10:00:00 +0100"
    case("bad_date.json", json.dumps(doc), f"data.metrics[{hr}].data[17]", "'date'")
    doc = json.loads(text)
    doc["data"]["metrics"][0]["data"][5]["qty"] = "12"
    case("string_qty.json", json.dumps(doc), "data.metrics[0].data[5]", "not a number")
    doc = json.loads(text)
    doc["data"]["metrics"][0]["units"] = "furlongs"
    case("bad_unit.json", json.dumps(doc), "data.metrics[0]", "unknown unit 'furlongs'")
    doc = json.loads(text)
    doc["data"]["workouts"][0]["end"] = "yesterday" if doc["data"]["workouts"] else None
    doc["data"]["workouts"] = doc["data"]["workouts"] or [{"name": "Run", "start": "x", "end": "y"}]
    case("bad_workout.json", json.dumps(doc), "data.workouts[0]", "workout")
    case("not_hae.json", json.dumps({"foo": [1, 2]}), "no 'data' object")
    case("bad.csv", "Date/Time,Step Count (count)\n2024-03-04 00:00:00,100\n2024-03-05 00:00:00,many\n",
         "line 3", "not a number")
    case("bad_time.csv", "Date/Time,Step Count (count)\n04/03/2024 00:00,100\n", "line 2", "yyyy-MM-dd")
    case("not_hae.csv", "a,b\n1,2\n", "not a Health Auto Export")
    return cases


@pytest.mark.slow
def test_bad_inputs_are_one_clear_line_and_change_nothing(rhythm_home, run_cli, tmp_path):
    cases = _bad_cases(tmp_path)
    for path, expected in cases:  # into an empty database: not even the raw table appears
        code, _, err = run_cli("import", "hae", path)
        assert code == 1, path
        assert len(err.strip().splitlines()) == 1, err
        for e in expected:
            assert e in err, (e, err)
    assert counts(run_cli) == {"samples": 0, "sleep_sessions": 0, "workouts": 0, "runs": 0, "raw": 0}
    good = tmp_path / "good"
    hae.daily_files(good, FIRST, 2)
    imported(run_cli, good)
    before = counts(run_cli)
    for path, _ in cases:
        assert run_cli("import", "hae", path)[0] == 1
    assert counts(run_cli) == before


def test_one_bad_file_in_a_folder_stores_none_of_it(rhythm_home, run_cli, tmp_path):
    folder = tmp_path / "export"
    files = hae.daily_files(folder, FIRST, 3)
    files[2].write_text(files[2].read_text()[:-200])  # the last file truncated
    code, _, err = run_cli("import", "hae", folder)
    assert code == 1 and files[2].name in err and len(err.strip().splitlines()) == 1
    assert counts(run_cli)["samples"] == 0
    code, _, err = run_cli("import", "hae", tmp_path / "empty")
    assert code == 1 and "no such file or folder" in err
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "notes.txt").write_text("hi")
    code, _, err = run_cli("import", "hae", tmp_path / "nothing")
    assert code == 1 and "no Health Auto Export JSON or CSV files" in err


def test_an_empty_push_is_fine(rhythm_home, run_cli, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"data": {"metrics": [], "workouts": []}}')
    assert imported(run_cli, path)["records"] == 0


# -- mapping ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_rhythm_map_gives_meters_for_a_person_with_only_health_auto_export(rhythm_home, run_cli, tmp_path):
    hae.daily_files(tmp_path / "export", FIRST, 10, seed=21)
    imported(run_cli, tmp_path / "export")
    code, out, err = run_cli("map", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["sources"]["sleep_sessions"] == 11 and summary["sources"]["workouts"] > 0
    assert summary["slots_with_meters"] > 0
    rows = sql(run_cli, f"SELECT * FROM meters WHERE local_day BETWEEN '{FIRST}' AND '{FIRST + timedelta(days=8)}'")
    assert len(rows) == 9 * 4
    assert all(r["vitality"] is not None and r["cognition"] is not None for r in rows)
    assert all(r["confidence"] > 0 for r in rows)
    evidence = json.loads(rows[-1]["evidence"])
    assert evidence  # the meters say which signals produced them
    assert any(r["action"] == "SLEEP" for r in sql(run_cli, "SELECT action FROM slot_actions"))
