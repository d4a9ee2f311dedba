"""Apple Health connector: real fixtures, synthetic exports built in tmp, the CLI end to end."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from common.errors import SourceFormatError
from common.records import RawRecord, RecordBatch, Sample, SleepSession, Workout
from connectors.healthkit import parser as parser_mod
from connectors.healthkit import read_export
from connectors.healthkit import source as source_mod
from storage import open_db

APPLE = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "apple_health"
K0_XML = APPLE / "k0rventen_export.xml"
K0_ZIP = APPLE / "k0rventen_test-export.zip"
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
        if isinstance(rec, RecordBatch):
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


# -- real fixtures -----------------------------------------------------------------------------
def test_heart_rate_samples_match_an_independent_count():
    tree = ET.parse(K0_XML)
    hr = [r for r in tree.getroot().iter("Record") if r.get("type") == HR]
    got = [s for s in collect(K0_XML)["samples"] if s["metric"] == "heart_rate"]
    assert len(got) == len(hr) == 400
    assert sorted(s["value"] for s in got) == sorted(float(r.get("value")) for r in hr)
    assert {s["unit"] for s in got} == {"bpm"}
    assert {s["source_name"] for s in got} == {"test-device"}


def test_every_record_type_is_kept_including_unknown_ones():
    tree = ET.parse(K0_XML)
    expected = Counter(r.get("type") for r in tree.getroot().iter("Record"))
    got = collect(K0_XML)["samples"]
    assert len(got) == sum(expected.values()) == 8038
    metrics = Counter(s["metric"] for s in got)
    assert metrics["steps"] == expected["HKQuantityTypeIdentifierStepCount"]
    assert metrics["hrv_sdnn"] == expected["HKQuantityTypeIdentifierHeartRateVariabilitySDNN"]
    assert metrics["sleep_stage"] == expected["HKCategoryTypeIdentifierSleepAnalysis"]
    # identifiers without a Rhythm name keep a snake_case one and Apple's unit
    assert metrics["walking_speed"] == expected["HKQuantityTypeIdentifierWalkingSpeed"]
    assert metrics["low_heart_rate_event"] == expected["HKCategoryTypeIdentifierLowHeartRateEvent"]
    assert {s["unit"] for s in got if s["metric"] == "walking_speed"} == {"km/hr"}


def test_offsets_are_kept_and_local_day_is_the_wall_clock_day():
    hrv = [s for s in collect(K0_XML)["samples"] if s["metric"] == "hrv_sdnn"]
    first = min(hrv, key=lambda s: s["start_ts"])
    # <Record ... startDate="2021-01-01 01:20:29 +0200" value="161.887">
    assert first["start_ts"] == datetime(2020, 12, 31, 23, 20, 29, tzinfo=UTC)
    assert first["tz_offset_min"] == 120
    assert first["local_day"] == date(2021, 1, 1)  # not the UTC day (Dec 31)
    assert first["value"] == pytest.approx(161.887)


def test_hrv_beat_lists_and_metadata_are_landed():
    out = collect(K0_XML)
    beats = [r for r in out["raw"] if r.kind == "record" and "HeartRateVariabilitySDNN" in r.natural_key]
    assert len(beats) == 400
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


def test_legacy_sleep_night_is_grouped_and_attributed_to_the_wake_up_day():
    tree = ET.parse(K0_XML)
    recs = [r for r in tree.getroot().iter("Record") if r.get("type") == "HKCategoryTypeIdentifierSleepAnalysis"]
    assert {r.get("value") for r in recs} <= {
        "HKCategoryValueSleepAnalysisInBed",
        "HKCategoryValueSleepAnalysisAsleepUnspecified",
    }
    sessions = collect(K0_XML)["sleep"]
    first = min(sessions, key=lambda s: s.start_ts)
    # InBed 2021-01-01 02:56:10 .. 08:00:12 +0200
    assert first.start_ts == datetime(2021, 1, 1, 0, 56, 10, tzinfo=UTC)
    assert first.local_day == date(2021, 1, 1)
    assert first.in_bed_min == pytest.approx((5 * 3600 + 4 * 60 + 2) / 60)
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


def test_small_chunks_and_batches_give_the_same_rows(monkeypatch):
    """Records split across read chunks and batch boundaries keep their metadata and beats."""
    whole = collect(K0_XML)
    monkeypatch.setattr(source_mod, "CHUNK", 997)
    monkeypatch.setattr(parser_mod, "BATCH_ROWS", 50)
    batches = [r for r in read_export(K0_XML) if isinstance(r, RecordBatch)]
    assert len(batches) > 50  # streamed in many pieces
    pieces = collect(K0_XML)

    def key(s):
        return (s["metric"], s["source_name"], s["start_ts"], s["end_ts"], s["value"], s["detail"])

    assert sorted(map(key, pieces["samples"])) == sorted(map(key, whole["samples"]))
    assert sorted(r.payload for r in pieces["raw"]) == sorted(r.payload for r in whole["raw"])


def test_progress_reports_bytes_up_to_the_file_size():
    seen: list[tuple[float, float | None]] = []
    for _ in read_export(K0_ZIP, progress=lambda done, total: seen.append((done, total))):
        pass
    size = K0_ZIP.stat().st_size
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
def test_error_for_each_kind_of_bad_input(tmp_path):
    half = tmp_path / "half.zip"
    half.write_bytes(K0_ZIP.read_bytes()[: K0_ZIP.stat().st_size // 2])
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


def test_cli_bad_input_is_one_line_and_leaves_the_database_unchanged(tmp_path, rhythm_home, run_cli):
    code, out, _ = run_cli("import", "healthkit", str(DOGSHEEP))
    assert code == 0
    before = counts(rhythm_home)
    assert before["workouts"] == 1
    half = tmp_path / "half.zip"
    half.write_bytes(K0_ZIP.read_bytes()[: K0_ZIP.stat().st_size // 2])
    truncated_xml = tmp_path / "cut.xml"
    truncated_xml.write_bytes(K0_XML.read_bytes()[:2_000_000])  # valid records, then cut
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
def test_reimport_and_overlapping_newer_export_add_only_new_rows(tmp_path, rhythm_home, run_cli):
    assert run_cli("import", "healthkit", str(K0_ZIP))[0] == 0
    first = counts(rhythm_home)
    assert first["samples"] == len({
        (r.get("type"), r.get("sourceName"), r.get("startDate"), r.get("endDate"))
        for r in ET.parse(K0_XML).getroot().iter("Record")
    })
    assert run_cli("import", "healthkit", str(K0_ZIP))[0] == 0
    again = counts(rhythm_home)
    assert {k: v for k, v in again.items() if k != "runs"} == {k: v for k, v in first.items() if k != "runs"}

    newer = K0_XML.read_text(encoding="utf-8").replace(
        "</HealthData>",
        record(HR, "test-device", "2022-01-05 09:00:00 +0100", "2022-01-05 09:00:00 +0100", "61",
               unit="count/min")
        + record(HR, "test-device", "2022-01-05 09:05:00 +0100", "2022-01-05 09:05:00 +0100", "64",
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
