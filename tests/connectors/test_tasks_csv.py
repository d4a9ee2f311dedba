"""`rhythm import tasks`: task exports in the shapes people have (generated: tests/connectors/
tasks_exports.py), time zones, bad rows, re-imports, folders and zips."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from common.records import RawRecord, Sample
from connectors.tasks.csv_export import read_export
from tests.connectors import tasks_exports as tx

ZONES = ("Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Auckland", "UTC")
TRAVEL = ("Asia/Tokyo", "America/Los_Angeles")


def _samples(path, zone: str):
    recs = list(read_export(path, zone=zone))
    return [r for r in recs if isinstance(r, Sample)], [r for r in recs if isinstance(r, RawRecord)]


def _timed(samples) -> Counter:
    c: Counter = Counter()
    for s in samples:
        if s.metric == "task_completed":
            assert s.start_ts == s.end_ts and s.start_ts.tzinfo is not None and s.unit == "count"
            c[(s.start_ts, s.local_day, s.tz_offset_min)] += int(s.value)
    return c


def _sql(run_cli, query):
    code, out, err = run_cli("sql", "--json", query)
    assert code == 0, err
    return json.loads(out)


def _snapshot(run_cli):
    tables = {r["t"] for r in _sql(run_cli, "SELECT table_name AS t FROM duckdb_tables()")}
    out = {"samples": _sql(run_cli, "SELECT * EXCLUDE (start_ts, end_ts), epoch(start_ts) AS s FROM samples ORDER BY ALL")}
    if "raw_tasks" in tables:
        out["raw"] = _sql(run_cli, "SELECT kind, natural_key, hash FROM raw_tasks ORDER BY ALL")
    return out


@pytest.mark.parametrize("fmt", sorted(tx.WRITERS))
@pytest.mark.parametrize("seed, zone", list(enumerate(ZONES)))
def test_every_export_shape_gives_the_same_completions(tmp_path, fmt, seed, zone):
    writer, own_zones = tx.WRITERS[fmt]
    tasks = tx.make_tasks(seed, zone, travel=TRAVEL if own_zones else ())
    path = tmp_path / f"{fmt}.csv"
    path.write_bytes(writer(tasks))
    samples, raw = _samples(path, zone)
    want = tx.expected([t for t in tasks if fmt not in ("generic", "excel", "epoch") or not t.cancelled])
    assert _timed(samples) == want
    assert sum(want.values()) > 50 and any(n > 1 for n in want.values())  # the data is not trivial
    written = [t for t in tasks if not (t.cancelled and fmt in ("generic", "excel", "epoch"))]
    assert len(raw) == len(written) and {r.kind for r in raw} == {"csv"}
    assert {s.source for s in samples} == {"tasks"} and all(s.detail == "csv" for s in samples)
    titles = {t.title for t in tasks}
    assert not any(t in repr(s) for s in samples for t in titles)  # titles stay in raw_tasks only
    assert any(t.title in json.loads(r.payload).values() for r in raw for t in tasks[:3])


@pytest.mark.parametrize("zone", ZONES)
def test_date_only_completions_are_day_counts(tmp_path, zone):
    tasks = tx.make_tasks(7, zone)
    path = tmp_path / "dates.csv"
    path.write_bytes(tx.dates(tasks))
    samples, _ = _samples(path, zone)
    assert all(s.metric == "task_completed_day" for s in samples)
    days = Counter({s.local_day: int(s.value) for s in samples})
    assert days == tx.expected_days([t for t in tasks if not t.cancelled])
    tz = ZoneInfo(zone)
    for s in samples:  # local midnight to the next, in the person's zone
        assert s.start_ts.astimezone(tz).replace(tzinfo=None) == datetime(s.local_day.year, s.local_day.month, s.local_day.day)
        assert (s.end_ts.astimezone(tz).date() - s.local_day).days == 1


def test_utc_times_without_a_zone_column_are_shown_in_the_person_zone(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("title,completed_at\n"
                    "a,2024-03-01T23:30:00Z\n"            # UTC: shown in Tokyo, the next morning
                    "b,2024-03-01T23:30:00-05:00\n"       # an offset of its own: that local day
                    "c,2024-03-01 23:30\n"                # local, in the person's zone
                    "d,1709335800\n")                     # epoch seconds: 2024-03-01T23:30:00Z
    samples, _ = _samples(path, "Asia/Tokyo")
    got = {(s.start_ts, s.local_day, s.tz_offset_min) for s in samples}
    t = datetime(2024, 3, 1, 23, 30, tzinfo=UTC)
    assert got == {(t, date(2024, 3, 2), 540), (t + timedelta(hours=5), date(2024, 3, 1), -300),
                   (t - timedelta(hours=9), date(2024, 3, 1), 540)}
    assert {int(s.value) for s in samples if s.start_ts == t} == {2}  # a and d: the same instant


def test_import_is_idempotent_and_a_later_export_updates_the_counts(rhythm_home, run_cli, tmp_path):
    tasks = tx.make_tasks(3, "Europe/Berlin", travel=TRAVEL)
    early = tmp_path / "early.csv"
    early.write_bytes(tx.ticktick(tasks[:80]))
    code, out, err = run_cli("import", "tasks", early, "--json")
    assert code == 0, err
    first = _snapshot(run_cli)
    code, out, _ = run_cli("import", "tasks", early, "--json")  # again: nothing new
    summary = json.loads(out)
    assert code == 0 and summary["duplicates_skipped"] == summary["records"]
    assert _snapshot(run_cli) == first
    later = tmp_path / "later.csv"  # the next export: everything, some tasks ticked off since
    later.write_bytes(tx.ticktick(tasks))
    assert run_cli("import", "tasks", later)[0] == 0
    rows = _sql(run_cli, "SELECT sum(value) AS n FROM samples WHERE metric = 'task_completed'")
    assert rows == [{"n": float(sum(tx.expected(tasks).values()))}]
    assert _sql(run_cli, "SELECT count(*) AS n FROM raw_tasks") == [{"n": len(tasks)}]


def test_a_folder_or_zip_of_overlapping_exports_counts_each_task_once(rhythm_home, run_cli, tmp_path):
    tasks = tx.make_tasks(4, "America/New_York")
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "jan-feb.csv").write_bytes(tx.things(tasks[:70]))
    (folder / "feb-mar.csv").write_bytes(tx.things(tasks[40:]))
    (folder / "notes.md").write_text("not a task file")
    samples, _ = _samples(folder, "America/New_York")
    assert _timed(samples) == tx.expected(tasks)
    archive = tmp_path / "exports.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(folder.iterdir()):
            zf.write(p, f"export/{p.name}")
    code, _, err = run_cli("config", "set", "timezone", "America/New_York")
    assert code == 0, err
    assert run_cli("import", "tasks", archive)[0] == 0
    rows = _sql(run_cli, "SELECT sum(value) AS n, count(DISTINCT detail) AS d FROM samples")
    assert rows == [{"n": float(sum(tx.expected(tasks).values())), "d": 1}]


BAD = {
    "unknown status": ("title,status,completed_at\nok,done,2024-03-01T10:00:00Z\nhm,maybe,2024-03-02T10:00:00Z\n",
                       "line 3", "unknown status 'maybe'"),
    "day-first date": ("title,completed_at\nok,2024-03-01T10:00:00Z\nhm,03/01/2024 10:00\n",
                       "line 3", "cannot read the completion time '03/01/2024 10:00'"),
    "unknown zone": ("title,completed_at,timezone\nok,2024-03-01 10:00,Europe/Berlin\nhm,2024-03-01 10:00,Mars/Olympus\n",
                     "line 3", "unknown time zone 'Mars/Olympus'"),
    "year 1": ("title,completed_at\nok,2024-03-01T10:00:00Z\nhm,0001-01-01T00:00:00Z\n", "line 3", "outside 1970-2100"),
    "extra fields": ("title,completed_at\nok,2024-03-01T10:00:00Z\nhm,2024-03-01T10:00:00Z,extra\n",
                     "line 3", "3 fields where the header has 2"),
    "no header": ("name,priority\nsomething,1\n", None, "no header row naming a title and a completion column"),
    "not utf-8": (b"title,completed_at\nok,2024-03-01T10:00:00Z\ncaf\xe9,2024-03-01T11:00:00Z\n".decode("latin-1"),
                  None, "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_row_is_one_line_and_the_database_is_unchanged(rhythm_home, run_cli, tmp_path, case):
    good = tmp_path / "good.csv"
    good.write_text("title,completed_at,id\nfirst,2024-02-01T09:00:00+01:00,1\nsecond,2024-02-02,2\n")
    assert run_cli("import", "tasks", good)[0] == 0
    before = _snapshot(run_cli)
    text, where, what = BAD[case]
    bad = tmp_path / "bad.csv"
    bad.write_bytes(text.encode("latin-1") if case == "not utf-8" else text.encode())
    code, out, err = run_cli("import", "tasks", bad)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert what in err and str(bad) in err and (where is None or where in err)
    assert _snapshot(run_cli) == before


def test_a_failed_first_import_leaves_no_raw_table(rhythm_home, run_cli, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("title,completed_at\nok,2024-03-01T10:00:00Z\nhm,yesterday\n")
    assert run_cli("import", "tasks", bad)[0] == 1
    assert _sql(run_cli, "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = 'raw_tasks'") == [{"n": 0}]
    assert _sql(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 0}]


def test_without_ids_a_repeated_row_is_one_task(tmp_path):
    """Exports without an id column: the same row twice (two overlapping exports pasted
    together) is one task; two tasks ticked off in the same minute are two."""
    path = tmp_path / "r.csv"
    path.write_text("title,completed_at\nwater plants,2024-03-01 10:00\nwater plants,2024-03-01 10:00\n"
                    "call Ann,2024-03-01 10:00\n")
    samples, raw = _samples(path, "Europe/Berlin")
    assert [int(s.value) for s in samples] == [2] and len({r.natural_key for r in raw}) == 2


def test_statuses_decide_what_counts(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(
        "title,status,completed_at\n"
        "done,completed,2024-03-01T10:00:00Z\n"
        "ticked,x,2024-03-01T10:05:00Z\n"
        "reopened,needsAction,2024-03-01T10:10:00Z\n"   # an old completion time: open now
        "dropped,won't do,2024-03-01T10:15:00Z\n"
        "cancelled,Cancelled,2024-03-01T10:20:00Z\n"
        "no date,done,\n"                               # done, but when? not invented
    )
    samples, raw = _samples(path, "UTC")
    assert sorted(s.start_ts.minute for s in samples) == [0, 5] and len(raw) == 6


def test_a_takeout_zip_of_several_products_reads_only_the_tasks(tmp_path):
    tasks = {"kind": "tasks#taskLists", "items": [{"id": "L1", "title": "My Tasks", "items": [
        {"id": "a", "title": "file taxes", "status": "completed", "completed": "2024-03-01T09:00:00.000Z"},
        {"id": "b", "title": "call Ann", "status": "needsAction"}]}]}
    archive = tmp_path / "takeout-20240401.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("Takeout/archive_browser.html", "<html></html>")
        zf.writestr("Takeout/Fit/Daily activity metrics/2024-03-01.json", json.dumps({"steps": 10}))
        zf.writestr("Takeout/Tasks/Tasks.json", json.dumps(tasks))
    samples, raw = _samples(archive, "Europe/Berlin")
    assert [(s.start_ts, s.local_day, s.tz_offset_min, s.detail) for s in samples] == [
        (datetime(2024, 3, 1, 9, tzinfo=UTC), date(2024, 3, 1), 60, "google_tasks:a")]
    assert sorted(r.natural_key for r in raw) == ["L1", "a", "b"]


def test_compact_and_slashed_dates(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("title,completed_at\na,20240301\nb,2024/03/01\nc,2024.03.02 07:15\n")
    samples, _ = _samples(path, "Europe/Berlin")
    assert sorted((s.metric, s.local_day, s.value) for s in samples) == [
        ("task_completed", date(2024, 3, 2), 1.0), ("task_completed_day", date(2024, 3, 1), 2.0)]
