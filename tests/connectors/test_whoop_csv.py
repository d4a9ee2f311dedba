"""WHOOP app CSV export: the generated export (`whoop_export`, lab/people/whoop.py),
in the shape of a real one: newest row first, per-row time zones, an open current cycle,
naps, a hand-entered sleep without scores, journal yes/no answers."""

from __future__ import annotations

import csv
import shutil
import zipfile
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from common.errors import SourceFormatError
from common.records import RawRecord, Sample, SleepSession, Workout
from connectors.whoop import read_export
from connectors.whoop.csv_export import journal_metric
from lab.people import whoop as generated

EDT = timezone(timedelta(hours=-4))
EST = timezone(timedelta(hours=-5))

WORKOUTS_CSV = (
    "Cycle start time,Cycle end time,Cycle timezone,Workout start time,Workout end time,"
    "Duration (min),Activity name,Activity Strain,Energy burned (cal),Max HR (bpm),"
    "Average HR (bpm),HR Zone 1 %,HR Zone 2 %,HR Zone 3 %,HR Zone 4 %,HR Zone 5 %,GPS enabled\n"
    "2024-06-22 23:00:22,2024-06-23 20:24:26,UTC-04:00,2024-06-23 17:47:03,2024-06-23 19:24:40,"
    "97,Cycling,17.1,1137.0,183,147,17,16,42,23,1,false\n"
)


# -- helpers (kept in this file: no shared conftest here) ------------------------------------
def cli(monkeypatch, home: Path, capsys, *args: str) -> tuple[int, str, str]:
    from rhythm.cli import main

    monkeypatch.setenv("RHYTHM_HOME", str(home))
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def row_counts(home: Path) -> dict[str, int]:
    from storage import open_db

    with open_db(home / "rhythm.duckdb", read_only=True) as db:
        counts = db.row_counts()
    counts.pop("runs", None)
    return counts


def csv_rows(export: Path, name: str) -> list[dict[str, str]]:
    with (export / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def utc_key(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def records(whoop_export) -> list:
    return list(read_export(whoop_export))


@pytest.fixture(scope="module")
def contents() -> generated.Export:
    """What the generator writes into the export: counts, first and last day."""
    return generated.export_files()[1]


# -- reading -----------------------------------------------------------------------------------
def test_every_sleep_row_becomes_a_session_naps_included(records, whoop_export, contents):
    rows = csv_rows(whoop_export, "sleeps.csv")
    sleeps = [r for r in records if isinstance(r, SleepSession)]
    assert len(sleeps) == len(rows) == contents.sleeps == 183
    assert sum(s.is_nap for s in sleeps) == sum(r["Nap"] == "true" for r in rows) == contents.naps == 11
    # the current cycle's sleep: 2024-06-29 22:41:17 .. 06-30 07:10:17 (UTC-04:00), placed by the generator
    cur = generated.CURRENT
    first = next(s for s in sleeps if s.session_id == "sleep:2024-06-30T02:41:17Z")
    assert first.start_ts == cur["onset"] == datetime(2024, 6, 29, 22, 41, 17, tzinfo=EDT)
    assert first.end_ts == datetime(2024, 6, 30, 7, 10, 17, tzinfo=EDT)
    assert first.local_day == date(2024, 6, 30)
    asleep, awake, deep, rem = cur["asleep"], cur["awake"], cur["deep"], cur["rem"]
    assert (first.sleep_min, first.in_bed_min, first.light_min, first.deep_min, first.rem_min) == (
        asleep, asleep + awake, asleep - deep - rem, deep, rem,
    )
    assert (first.efficiency_pct, first.score, first.respiratory_rate_brpm) == (
        cur["efficiency"], cur["performance"], cur["resp"])
    assert first.tz_offset_min == -240
    # a sleep without scores keeps None, never 0
    manual = next(s for s in sleeps if s.session_id == f"sleep:{utc_key(generated.MANUAL['onset'])}")
    assert manual.end_ts == generated.MANUAL["wake"]
    assert manual.sleep_min is None and manual.score is None


def test_cycle_recovery_values_of_a_known_row(records):
    # 2024-03-04 22:09:51 UTC-05:00, the strap charging the next night: a two-night cycle
    # (generated.LONG: recovery 62 %, RHR 57, HRV 51 ms, skin 34.12 C, strain 13.7)
    row = generated.LONG
    samples = [r for r in records if isinstance(r, Sample) and r.detail in (None, "cycle:2024-03-05T03:09:51Z")]
    start = datetime(2024, 3, 4, 22, 9, 51, tzinfo=EST)
    wake = start + timedelta(minutes=row["asleep"] + row["awake"])
    at_wake = {s.metric: s.value for s in samples if s.start_ts == wake}
    assert at_wake == {
        "recovery": row["recovery"], "resting_heart_rate": row["rhr"], "hrv_rmssd": row["hrv"],
        "skin_temp": row["skin"], "spo2": row["spo2"], "respiratory_rate": row["resp"],
    }
    strain = next(r for r in records if isinstance(r, Sample) and r.metric == "strain" and r.start_ts == start)
    assert strain.value == row["strain"]
    assert strain.end_ts - strain.start_ts > timedelta(hours=40)  # it ends at the sleep of 6 March
    assert strain.end_ts.date() == date(2024, 3, 6)
    assert strain.local_day == date(2024, 3, 5) and strain.tz_offset_min == -300  # the day it woke up on


def test_open_cycle_keeps_recovery_but_not_its_running_strain(records):
    open_start = datetime(2024, 6, 29, 22, 41, 17, tzinfo=EDT)
    wake = datetime(2024, 6, 30, 7, 10, 17, tzinfo=EDT)
    rec = next(r for r in records if isinstance(r, Sample) and r.metric == "recovery" and r.start_ts == wake)
    assert rec.value == generated.CURRENT["recovery"] and rec.local_day == date(2024, 6, 30)
    assert not any(
        isinstance(r, Sample) and r.metric in ("strain", "total_energy") and r.start_ts == open_start
        for r in records
    )


def test_per_row_timezone_offsets_are_respected(records, whoop_export):
    rows = [r for r in csv_rows(whoop_export, "sleeps.csv") if r["Cycle timezone"] == "UTC+01:00"]
    assert rows
    onset = datetime.fromisoformat(rows[0]["Sleep onset"])
    key = (onset - timedelta(hours=1)).strftime("sleep:%Y-%m-%dT%H:%M:%SZ")
    s = next(s for s in records if isinstance(s, SleepSession) and s.session_id == key)
    assert s.tz_offset_min == 60
    assert s.start_ts.astimezone(UTC).replace(tzinfo=None) == onset - timedelta(hours=1)
    offsets = {s.tz_offset_min for s in records if isinstance(s, SleepSession)}
    assert offsets == {-300, -240, 60}


def test_journal_rows_land_raw_and_as_yes_no_samples(records, whoop_export, contents):
    rows = csv_rows(whoop_export, "journal_entries.csv")
    raw = [r for r in records if isinstance(r, RawRecord) and r.kind == "journal"]
    assert len(raw) == len(rows) == contents.journal_rows == 1944
    caffeine = [r for r in records if isinstance(r, Sample) and r.metric == "journal_have_any_caffeine"]
    assert len(caffeine) == contents.journal_cycles == 172  # asked every cycle but the first
    assert {c.value for c in caffeine} == {0.0, 1.0}
    yes = sum(r["Answered yes"] == "true" for r in rows if r["Question text"] == "Have any caffeine? ")
    assert sum(c.value for c in caffeine) == yes
    assert journal_metric("Read (non-screened device) while in bed?") == "journal_read_non_screened_device_while_in_bed"


def test_workouts_csv(tmp_path):
    (tmp_path / "workouts.csv").write_text(WORKOUTS_CSV)
    (w,) = [r for r in read_export(tmp_path) if isinstance(r, Workout)]
    assert w.workout_id == "workout:2024-06-23T21:47:03Z"
    assert w.start_ts == datetime(2024, 6, 23, 17, 47, 3, tzinfo=EDT)
    assert (w.sport, w.duration_min, w.strain, w.energy_kcal, w.avg_hr_bpm, w.max_hr_bpm) == (
        "Cycling", 97, 17.1, 1137.0, 147, 183,
    )
    assert w.distance_m is None


def test_zip_gives_the_same_records_as_the_folder(tmp_path, records, whoop_export):
    z = tmp_path / "my_whoop_data.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(whoop_export.glob("*.csv")):
            zf.write(f, f"my_whoop_data_2024_06_24/{f.name}")
    progress = []
    from_zip = list(read_export(z, progress=lambda done, total: progress.append((done, total))))
    key = lambda r: (type(r).__name__, getattr(r, "natural_key", None), getattr(r, "session_id", None),  # noqa: E731
                     getattr(r, "metric", None), getattr(r, "start_ts", None))
    assert sorted(map(key, from_zip), key=str) == sorted(map(key, records), key=str)
    assert progress and progress[-1][0] == pytest.approx(z.stat().st_size) and progress[-1][1] == z.stat().st_size


# -- bad input ---------------------------------------------------------------------------------
def test_missing_columns_name_the_file_and_line_1(tmp_path, whoop_export):
    lines = (whoop_export / "sleeps.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, h in enumerate(header) if h not in ("Cycle timezone", "Nap")]
    cut = [",".join(line.split(",")[i] for i in keep) for line in lines[:5]]
    (tmp_path / "sleeps.csv").write_text("\n".join(cut) + "\n")
    with pytest.raises(SourceFormatError) as err:
        list(read_export(tmp_path))
    assert err.value.path.endswith("sleeps.csv")
    assert err.value.position == "line 1"
    assert "missing columns: Cycle timezone, Nap" in str(err.value)


def test_bad_number_names_its_line(tmp_path, whoop_export):
    with (whoop_export / "physiological_cycles.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    rows[2][rows[0].index("Recovery score %")] = "high"  # the second cycle, line 3
    with (tmp_path / "physiological_cycles.csv").open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    with pytest.raises(SourceFormatError) as err:
        list(read_export(tmp_path))
    assert err.value.position == "line 3" and "Recovery score %" in str(err.value)


def test_folder_without_whoop_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(SourceFormatError, match="no WHOOP export CSV"):
        list(read_export(tmp_path))


# -- through the CLI ---------------------------------------------------------------------------
def test_cli_import_twice_then_a_newer_overlapping_export(tmp_path, monkeypatch, capsys, whoop_export, contents):
    home = tmp_path / "home"
    older = tmp_path / "older"
    older.mkdir()
    for name in ("physiological_cycles.csv", "sleeps.csv"):
        lines = (whoop_export / name).read_text().splitlines()
        # an export taken earlier: the 20 newest rows (file is newest first) are not there yet
        (older / name).write_text("\n".join([lines[0], *lines[21:]]) + "\n")
    rc, out, err = cli(monkeypatch, home, capsys, "import", "whoop", older)
    assert rc == 0, err
    first = row_counts(home)
    assert first["sleep_sessions"] == contents.sleeps - 20
    rc, _, _ = cli(monkeypatch, home, capsys, "import", "whoop", older)
    assert rc == 0 and row_counts(home) == first

    rc, out, _ = cli(monkeypatch, home, capsys, "import", "whoop", whoop_export)
    assert rc == 0
    newer = row_counts(home)
    assert newer["sleep_sessions"] == contents.sleeps
    full = tmp_path / "full_home"
    cli(monkeypatch, full, capsys, "import", "whoop", whoop_export)
    assert row_counts(full) == newer  # overlap replaced, never duplicated
    assert (contents.first_day, contents.last_day) == (date(2024, 1, 3), date(2024, 6, 30))
    assert "2024-01-03 .. 2024-06-30" in out


def test_cli_missing_columns_is_one_error_line_and_database_unchanged(tmp_path, monkeypatch, capsys, whoop_export):
    home = tmp_path / "home"
    rc, _, _ = cli(monkeypatch, home, capsys, "import", "whoop", whoop_export / "sleeps.csv")
    assert rc == 0
    before = row_counts(home)
    bad = tmp_path / "bad"
    shutil.copytree(whoop_export, bad)
    lines = (bad / "physiological_cycles.csv").read_text().splitlines()
    lines[0] = lines[0].replace("Cycle timezone", "Zone")
    (bad / "physiological_cycles.csv").write_text("\n".join(lines) + "\n")
    rc, _, err = cli(monkeypatch, home, capsys, "import", "whoop", bad)
    assert rc != 0
    assert err.strip().count("\n") == 0
    assert "physiological_cycles.csv (line 1): missing column: Cycle timezone" in err
    assert row_counts(home) == before
