"""Apple Health connector: real fixtures, the generated export (healthkit_xml, healthkit_zip),
synthetic exports built in tmp, the CLI end to end."""

from __future__ import annotations

import importlib
import json
import pyexpat
import sys
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from datetime import UTC, date, datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest

from common.errors import SourceFormatError
from common.records import RawRecord, RecordBatch, Sample, SleepSession, Workout
from connectors.healthkit import parser as parser_mod
from connectors.healthkit import read_export
from connectors.healthkit import source as source_mod
from connectors.healthkit import types as types_mod
from lab.people import healthkit as generated
from storage import open_db
from tests.fixtures import FIXTURES

APPLE = FIXTURES / "apple_health"
DOGSHEEP = APPLE / "dogsheep_export.xml"
ALX = APPLE / "alxdrcirilo_export.xml"

HR = "HKQuantityTypeIdentifierHeartRate"
WATCH_DEVICE = (
    "&lt;&lt;HKDevice: 0x28{n}&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, "
    "hardware:Watch6,1, software:9.0&gt;"
)
PHONE_DEVICE = (
    "&lt;&lt;HKDevice: 0x29{n}&gt;, name:iPhone, manufacturer:Apple Inc., model:iPhone, "
    "hardware:iPhone14,2, software:16.0&gt;"
)


# -- helpers ---------------------------------------------------------------------------------
def collect(path: Path, **kw) -> dict[str, list]:
    """Everything read_export yields, by kind; quantity batches flattened to dict rows."""
    out: dict[str, list] = {"samples": [], "raw": [], "sleep": [], "workouts": []}
    for rec in read_export(path, **kw):
        if isinstance(rec, RecordBatch) and rec.record_type is SleepSession:
            out["sleep"].extend(_session_records([rec]))
        elif isinstance(rec, RecordBatch) and rec.record_type is RawRecord:
            out["raw"].extend(RawRecord(**row) for row in pa.table(rec.columns).to_pylist())
        elif isinstance(rec, RecordBatch):
            assert rec.record_type is Sample
            out["samples"].extend(pa.table(rec.columns).to_pylist())
        elif isinstance(rec, Sample):
            out["samples"].append({n: getattr(rec, n) for n in rec.__slots__})
        elif isinstance(rec, RawRecord):
            out["raw"].append(rec)
        elif isinstance(rec, SleepSession):
            out["sleep"].append(rec)
        elif isinstance(rec, Workout):
            out["workouts"].append(rec)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected record {rec!r}")
    return out


def _session_records(batches) -> list[SleepSession]:
    """SleepSession objects from the connector's columnar session batches (instants in UTC:
    equal to the same instants in any offset)."""
    out = []
    for b in batches:
        assert isinstance(b, RecordBatch) and b.record_type is SleepSession
        out.extend(SleepSession(**row) for row in pa.table(b.columns).to_pylist())
    return out


def record(type_: str, source: str, start: str, end: str, value: str | None, *, unit: str | None = None,
           device: str | None = None, children: str = "") -> str:
    attrs = f'type="{type_}" sourceName="{source}" sourceVersion="1"'
    if device:
        attrs += f' device="{device}"'
    if unit:
        attrs += f' unit="{unit}"'
    attrs += f' creationDate="{end}" startDate="{start}" endDate="{end}"'
    if value is not None:
        attrs += f' value="{value}"'
    return f"  <Record {attrs}>{children}</Record>\n" if children else f"  <Record {attrs}/>\n"


def export_xml(body: str, locale: str = "en_GB") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE HealthData [\n<!ELEMENT HealthData ANY>\n]>\n'
        f'<HealthData locale="{locale}">\n <ExportDate value="2024-06-01 08:00:00 +0100"/>\n'
        f"{body}</HealthData>\n"
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def counts(home: Path) -> dict[str, int]:
    db_path = home / "rhythm.duckdb"
    if not db_path.exists():
        return {}
    with open_db(db_path, read_only=True, migrate=False) as db:
        return db.row_counts()


def query(home: Path, sql: str) -> list[tuple]:
    with open_db(home / "rhythm.duckdb", read_only=True, migrate=False) as db:
        return db.query(sql)[1]


# -- real fixtures and the generated export (lab/people/healthkit.py) -------------
PLUS2 = timezone(timedelta(hours=2))  # the generated export writes every date with +0200


def test_heart_rate_samples_match_an_independent_count(healthkit_xml):
    tree = ET.parse(healthkit_xml)
    hr = [r for r in tree.getroot().iter("Record") if r.get("type") == HR]
    got = [s for s in collect(healthkit_xml)["samples"] if s["metric"] == "heart_rate"]
    assert len(got) == len(hr) == generated.COUNTS[HR] == 400
    assert sorted(s["value"] for s in got) == sorted(float(r.get("value")) for r in hr)
    assert {s["unit"] for s in got} == {"bpm"}
    assert {s["source_name"] for s in got} == {generated.SOURCE_NAME}


def test_every_record_type_is_kept_including_unknown_ones(healthkit_xml):
    tree = ET.parse(healthkit_xml)
    expected = Counter(r.get("type") for r in tree.getroot().iter("Record"))
    assert expected == generated.COUNTS  # 28 types, up to 400 Records each
    got = collect(healthkit_xml)["samples"]
    assert len(got) == sum(expected.values()) == generated.RECORDS
    metrics = Counter(s["metric"] for s in got)
    assert metrics["steps"] == expected["HKQuantityTypeIdentifierStepCount"]
    assert metrics["hrv_sdnn"] == expected["HKQuantityTypeIdentifierHeartRateVariabilitySDNN"]
    assert metrics["sleep_stage"] == expected["HKCategoryTypeIdentifierSleepAnalysis"]
    # identifiers without a Rhythm name keep a snake_case one and Apple's unit
    assert metrics["walking_speed"] == expected["HKQuantityTypeIdentifierWalkingSpeed"]
    assert metrics["low_heart_rate_event"] == expected["HKCategoryTypeIdentifierLowHeartRateEvent"]
    assert {s["unit"] for s in got if s["metric"] == "walking_speed"} == {"km/hr"}


def test_offsets_are_kept_and_local_day_is_the_wall_clock_day(healthkit_xml):
    hrv = [s for s in collect(healthkit_xml)["samples"] if s["metric"] == "hrv_sdnn"]
    first = min(hrv, key=lambda s: s["start_ts"])
    # <Record ... startDate="2021-01-01 01:14:07 +0200" value="88.1042"> (generated.FIRST_HRV)
    local, value = generated.FIRST_HRV
    assert first["start_ts"] == local.replace(tzinfo=PLUS2) == datetime(2020, 12, 31, 23, 14, 7, tzinfo=UTC)
    assert first["tz_offset_min"] == 120
    assert first["local_day"] == date(2021, 1, 1)  # not the UTC day (Dec 31)
    assert first["value"] == pytest.approx(float(value))


def test_hrv_beat_lists_and_metadata_are_landed(healthkit_xml):
    out = collect(healthkit_xml)
    beats = [r for r in out["raw"] if r.kind == "record" and "HeartRateVariabilitySDNN" in r.natural_key]
    assert len(beats) == generated.COUNTS["HKQuantityTypeIdentifierHeartRateVariabilitySDNN"]
    hr = [s for s in out["samples"] if s["metric"] == "heart_rate"]
    assert all(s["detail"] and "HKMetadataKeyHeartRateMotionContext" in s["detail"] for s in hr)


def test_dogsheep_workout_activity_summary_and_me():
    out = collect(DOGSHEEP)
    (w,) = out["workouts"]
    assert w.sport == "running"
    assert w.duration_min == pytest.approx(5.19412346680959)
    assert w.distance_m == pytest.approx(0.4971749504535062 * 1609.344)
    assert w.energy_kcal == pytest.approx(48.745)
    assert w.start_ts == datetime(2016, 11, 14, 14, 25, 41, tzinfo=UTC)
    assert w.tz_offset_min == -420 and w.local_day == date(2016, 11, 14)
    assert w.source_name == "Apple\xa0Watch"  # as written (a no-break space), never altered
    kinds = Counter(r.kind for r in out["raw"])
    assert kinds["workout"] == 1 and kinds["activity_summary"] == 2 and kinds["me"] == 1
    rings = {(s["local_day"], s["metric"]): s["value"] for s in out["samples"] if s["metric"].startswith("ring_")}
    assert rings[(date(2016, 11, 15), "ring_active_energy")] == pytest.approx(590.252)
    assert rings[(date(2016, 11, 16), "ring_stand_hours_goal")] == 12
    bmi = next(s for s in out["samples"] if s["metric"] == "body_mass_index")
    assert '"Withings User Identifier":"12345"' in bmi["detail"]


def test_ios16_sleep_stages_give_sessions_per_source():
    out = collect(ALX)
    stages = sorted((s["source_name"], s["detail"], s["value"]) for s in out["samples"] if s["metric"] == "sleep_stage")
    assert stages == [
        ("Alexandre's Apple Watch", "core", pytest.approx(12.5)),
        ("Alexandre's iPhone", "in_bed", pytest.approx(85 / 60)),
    ]
    by_source = {s.source_name: s for s in out["sleep"]}
    watch = by_source["Alexandre's Apple Watch"]
    assert watch.sleep_min == pytest.approx(12.5) and watch.light_min == pytest.approx(12.5)
    assert watch.deep_min == 0 and watch.rem_min == 0 and watch.in_bed_min is None
    assert watch.local_day == date(2024, 1, 1) and watch.tz_offset_min == 120
    phone = by_source["Alexandre's iPhone"]
    assert phone.sleep_min is None  # in bed is never counted as asleep
    assert phone.in_bed_min == pytest.approx(85 / 60)
    dev = next(s for s in out["samples"] if s["metric"] == "heart_rate")["device"]
    assert dev.startswith("name:Apple Watch") and "0x" not in dev


def test_legacy_sleep_night_is_grouped_and_attributed_to_the_wake_up_day(healthkit_xml):
    tree = ET.parse(healthkit_xml)
    recs = [r for r in tree.getroot().iter("Record") if r.get("type") == "HKCategoryTypeIdentifierSleepAnalysis"]
    assert {r.get("value") for r in recs} <= {
        "HKCategoryValueSleepAnalysisInBed",
        "HKCategoryValueSleepAnalysisAsleepUnspecified",
    }
    sessions = collect(healthkit_xml)["sleep"]
    first = min(sessions, key=lambda s: s.start_ts)
    # one InBed Record 2021-01-01 02:41:33 .. 07:58:10 +0200 (generated.FIRST_NIGHT)
    start, end = generated.FIRST_NIGHT
    assert first.start_ts == start.replace(tzinfo=PLUS2) == datetime(2021, 1, 1, 0, 41, 33, tzinfo=UTC)
    assert first.local_day == date(2021, 1, 1)
    assert first.in_bed_min == pytest.approx((end - start).total_seconds() / 60)
    assert first.light_min is None and first.deep_min is None  # legacy data: no stages


# -- synthetic exports ---------------------------------------------------------------------------
def night(source: str, device: str | None = None) -> str:
    """A staged night across midnight: in bed 22:50-07:10, asleep 23:00-07:00 with an awake gap."""
    s = "HKCategoryTypeIdentifierSleepAnalysis"
    v = "HKCategoryValueSleepAnalysis"
    return "".join(
        [
            record(s, source, "2024-03-01 22:50:00 +0100", "2024-03-02 07:10:00 +0100", v + "InBed", device=device),
            record(s, source, "2024-03-01 23:00:00 +0100", "2024-03-02 01:00:00 +0100", v + "AsleepCore", device=device),
            record(s, source, "2024-03-02 01:00:00 +0100", "2024-03-02 02:00:00 +0100", v + "AsleepDeep", device=device),
            record(s, source, "2024-03-02 02:00:00 +0100", "2024-03-02 02:30:00 +0100", v + "Awake", device=device),
            record(s, source, "2024-03-02 02:30:00 +0100", "2024-03-02 04:00:00 +0100", v + "AsleepREM", device=device),
            record(s, source, "2024-03-02 04:00:00 +0100", "2024-03-02 07:00:00 +0100", v + "AsleepCore", device=device),
        ]
    )


def test_staged_night_minutes(tmp_path):
    out = collect(write(tmp_path, "export.xml", export_xml(night("Watch"))))
    (s,) = out["sleep"]
    assert s.local_day == date(2024, 3, 2)  # the day the person woke up on
    assert s.sleep_min == pytest.approx(480 - 30)  # 23:00-07:00 minus the awake half hour
    assert (s.light_min, s.deep_min, s.rem_min, s.awake_min) == (300, 60, 90, 30)
    assert s.in_bed_min == pytest.approx(500)
    assert s.efficiency_pct == pytest.approx(90.0)
    assert not s.is_nap


def test_units_are_converted_and_unknown_units_kept(tmp_path):
    body = (
        record("HKQuantityTypeIdentifierActiveEnergyBurned", "Watch", "2024-03-02 10:00:00 +0100",
               "2024-03-02 10:01:00 +0100", "41.84", unit="kJ")
        + record("HKQuantityTypeIdentifierOxygenSaturation", "Watch", "2024-03-02 03:00:00 +0100",
                 "2024-03-02 03:00:00 +0100", "0.97", unit="%")
        + record("HKQuantityTypeIdentifierDistanceWalkingRunning", "Watch", "2024-03-02 10:00:00 +0100",
                 "2024-03-02 10:05:00 +0100", "1.5", unit="km")
        + record("HKCategoryTypeIdentifierMindfulSession", "Breathe", "2024-03-02 12:00:00 +0530",
                 "2024-03-02 12:10:00 +0530", None)
    )
    got = {s["metric"]: s for s in collect(write(tmp_path, "e.xml", export_xml(body)))["samples"]}
    assert got["active_energy"]["value"] == pytest.approx(10.0) and got["active_energy"]["unit"] == "kcal"
    assert got["spo2"]["value"] == pytest.approx(97.0) and got["spo2"]["unit"] == "pct"
    assert got["distance"]["value"] == pytest.approx(1500.0) and got["distance"]["unit"] == "m"
    assert got["mindful"]["value"] == pytest.approx(10.0) and got["mindful"]["tz_offset_min"] == 330


def test_small_chunks_and_batches_give_the_same_rows(monkeypatch, healthkit_xml):
    """Records split across read chunks and batch boundaries keep their metadata and beats."""
    whole = collect(healthkit_xml)
    monkeypatch.setattr(source_mod, "CHUNK", 997)
    monkeypatch.setattr(parser_mod, "BATCH_ROWS", 50)
    batches = [r for r in read_export(healthkit_xml) if isinstance(r, RecordBatch)]
    assert len(batches) > 50  # streamed in many pieces
    pieces = collect(healthkit_xml)

    def key(s):
        return (s["metric"], s["source_name"], s["start_ts"], s["end_ts"], s["value"], s["detail"])

    assert sorted(map(key, pieces["samples"])) == sorted(map(key, whole["samples"]))
    assert sorted(r.payload for r in pieces["raw"]) == sorted(r.payload for r in whole["raw"])


def test_progress_reports_bytes_up_to_the_file_size(healthkit_zip):
    seen: list[tuple[float, float | None]] = []
    for _ in read_export(healthkit_zip, progress=lambda done, total: seen.append((done, total))):
        pass
    size = healthkit_zip.stat().st_size
    assert seen[-1] == (size, size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_localised_xml_name_inside_the_zip_is_found(tmp_path):
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("apple_health_export/export_cda.xml", "<ClinicalDocument/>" + " " * 5000)
        zf.writestr("apple_health_export/导出.xml", DOGSHEEP.read_text(encoding="utf-8"))
        zf.writestr("apple_health_export/workout-routes/route_1.gpx", "<gpx/>")
    assert source_mod.locate(z).member == "apple_health_export/导出.xml"
    assert len(collect(z)["workouts"]) == 1


# -- errors -------------------------------------------------------------------------------------
def test_error_for_each_kind_of_bad_input(tmp_path, healthkit_zip):
    half = tmp_path / "half.zip"
    half.write_bytes(healthkit_zip.read_bytes()[: healthkit_zip.stat().st_size // 2])
    no_xml = tmp_path / "noxml.zip"
    with zipfile.ZipFile(no_xml, "w") as zf:
        zf.writestr("apple_health_export/workout-routes/r.gpx", "<gpx/>")
    bad = write(tmp_path, "bad.xml", export_xml(record(HR, "W", "2024-03-02 10:00:00 +0100",
                                                       "2024-03-02 10:00:00 +0100", "60", unit="count/min")
                                                .replace("/>", ">", 1)))
    cases = [
        (half, "truncated"),
        (no_xml, "no Apple Health export XML"),
        (bad, "malformed XML"),
        (tmp_path / "missing.zip", "no such file"),
    ]
    for path, words in cases:
        with pytest.raises(SourceFormatError) as err:
            list(read_export(path))
        assert words in str(err.value) and str(path) in str(err.value)
    with pytest.raises(SourceFormatError, match=r"line 8, column \d+\): malformed XML: mismatched tag"):
        list(read_export(bad))


def test_cli_bad_input_is_one_line_and_leaves_the_database_unchanged(tmp_path, rhythm_home, run_cli, healthkit_xml,
                                                                     healthkit_zip):
    code, out, _ = run_cli("import", "healthkit", str(DOGSHEEP))
    assert code == 0
    before = counts(rhythm_home)
    assert before["workouts"] == 1
    half = tmp_path / "half.zip"
    half.write_bytes(healthkit_zip.read_bytes()[: healthkit_zip.stat().st_size // 2])
    truncated_xml = tmp_path / "cut.xml"
    data = healthkit_xml.read_bytes()
    truncated_xml.write_bytes(data[: len(data) * 2 // 3])  # valid records, then cut
    for bad in (half, truncated_xml):
        code, out, err = run_cli("import", "healthkit", str(bad))
        assert code != 0
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and bad.name in lines[0]
        after = counts(rhythm_home)
        assert {k: v for k, v in after.items() if k != "runs"} == {
            k: v for k, v in before.items() if k != "runs"
        }
    assert "line" in lines[0] and "column" in lines[0]


# -- database: idempotency and the source-priority rule ----------------------------------------
def test_reimport_and_overlapping_newer_export_add_only_new_rows(tmp_path, rhythm_home, run_cli, healthkit_xml,
                                                                 healthkit_zip):
    assert run_cli("import", "healthkit", str(healthkit_zip))[0] == 0
    first = counts(rhythm_home)
    assert first["samples"] == len({
        (r.get("type"), r.get("sourceName"), r.get("startDate"), r.get("endDate"))
        for r in ET.parse(healthkit_xml).getroot().iter("Record")
    })  # the export writes a few Records twice (the iPhone copies Watch minutes): one row each
    assert first["samples"] < generated.RECORDS
    assert run_cli("import", "healthkit", str(healthkit_zip))[0] == 0
    again = counts(rhythm_home)
    assert {k: v for k, v in again.items() if k != "runs"} == {k: v for k, v in first.items() if k != "runs"}

    newer = healthkit_xml.read_text(encoding="utf-8").replace(
        "</HealthData>",
        record(HR, generated.SOURCE_NAME, "2022-01-05 09:00:00 +0100", "2022-01-05 09:00:00 +0100", "61",
               unit="count/min")
        + record(HR, generated.SOURCE_NAME, "2022-01-05 09:05:00 +0100", "2022-01-05 09:05:00 +0100", "64",
                 unit="count/min")
        + "</HealthData>",
    )
    code, out, _ = run_cli("import", "healthkit", str(write(tmp_path, "newer.xml", newer)))
    assert code == 0
    final = counts(rhythm_home)
    assert final["samples"] == first["samples"] + 2
    assert final["sleep_sessions"] == first["sleep_sessions"]
    assert final["raw_healthkit"] == first["raw_healthkit"]
    assert "duplicates skipped" in out


def test_daily_totals_take_one_source_per_hour(tmp_path, rhythm_home, run_cli):
    steps = "HKQuantityTypeIdentifierStepCount"
    watch, phone = WATCH_DEVICE.format(n=1), PHONE_DEVICE.format(n=2)
    body = (
        # 09:00 walk logged by both: the Watch wins, the iPhone's steps are not added
        record(steps, "Anna's Apple Watch", "2024-03-02 09:00:00 +0100", "2024-03-02 09:10:00 +0100", "1000", unit="count", device=watch)
        + record(steps, "Anna's Apple Watch", "2024-03-02 09:20:00 +0100", "2024-03-02 09:30:00 +0100", "500", unit="count", device=watch)
        + record(steps, "Anna's iPhone", "2024-03-02 09:00:00 +0100", "2024-03-02 09:30:00 +0100", "1400", unit="count", device=phone)
        # 14:00 the watch was off: the iPhone's steps count
        + record(steps, "Anna's iPhone", "2024-03-02 14:00:00 +0100", "2024-03-02 14:20:00 +0100", "800", unit="count", device=phone)
        # a third-party app duplicating the 09:00 hour ranks below both
        + record(steps, "Pedometer++", "2024-03-02 09:05:00 +0100", "2024-03-02 09:15:00 +0100", "2000", unit="count")
        # late evening in local time (UTC next day would be wrong)
        + record(steps, "Anna's Apple Watch", "2024-03-02 23:30:00 +0100", "2024-03-02 23:40:00 +0100", "100", unit="count", device=watch)
    )
    assert run_cli("import", "healthkit", str(write(tmp_path, "two.xml", export_xml(body))))[0] == 0
    rows = query(rhythm_home, "SELECT local_day, total, hours, sources FROM healthkit_daily_totals WHERE metric = 'steps'")
    assert rows == [(date(2024, 3, 2), 1000 + 500 + 800 + 100, 3, "Anna's Apple Watch, Anna's iPhone")]
    naive = query(rhythm_home, "SELECT sum(value) FROM samples WHERE metric = 'steps'")[0][0]
    assert naive == 5800  # what summing every source would have claimed


# -- the fast paths give exactly what a plain element-by-element reading gives -------------------
def reference_rows(path: Path) -> tuple[Counter, Counter]:
    """(samples, raw Record payloads) of an export read the plain way: ElementTree, one
    element at a time, the rules of the README. A second implementation to check the
    parser's columnar paths and its cut-out HRV beat lists against."""
    samples: Counter = Counter()
    raw: Counter = Counter()
    depth = 0
    for event, el in ET.iterparse(path, events=("start", "end")):
        if event == "start":
            depth += 1
            continue
        depth -= 1
        if el.tag != "Record" or depth != 1:  # Records inside a Correlation are repeats
            if depth == 1:
                el.clear()
            continue
        a = dict(el.attrib)
        md = [(c.get("key", ""), c.get("value", "")) for c in el if c.tag == "MetadataEntry"]
        beats = [[b.get("time"), b.get("bpm")] for h in el if h.tag == "HeartRateVariabilityMetadataList"
                 for b in h if b.tag == "InstantaneousBeatsPerMinute"]
        start, off = types_mod.parse_date(a["startDate"])
        end, _ = types_mod.parse_date(a["endDate"])
        t, v = a["type"], a.get("value")
        key = f"{t}|{a['sourceName']}|{a['startDate']}|{a['endDate']}"
        try:
            number = float(v) if v is not None else None
        except ValueError:
            number = None
        detail = None
        if t.startswith(types_mod.QUANTITY_PREFIX):
            metric, unit, factor = types_mod.quantity_mapping(t, a.get("unit"))
            value = number * factor if number is not None else None
            if md:
                dumps = partial(json.dumps, ensure_ascii=False)
                detail = "{" + ",".join(f"{dumps(k)}:{dumps(x)}" for k, x in md) + "}"
            if beats:
                raw[(key, json.dumps({"attributes": a, "beats": beats}, ensure_ascii=False, separators=(",", ":")))] += 1
        else:
            minutes = (end - start).total_seconds() / 60.0
            unit = a.get("unit") or ""
            if t == types_mod.SLEEP_TYPE:
                metric, value, unit = "sleep_stage", minutes, "min"
                detail = types_mod.SLEEP_STAGES.get(v or "", types_mod.snake(v or "unknown"))
            elif t == types_mod.MINDFUL_TYPE:
                metric, value, unit = "mindful", minutes, "min"
            elif t == types_mod.STAND_HOUR_TYPE:
                stood = (v or "").endswith("Stood")
                metric, value, unit, detail = "stand_hour", float(stood), "count", "stood" if stood else "idle"
            else:
                metric, value = types_mod.snake(t), number
                detail = v.removeprefix("HKCategoryValue") if number is None and v is not None else None
            if md:
                payload = {"attributes": a, "metadata": dict(md)}
                raw[(key, json.dumps(payload, ensure_ascii=False, separators=(",", ":")))] += 1
        samples[(metric, start, end, value, unit, start.date(), a["sourceName"],
                 types_mod.parse_device(a.get("device")), off, detail)] += 1
        el.clear()
    return samples, raw


def parsed_rows(path: Path) -> tuple[Counter, Counter]:
    out = collect(path)
    samples = Counter(
        (s["metric"], s["start_ts"], s["end_ts"], s["value"], s["unit"], s["local_day"], s["source_name"],
         s["device"], s["tz_offset_min"], s["detail"])
        for s in out["samples"] if not s["metric"].startswith("ring_")
    )
    raw = Counter((r.natural_key, r.payload) for r in out["raw"] if r.kind == "record")
    return samples, raw


@pytest.mark.parametrize("name", ["generated", "dogsheep", "alxdrcirilo"])
def test_rows_equal_a_plain_element_by_element_reading(name, request):
    path = {"dogsheep": DOGSHEEP, "alxdrcirilo": ALX}.get(name) or request.getfixturevalue("healthkit_xml")
    samples, raw = parsed_rows(path)
    ref_samples, ref_raw = reference_rows(path)
    assert samples == ref_samples
    assert raw == ref_raw


@pytest.mark.slow
def test_rows_equal_the_plain_reading_on_a_200k_record_export(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        bench = importlib.import_module("healthkit")
    finally:
        sys.path.pop(0)
    big = tmp_path / "export_200k.xml"
    n, _ = bench.synthesise(200_000, big)
    assert n >= 200_000
    samples, raw = parsed_rows(big)
    ref_samples, ref_raw = reference_rows(big)
    assert sum(samples.values()) == n
    assert samples == ref_samples
    assert raw == ref_raw


HRV = "HKQuantityTypeIdentifierHeartRateVariabilitySDNN"


def hrv_list(*beats: tuple[str, str], order: str = "bpm time") -> str:
    def one(bpm: str, time: str) -> str:
        attrs = f'bpm="{bpm}" time="{time}"' if order == "bpm time" else f'time="{time}" bpm="{bpm}"'
        return f"\n    <InstantaneousBeatsPerMinute {attrs}/>"
    return "\n   <HeartRateVariabilityMetadataList>" + "".join(one(*b) for b in beats) + \
        "\n   </HeartRateVariabilityMetadataList>\n  "


def mixed_body() -> str:
    """Self-closing Records interleaved with Records that have metadata and beat lists,
    in both attribute orders, one beat list in an unusual form (read by the handlers)."""
    md = '\n   <MetadataEntry key="HKMetadataKeyHeartRateMotionContext" value="1"/>\n  '
    body = ""
    for i in range(30):
        t0 = f"2024-03-02 {i // 6 + 8:02d}:{i % 6 * 10:02d}:00 +0100"
        t1 = f"2024-03-02 {i // 6 + 8:02d}:{i % 6 * 10 + 1:02d}:00 +0100"
        body += record(HR, "Watch", t0, t0, str(60 + i), unit="count/min")
        body += record(HR, "Watch", t1, t1, str(70 + i), unit="count/min", children=md)
        beats = hrv_list(("61", f"0{i % 10}:00:01,50"), ("63", {11: "a\\b", 13: "x &amp; y"}.get(i, f"0{i % 10}:00:02,40")),
                         order="time bpm" if i == 7 else "bpm time")
        body += record(HRV, "Watch", t0, t1, f"{40 + i}.5", unit="ms", children=beats + md.lstrip())
    return body


def test_records_with_children_interleaved_and_split_across_tiny_chunks(tmp_path, monkeypatch):
    path = write(tmp_path, "mixed.xml", export_xml(mixed_body()))
    whole = parsed_rows(path)
    assert whole == reference_rows(path)
    hr = [k for k in whole[0] if k[0] == "heart_rate"]
    assert len(hr) == 60 and sum(1 for k in hr if k[9] == '{"HKMetadataKeyHeartRateMotionContext":"1"}') == 30
    beats = [json.loads(p) for _, p in whole[1]]
    assert len(beats) == 30 and all(b["beats"][0][1] == "61" for b in beats)  # [time, bpm]
    assert {b["attributes"]["value"] for b in beats} == {f"{40 + i}.5" for i in range(30)}
    for chunk in (13, 61, 997):  # every Record (and beat list) is cut by some chunk end
        monkeypatch.setattr(source_mod, "CHUNK", chunk)
        assert parsed_rows(path) == whole


def test_attribute_order_does_not_matter(tmp_path):
    a = ('type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" device="{d}" '
         'startDate="2024-03-02 10:00:00 +0100" endDate="2024-03-02 10:05:00 +0100" value="12"')
    b = ('value="12" endDate="2024-03-02 10:05:00 +0100" device="{d}" startDate="2024-03-02 10:00:00 +0100" '
         'unit="count" sourceName="Phone" type="HKQuantityTypeIdentifierStepCount"')
    d = PHONE_DEVICE.format(n=5)
    rows = []
    for attrs in (a, b):
        path = write(tmp_path, "order.xml", export_xml(f"  <Record {attrs.format(d=d)}/>\n"))
        (s,) = collect(path)["samples"]
        rows.append(s)
    assert rows[0] == rows[1]
    assert rows[0]["value"] == 12 and rows[0]["device"].startswith("name:iPhone")


def test_entities_and_character_references_in_values(tmp_path):
    body = (
        record(HR, "Anna &amp; Bob&apos;s Watch &lt;2&gt;", "2024-03-02 10:00:00 +0100",
               "2024-03-02 10:00:00 +0100", "61", unit="count/min",
               children='<MetadataEntry key="note" value="a &quot;b&quot; &#183; c"/>')
        + record("HKQuantityTypeIdentifierVO2Max", "Anna &amp; Bob&apos;s Watch &lt;2&gt;", "2024-03-02 11:00:00 +0100",
                 "2024-03-02 11:00:00 +0100", "41.2", unit="mL/min&#183;kg")
    )
    out = collect(write(tmp_path, "ent.xml", export_xml(body)))
    by_metric = {s["metric"]: s for s in out["samples"]}
    assert by_metric["heart_rate"]["source_name"] == "Anna & Bob's Watch <2>"
    assert json.loads(by_metric["heart_rate"]["detail"]) == {"note": 'a "b" · c'}
    assert by_metric["vo2max"]["unit"] == "ml/kg/min" and by_metric["vo2max"]["value"] == pytest.approx(41.2)


def test_malformed_xml_in_and_after_a_beat_list_keeps_its_line_and_column(tmp_path):
    text = export_xml(mixed_body())
    lines = text.splitlines(keepends=True)
    # a broken beat element inside the last beat list: expat must still see it
    last = max(i for i, ln in enumerate(lines) if "<InstantaneousBeatsPerMinute" in ln)
    broken = lines[:last] + [lines[last].replace("/>", ">")] + lines[last + 1:]
    with pytest.raises(SourceFormatError, match=rf"line {last + 2}, column \d+\): malformed XML"):
        list(read_export(write(tmp_path, "b1.xml", "".join(broken))))
    # an error after (well-formed, cut-out) beat lists: same line and column as without them
    target = max(i for i, ln in enumerate(lines) if ln.strip() == "</Record>")
    bad = lines[:target] + ["  <Oops a='1' a='2'/>\n"] + lines[target:]
    plain = pyexpat.ParserCreate()  # where expat alone puts the error
    with pytest.raises(pyexpat.ExpatError) as where:
        plain.Parse("".join(bad).encode(), True)
    assert where.value.lineno == target + 1
    at = rf"line {target + 1}, column {where.value.offset + 1}\): malformed XML: duplicate attribute"
    with pytest.raises(SourceFormatError, match=at):
        list(read_export(write(tmp_path, "b2.xml", "".join(bad))))


def test_unreadable_date_in_a_category_record_names_its_line(tmp_path):
    body = record(HR, "W", "2024-03-02 10:00:00 +0100", "2024-03-02 10:00:00 +0100", "60", unit="count/min") + record(
        "HKCategoryTypeIdentifierMindfulSession", "Breathe", "2024-03-02 12:00:00 +0100", "yesterday", None
    )
    with pytest.raises(SourceFormatError, match=r"line 8, column 3\): malformed XML: unrecognised date 'yesterday'"):
        list(read_export(write(tmp_path, "date.xml", export_xml(body))))


@pytest.mark.parametrize(
    "variant", ["whole seconds", "microseconds", "a stage ending before it starts", "spans too wide to pack"]
)
def test_columnar_sleep_grouping_matches_the_record_by_record_rules(variant, monkeypatch):
    """StageColumns (compact columns, grouped and summed with numpy) gives exactly the
    sessions of `sleep.sessions` on the same rows: several sources, offsets and none, ties,
    gaps of exactly 2 h, overlaps, rows in any order, fed in several batches; instants with
    microseconds (session ids as isoformat() writes them); and a reversed stage (summed row
    by row, as before)."""
    import random
    from datetime import timedelta

    from connectors.healthkit import sleep as sleep_mod

    if variant == "spans too wide to pack":
        monkeypatch.setattr(sleep_mod, "_PACK_LIMIT", 0)
    monkeypatch.setattr(sleep_mod, "SESSIONS_PER_BATCH", 37)  # several batches, cut anywhere
    rng = random.Random(7)
    names = ["Watch", "iPhone", "Apple\xa0Watch", "AutoSleep"]
    stages = ["in_bed", "asleep", "core", "deep", "rem", "awake", "asleep_unspecified"]
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    at = t0
    rows = []
    for _ in range(3000):
        at += timedelta(minutes=rng.choice([0, 5, 30, 119, 120, 121, 600]))
        end = at + timedelta(minutes=rng.choice([0, 1, 30, 200]))
        start = at + timedelta(microseconds=rng.choice([0, 1, 250_000])) if variant == "microseconds" else at
        rows.append((rng.choice(names), rng.choice(stages), min(start, end), end, rng.choice([None, 0, 60, -300, 330])))
    if variant == "a stage ending before it starts":
        n, st, a, b, o = rows[1500]
        rows[1500] = (n, st, b + timedelta(minutes=5), a, o)
    rng.shuffle(rows)
    cols = sleep_mod.StageColumns()
    for lo in range(0, len(rows), 700):
        part = rows[lo:lo + 700] + [("x", None, t0, t0, None)]  # plus a row of another metric
        cols.add({
            "metric": pa.array(["sleep_stage"] * (len(part) - 1) + ["steps"]),
            "source_name": pa.array([r[0] for r in part]),
            "detail": pa.array([r[1] for r in part]),
            "start_ts": pa.array([r[2] for r in part], pa.timestamp("us", "UTC")),
            "end_ts": pa.array([r[3] for r in part], pa.timestamp("us", "UTC")),
            "tz_offset_min": pa.array([r[4] for r in part], pa.int16()),
        })
    assert len(cols) == len(rows)
    expected = list(sleep_mod.sessions(
        sleep_mod.StageRecord(n, s, a.astimezone(types_mod._tz(o) if o is not None else UTC),
                              b.astimezone(types_mod._tz(o) if o is not None else UTC), o)
        for n, s, a, b, o in rows
    ))
    got = _session_records(cols.sessions())
    assert len(got) > 100
    if variant == "microseconds":
        assert any("." in s.session_id for s in got) and any("." not in s.session_id for s in got)
    assert got == expected
    assert list(cols.sessions()) == []  # the rows are handed over once
