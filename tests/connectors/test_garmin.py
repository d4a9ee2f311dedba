"""Garmin connector: FIT files (real fixtures) and the account-export JSON (synthetic)."""

from __future__ import annotations

import io
import shutil
import zipfile
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import fitdecode
import pytest

from common.errors import SourceFormatError
from common.records import RawRecord, Sample, SleepSession, Workout
from connectors.garmin import read_export
from connectors.garmin.fit import from_fit_seconds, read_fit, roll_timestamp_16
from tests.fixtures import FIXTURES

FIT_DIR = FIXTURES / "garmin_fit"
RUN = FIT_DIR / "fitparse_activity-small-fenix2-run.fit"
WALK = FIT_DIR / "fitparse_garmin-fenix-5-walk.fit"
MONITORING = FIT_DIR / "fitparse_MonitoringFile.fit"
WEIGHT = FIT_DIR / "fitparse_WeightScaleSingleUser.fit"
TRUNCATED = FIT_DIR / "fitdecode_invalid_activity-unexpected-eof.fit"
EXPORT = FIXTURES / "garmin_export"


# -- helpers (kept in this file: no shared conftest here) ------------------------------------
def cli(monkeypatch, home: Path, capsys, *args: str) -> tuple[int, str, str]:
    from rhythm.cli import main

    monkeypatch.setenv("RHYTHM_HOME", str(home))
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def row_counts(home: Path) -> dict[str, int]:
    from storage import open_db

    db_file = home / "rhythm.duckdb"
    if not db_file.exists():
        return {}
    with open_db(db_file, read_only=True) as db:
        return db.row_counts()


def query(home: Path, sql: str) -> list[tuple]:
    from storage import open_db

    with open_db(home / "rhythm.duckdb", read_only=True) as db:
        return db.query(sql)[1]


def fit_messages(path: Path) -> list[fitdecode.FitDataMessage]:
    with fitdecode.FitReader(path) as reader:
        return [f for f in reader if f.frame_type == fitdecode.FIT_FRAME_DATA]


def by_type(records: list, cls: type) -> list:
    return [r for r in records if isinstance(r, cls)]


# -- timestamp_16 ------------------------------------------------------------------------------
def test_roll_timestamp_16_forward_and_across_the_16_bit_wrap():
    base = 0x3A5C_FFF0
    assert roll_timestamp_16(base, 0xFFF0) == base  # same instant
    assert roll_timestamp_16(base, 0xFFFF) == base + 15
    assert roll_timestamp_16(base, 0x0010) == base + 0x20  # wrapped past 65536
    assert roll_timestamp_16(base, 0xFFEF) == base + 0xFFFF  # never goes backwards


# -- activity FIT ------------------------------------------------------------------------------
def test_fenix2_run_becomes_one_workout_matching_fitdecode():
    msgs = fit_messages(RUN)
    session = next(m for m in msgs if m.name == "session")
    activity = next(m for m in msgs if m.name == "activity")
    records = list(read_export(RUN))

    (w,) = by_type(records, Workout)
    start = session.get_value("start_time")
    assert w.start_ts == start
    assert w.end_ts == start + timedelta(seconds=session.get_value("total_elapsed_time"))
    assert w.distance_m == pytest.approx(session.get_value("total_distance")) == pytest.approx(9008.22)
    assert w.duration_min == pytest.approx(session.get_value("total_timer_time") / 60)
    assert w.energy_kcal == 516
    assert w.sport == "running"
    assert w.avg_hr_bpm is None  # the session has no average: None, not 0
    # local offset from activity.local_timestamp (17:32 local at 15:32 UTC)
    offset = activity.get_value("local_timestamp") - activity.get_value("timestamp")
    assert w.tz_offset_min == offset.total_seconds() / 60 == 120
    assert w.local_day == date(2015, 8, 15)
    file_id = next(m for m in msgs if m.name == "file_id")
    created = file_id.get_raw_value("time_created")  # FIT seconds
    assert w.workout_id == f"fit:{file_id.get_value('serial_number')}:{created}"

    hr = [r for r in by_type(records, Sample) if r.metric == "heart_rate"]
    expected = {m.get_value("timestamp") for m in msgs if m.name == "record" and m.get_value("heart_rate", fallback=None) is not None}
    assert {s.start_ts for s in hr} == expected
    assert all(s.tz_offset_min == 120 and s.unit == "bpm" for s in hr)


def test_every_fit_message_is_landed_raw_including_unknown_ones():
    records = list(read_export(WALK))
    raw = by_type(records, RawRecord)
    msgs = fit_messages(WALK)
    per_message = [r for r in raw if r.kind == "fit_message"]
    series = {r.natural_key.rsplit(":", 1)[1]: r for r in raw if r.kind == "fit_series"}
    counted = len(per_message) + sum(len(__import__("json").loads(r.payload)["rows"]) for r in series.values())
    assert counted == len(msgs)
    kinds = {__import__("json").loads(r.payload)["message"] for r in per_message}
    assert {"unknown_22", "unknown_140", "unknown_141", "unknown_147", "unknown_79"} <= kinds
    assert set(series) == {"record", "hrv"}
    assert sum(r.kind == "fit_file" for r in raw) == 1


def test_hrv_messages_become_beat_to_beat_rr_intervals():
    msgs = fit_messages(WALK)
    beats = [v for m in msgs if m.name == "hrv" for v in m.get_value("time") if v is not None]
    rr = [r for r in by_type(list(read_export(WALK)), Sample) if r.metric == "rr_interval"]
    assert len(rr) == len(beats) == 62
    assert [r.value for r in rr] == pytest.approx([b * 1000 for b in beats])
    assert all(r.unit == "ms" for r in rr)
    # laid end to end from the timer start
    assert rr[0].start_ts == datetime(2017, 6, 11, 14, 32, 51, tzinfo=UTC)
    assert all(a.end_ts == b.start_ts for a, b in zip(rr, rr[1:], strict=False))
    assert rr[0].tz_offset_min == -420  # PDT, from activity.local_timestamp


# -- monitoring FIT ----------------------------------------------------------------------------
def test_monitoring_timestamps_rolled_forward_are_monotonic():
    msgs = fit_messages(MONITORING)
    last = None
    stamps = []
    for m in msgs:
        ts = m.get_value("timestamp", fallback=None)
        if ts is not None:
            last = int((ts - datetime(1989, 12, 31, tzinfo=UTC)).total_seconds())
        if m.name == "monitoring" and m.has_field("timestamp_16"):
            last = roll_timestamp_16(last, m.get_raw_value("timestamp_16"))
            stamps.append(from_fit_seconds(last))
    assert len(stamps) == 335
    assert stamps == sorted(stamps)
    assert stamps[0] >= datetime(2014, 12, 27, 6, 0, tzinfo=UTC)  # monitoring_info start
    assert stamps[-1] == datetime(2014, 12, 28, 6, 0, tzinfo=UTC)  # next local midnight (UTC-6)


def test_monitoring_steps_are_per_interval_deltas_that_add_up_to_the_device_daily_total():
    msgs = fit_messages(MONITORING)
    # the device's own summary messages (duration_min=1440) hold the day's totals
    totals = {
        m.get_value("activity_type"): m.get_value("steps")
        for m in msgs
        if m.name == "monitoring" and m.has_field("duration_min")
    }
    assert totals == {"walking": 3142, "running": 31}
    steps = [r for r in by_type(list(read_export(MONITORING)), Sample) if r.metric == "steps"]
    per_type: dict[str, float] = defaultdict(float)
    for s in steps:
        per_type[s.detail.split("=")[1]] += s.value
        assert s.local_day == date(2014, 12, 27)
        assert s.tz_offset_min == -360
        assert s.end_ts > s.start_ts and s.value > 0
    assert dict(per_type) == {"walking": 3142, "running": 31}
    # intervals of one activity type do not overlap
    walking = sorted((s.start_ts, s.end_ts) for s in steps if s.detail.endswith("walking"))
    assert all(a[1] <= b[0] for a, b in zip(walking, walking[1:], strict=False))
    raw = [r for r in by_type(list(read_export(MONITORING)), RawRecord) if r.kind == "fit_series"]
    assert len(__import__("json").loads(raw[0].payload)["rows"]) == 337


def test_weight_scale_file():
    weights = [r for r in by_type(list(read_export(WEIGHT)), Sample) if r.metric == "weight"]
    assert [w.value for w in weights] == [75.8, 76.09]
    assert weights[0].tz_offset_min is None  # no local time in the file: UTC day
    assert weights[0].local_day == date(2009, 9, 9)


# -- bad FIT files -----------------------------------------------------------------------------
def test_truncated_fit_gives_one_clear_error_with_file_and_byte():
    with pytest.raises(SourceFormatError) as err:
        list(read_export(TRUNCATED))
    assert err.value.path.endswith("fitdecode_invalid_activity-unexpected-eof.fit")
    assert err.value.position == "byte 768"
    assert "truncated or corrupt FIT file" in str(err.value)


def test_fit_with_flipped_byte_fails_the_crc_check():
    data = bytearray(WALK.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(SourceFormatError) as err:
        list(read_fit(bytes(data), "walk-corrupt.fit"))
    assert "corrupt" in str(err.value)
    assert err.value.path == "walk-corrupt.fit"


def test_not_a_fit_file():
    with pytest.raises(SourceFormatError, match="not a FIT file"):
        list(read_fit(b"hello, this is not a FIT file at all", "x.fit"))


# -- account export (hand-written, see tests/fixtures/garmin_export/README.md) ---------------
def test_account_export_sleep_health_status_and_daily_summaries():
    records = list(read_export(EXPORT))
    sleeps = {s.session_id: s for s in by_type(records, SleepSession)}
    assert set(sleeps) == {
        "night:2024-03-01", "night:2024-03-02", "night:2024-03-03", "nap:2024-03-02T20:10:00+00:00",
    }
    night = sleeps["night:2024-03-02"]
    assert night.local_day == date(2024, 3, 2)  # calendarDate = wake-up day
    assert night.start_ts == datetime(2024, 3, 2, 3, 40, tzinfo=UTC)  # GMT string, no zone
    assert night.sleep_min == (5400 + 13200 + 7080) / 60  # deep + light + REM
    assert night.awake_min == 17 and night.score == 84 and not night.is_nap
    assert sleeps["nap:2024-03-02T20:10:00+00:00"].is_nap

    samples = by_type(records, Sample)
    hrv = {s.local_day: s.value for s in samples if s.metric == "hrv_rmssd"}
    assert hrv == {date(2024, 3, 1): 48.0, date(2024, 3, 2): 51.0, date(2024, 3, 3): 37.0}  # onboarding day skipped
    skin = {s.local_day: s.value for s in samples if s.metric == "skin_temp_deviation"}
    assert skin[date(2024, 3, 1)] == -0.3
    assert not any(s.metric == "skin_temp" for s in samples)
    assert not any(s.value == 0 for s in samples)

    steps = [s for s in samples if s.metric == "steps"]
    assert [(s.local_day, s.value) for s in steps] == [(date(2024, 3, 1), 11234), (date(2024, 3, 2), 6540)]
    assert steps[0].start_ts == datetime(2024, 3, 1, 5, 0, tzinfo=UTC) and steps[0].tz_offset_min == -300
    stress = {s.local_day: s.value for s in samples if s.metric == "stress"}
    assert stress == {date(2024, 3, 1): 31, date(2024, 3, 2): 27}  # -2 = no data, skipped
    bb = {s.local_day: s.value for s in samples if s.metric == "body_battery"}
    assert bb == {date(2024, 3, 1): 88, date(2024, 3, 2): 91}
    kinds = Counter(r.kind for r in by_type(records, RawRecord))
    assert kinds == {"sleep_data": 3, "health_status": 4, "uds": 3}


def _export_zip(tmp_path: Path) -> Path:
    """The synthetic export as a real-looking zip, with an uploaded-files zip holding a FIT."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.write(WALK, "walk_2017-06-11.fit")
    target = tmp_path / "garmin_export.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(EXPORT.rglob("*.json")):
            z.write(f, f.relative_to(EXPORT).as_posix())
        z.writestr("DI_CONNECT/DI-Connect-Uploaded-Files/UploadedFiles_0-_Part1.zip", inner.getvalue())
    return target


# -- through the CLI: one transaction, idempotent, bad input loses nothing -----------------------
def test_cli_import_fit_twice_adds_nothing_the_second_time(tmp_path, monkeypatch, capsys):
    rc, out, err = cli(monkeypatch, tmp_path, capsys, "import", "garmin", RUN)
    assert rc == 0, err
    first = row_counts(tmp_path)
    assert first["workouts"] == 1 and first["samples"] == 2808 and first["raw_garmin"] > 0
    assert "2015-08-15" in out
    rc, out, _ = cli(monkeypatch, tmp_path, capsys, "import", "garmin", RUN)
    assert rc == 0
    assert row_counts(tmp_path) == {**first, "runs": first["runs"] + 1}
    assert "2808" in out  # the summary shows the duplicates skipped


def test_cli_account_export_zip_then_folder_is_idempotent(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    rc, _, err = cli(monkeypatch, home, capsys, "import", "garmin", _export_zip(tmp_path))
    assert rc == 0, err
    counts = row_counts(home)
    assert counts["sleep_sessions"] == 4 and counts["workouts"] == 1
    assert query(home, "select sport from workouts") == [("walking",)]
    # the same data as an unzipped folder (overlapping export): no new rows
    rc, _, _ = cli(monkeypatch, home, capsys, "import", "garmin", EXPORT)
    assert rc == 0
    again = row_counts(home)
    assert {k: v for k, v in again.items() if k != "runs"} == {k: v for k, v in counts.items() if k != "runs"}


def test_cli_folder_with_a_truncated_fit_fails_whole_import_and_changes_nothing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    rc, _, _ = cli(monkeypatch, home, capsys, "import", "garmin", WEIGHT)
    assert rc == 0
    before = row_counts(home)
    folder = tmp_path / "fits"
    folder.mkdir()
    shutil.copy(WALK, folder / "a_walk.fit")  # decoded first, then rolled back
    shutil.copy(TRUNCATED, folder / "b_broken.fit")
    rc, _, err = cli(monkeypatch, home, capsys, "import", "garmin", folder)
    assert rc != 0
    line = err.strip()
    assert "\n" not in line and line.startswith("error:")
    assert "b_broken.fit" in line and "byte 768" in line
    after = row_counts(home)
    assert {k: v for k, v in after.items() if k != "runs"} == {k: v for k, v in before.items() if k != "runs"}


def test_cli_truncated_zip_is_one_error_line_and_changes_nothing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    good = _export_zip(tmp_path)
    rc, _, _ = cli(monkeypatch, home, capsys, "import", "garmin", good)
    before = row_counts(home)
    cut = tmp_path / "cut.zip"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    rc, _, err = cli(monkeypatch, home, capsys, "import", "garmin", cut)
    assert rc != 0
    assert "cut.zip" in err and "zip" in err and err.strip().count("\n") == 0
    after = row_counts(home)
    assert {k: v for k, v in after.items() if k != "runs"} == {k: v for k, v in before.items() if k != "runs"}
