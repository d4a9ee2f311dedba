"""Impossible values from Health Auto Export (issue 41): NaN, infinity, negative or inhuman
energy, distance, heart rate, sleep minutes and steps, in a file (`rhythm import hae`) and in
a push (`rhythm serve hae`, real HTTP on 127.0.0.1). Each is rejected by the one range check
every source passes through (common/ranges.py, applied by storage/writer.py), counted in the
import's summary, and never stored; the rest of the import is stored as usual."""

from __future__ import annotations

import http.client
import json
import math
import threading
from collections.abc import Callable
from datetime import date
from pathlib import Path

import duckdb
import pytest

from common import ranges
from lab.people import hae
from tests.hostile.conftest import Sealed, snapshot

DAY = date(2024, 3, 4)
SECRET = "correct-horse-battery-staple-41"
Mutate = Callable[[dict], None]


def base() -> dict:
    """A small real-shaped push: a few steps and heart-rate points, one night, one workout."""
    doc = hae.payload([hae.day_data(DAY)])
    keep = {"step_count": 3, "heart_rate": 3, "sleep_analysis": 1}
    doc["data"]["metrics"] = [dict(m, data=m["data"][:keep[m["name"]]]) for m in doc["data"]["metrics"]
                              if m["name"] in keep]
    w = doc["data"]["workouts"][0]
    w.update(heartRateData=[], heartRateRecovery=[], distance={"qty": 5.0, "units": "km"},
             heartRate={"min": {"qty": 90, "units": "bpm"}, "avg": {"qty": 130, "units": "bpm"},
                        "max": {"qty": 170, "units": "bpm"}})
    doc["data"]["workouts"] = [w]
    return doc


def metric(doc: dict, name: str) -> dict:
    return next(m for m in doc["data"]["metrics"] if m["name"] == name)


def workout(field: str, value: float, part: str | None = None) -> Mutate:
    def mutate(doc: dict) -> None:
        w = doc["data"]["workouts"][0]
        if part:
            w[field][part]["qty"] = value
        else:
            w[field]["qty"] = value

    return mutate


def sleep(field: str, value: float) -> Mutate:
    return lambda doc: metric(doc, "sleep_analysis")["data"][0].__setitem__(field, value)


def point(name: str, key: str, value: float, n: int = 1) -> Mutate:
    def mutate(doc: dict) -> None:
        for p in metric(doc, name)["data"][:n]:
            p[key] = value

    return mutate


NAN, INF = float("nan"), float("inf")
CASES: list[tuple[str, Mutate, str]] = [
    ("workout-energy-nan", workout("activeEnergyBurned", NAN), "workouts.energy_kcal: NaN or infinite"),
    ("workout-energy-inf", workout("activeEnergyBurned", INF), "workouts.energy_kcal: NaN or infinite"),
    ("workout-energy-1e308", workout("activeEnergyBurned", 1e308), "workouts.energy_kcal: above 50000"),
    ("workout-distance-nan", workout("distance", NAN), "workouts.distance_m: NaN or infinite"),
    ("workout-distance-negative", workout("distance", -5.0), "workouts.distance_m: negative"),
    ("workout-avg-hr-negative", workout("heartRate", -130, "avg"), "workouts.avg_hr_bpm: negative"),
    ("workout-avg-hr-inf", workout("heartRate", INF, "avg"), "workouts.avg_hr_bpm: NaN or infinite"),
    ("workout-max-hr-950", workout("heartRate", 950, "max"), "workouts.max_hr_bpm: above 300"),
    ("workout-max-hr-nan", workout("heartRate", NAN, "max"), "workouts.max_hr_bpm: NaN or infinite"),
    ("sleep-total-nan", sleep("totalSleep", NAN), "sleep_sessions.sleep_min: NaN or infinite"),
    ("sleep-deep-nan", sleep("deep", NAN), "sleep_sessions.deep_min: NaN or infinite"),
    ("sleep-total-48-hours", sleep("totalSleep", 48.0), "sleep_sessions.sleep_min: above 1440"),
    ("steps-1e308-twice", point("step_count", "qty", 1e308, n=2), "samples.steps: above 500000"),
    ("heart-rate-negative", point("heart_rate", "Avg", -70.0), "samples.heart_rate: negative"),
    ("heart-rate-1e308", point("heart_rate", "Avg", 1e308), "samples.heart_rate: above 300"),
]
EXPECTED_COUNT = {"steps-1e308-twice": 2}
ALSO = {"sleep-total-nan": {"sleep_sessions.efficiency_pct: NaN or infinite": 1},
        "sleep-total-48-hours": {"sleep_sessions.efficiency_pct: above 100": 1}}  # derived from it by the reader


def push_body(mutate: Mutate) -> bytes:
    doc = base()
    mutate(doc)
    return json.dumps(doc).encode()  # NaN and Infinity as JavaScript writes them


def impossible_rows(db: Path) -> list[tuple]:
    """Every stored value that breaks common/ranges.py (must be none)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = []
        for name, (lo, hi) in ranges.METRICS.items():
            out += con.execute(f"SELECT metric, value FROM samples WHERE metric = '{name}' AND "
                               f"(NOT isfinite(value) OR value < {lo} OR value > {hi})").fetchall()
        for table, cols in ranges.FIELDS.items():
            for col, (lo, hi) in cols.items():
                cond = [f"NOT isfinite({col})"] + ([f"{col} < {lo}"] if lo is not None else []) + (
                    [f"{col} > {hi}"] if hi is not None else [])
                out += [(table, col, *r) for r in con.execute(
                    f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL AND ({' OR '.join(cond)})").fetchall()]
        return out
    finally:
        con.close()


def stored_counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t} WHERE source = 'hae'").fetchone()[0]
                for t in ("samples", "sleep_sessions", "workouts")}
    finally:
        con.close()


def check(case: str, rejected: dict[str, int], key: str, db: Path) -> None:
    assert rejected == {key: EXPECTED_COUNT.get(case, 1), **ALSO.get(case, {})}
    assert impossible_rows(db) == []
    n = stored_counts(db)
    assert n["sleep_sessions"] == 1 and n["workouts"] == 1  # the row stays, the value does not
    steps = 3 - EXPECTED_COUNT.get(case, 1) if key.startswith("samples.steps") else 3
    hr = 2 if key.startswith("samples.heart_rate") else 3
    assert n["samples"] == steps + hr


@pytest.mark.parametrize(("case", "mutate", "key"), CASES, ids=[c[0] for c in CASES])
def test_an_impossible_value_in_a_file_is_rejected_and_counted(case, mutate, key, sealed: Sealed):
    path = sealed.input / "export.json"
    path.write_bytes(push_body(mutate))
    before = snapshot(sealed.db)
    rc, out, err = sealed.run_cli("import", "hae", path, "--json")
    assert rc == 0 and err == "", err
    check(case, json.loads(out)["rejected"], key, sealed.db)
    after = snapshot(sealed.db)
    for table in ("events", "raw_healthkit", "raw_garmin", "raw_whoop"):  # other sources untouched
        assert after[table] == before[table]
    # the same file again: nothing new, the rejection counted again, still nothing impossible
    rc, out, _ = sealed.run_cli("import", "hae", path, "--json")
    assert rc == 0 and json.loads(out)["rejected"] == {key: EXPECTED_COUNT.get(case, 1), **ALSO.get(case, {})}
    assert snapshot(sealed.db)["samples"] == after["samples"]


def test_the_cli_line_says_how_many_values_were_rejected(sealed: Sealed):
    path = sealed.input / "export.json"
    path.write_bytes(push_body(point("step_count", "qty", 1e308, n=2)))
    rc, out, err = sealed.run_cli("import", "hae", path)
    assert rc == 0 and err == ""
    assert "rejected as impossible: 2 values (2 samples.steps: above 500000)" in " ".join(out.split())


@pytest.fixture
def push_server(rhythm_home, monkeypatch):
    from rhythm.serve import serve
    from rhythm.settings import load_settings

    monkeypatch.setenv("RHYTHM_HAE_SECRET", SECRET)
    stop, ready = threading.Event(), []
    t = threading.Thread(target=serve, args=(load_settings(), "hae", 0),
                         kwargs={"on_ready": ready.append, "stop": stop, "handle_signals": False})
    t.start()
    for _ in range(200):
        if ready:
            break
        threading.Event().wait(0.05)
    host, port = ready[0].split("//")[1].split("/")[0].split(":")
    yield host, int(port), rhythm_home / "rhythm.duckdb"
    stop.set()
    t.join(timeout=30)


@pytest.mark.parametrize(("case", "mutate", "key"), CASES[::2], ids=[c[0] for c in CASES[::2]])
def test_an_impossible_value_in_a_push_is_rejected_and_counted(case, mutate, key, push_server):
    host, port, db = push_server
    con = http.client.HTTPConnection(host, port, timeout=60)
    con.request("POST", "/hae", body=push_body(mutate), headers={"Content-Type": "application/json",
                                                                "X-Rhythm-Secret": SECRET})
    r = con.getresponse()
    answer = json.loads(r.read())
    con.close()
    assert r.status == 200 and answer["ok"], answer
    check(case, answer["stored"]["rejected"], key, db)


def test_every_range_is_finite_and_non_negative_where_a_quantity_cannot_be():
    for bounds in [*ranges.METRICS.values(), *(b for cols in ranges.FIELDS.values() for b in cols.values())]:
        lo, hi = bounds
        assert lo is None or (lo == 0 and (hi is None or math.isfinite(hi)))
    assert ranges.metric_problem("steps", 1e308) == "above 500000"
    assert ranges.metric_problem("heart_rate", float("nan")) == "NaN or infinite"
    assert ranges.metric_problem("stress", -1) is None  # unbounded metrics: finite only
