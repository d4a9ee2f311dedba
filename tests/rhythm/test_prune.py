"""Poison-proof dates and `rhythm db prune`: a row dated year 1 or 9999 that slipped in
before the importers refused such dates does not break `rhythm map`, and prune removes it
(or a whole source) in one transaction."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

from common.records import RawRecord, Sample, SleepSession
from storage import open_db
from storage.writer import write_records


def _seed(home):
    recs = []
    for i in range(10):
        d = date(2025, 3, 1) + timedelta(days=i)
        t = datetime(d.year, d.month, d.day, 7, tzinfo=UTC)
        recs.append(SleepSession("whoop", f"s{i}", t - timedelta(hours=8), t, d, sleep_min=450, tz_offset_min=0))
        recs.append(Sample("healthkit", "steps", t, t + timedelta(hours=1), 900.0, "count", d, tz_offset_min=0))
    recs.append(RawRecord("whoop", "cycle", "c1", "{}", datetime(2025, 3, 1, tzinfo=UTC)))
    # what slipped in: year 1 at +14:00 and year 9999 at -14:00 (local days out of any range)
    recs.append(Sample("healthkit", "steps", datetime(1, 1, 2, tzinfo=UTC), datetime(1, 1, 2, 1, tzinfo=UTC),
                       5.0, "count", date(1, 1, 2), tz_offset_min=840))
    recs.append(Sample("healthkit", "heart_rate", datetime(9999, 12, 30, tzinfo=UTC),
                       datetime(9999, 12, 30, tzinfo=UTC), 60.0, "bpm", date(9999, 12, 31), tz_offset_min=-840))
    with open_db(home / "rhythm.duckdb") as db:
        write_records(db, recs)


def _q(run_cli, sql):
    code, out, err = run_cli("sql", "--json", sql)
    assert code == 0, err
    return json.loads(out)


def test_map_ignores_days_out_of_range_and_prune_removes_them(rhythm_home, run_cli):
    _seed(rhythm_home)
    code, out, err = run_cli("map", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert (s["first_day"], s["last_day"]) == ("2025-03-01", "2025-03-10")
    code, out, err = run_cli("db", "prune", "--before", "1900-01-01", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["tables"]["samples"] == 1
    assert _q(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 12}]  # dry run: nothing gone
    code, out, err = run_cli("db", "prune", "--before", "1900-01-01", "--json")
    assert code == 0 and json.loads(out)["tables"]["samples"] == 1
    code, out, err = run_cli("db", "prune", "--after", "2100-12-31")
    assert code == 0, err
    assert _q(run_cli, "SELECT min(local_day) AS a, max(local_day) AS b FROM samples") == [
        {"a": "2025-03-01", "b": "2025-03-10"}]
    assert _q(run_cli, "SELECT count(*) AS n FROM runs WHERE kind = 'prune' AND ok") == [{"n": 2}]


def test_prune_a_source_takes_its_raw_payloads_and_cursors_and_keeps_the_rest(rhythm_home, run_cli):
    _seed(rhythm_home)
    with open_db(rhythm_home / "rhythm.duckdb") as db:
        db.set_cursor("whoop", "cycle", "2025-03-10")
    assert run_cli("db", "prune", "--source", "whoop")[0] == 0
    assert _q(run_cli, "SELECT count(*) AS n FROM sleep_sessions") == [{"n": 0}]
    assert _q(run_cli, "SELECT count(*) AS n FROM raw_whoop") == [{"n": 0}]
    assert _q(run_cli, "SELECT count(*) AS n FROM sync_state") == [{"n": 0}]
    assert _q(run_cli, "SELECT count(*) AS n FROM samples WHERE source = 'healthkit'") == [{"n": 12}]


def test_prune_needs_a_filter_and_good_days(rhythm_home, run_cli):
    _seed(rhythm_home)
    for args in ((), ("--before", "yesterday")):
        code, _, err = run_cli("db", "prune", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1
    assert _q(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 12}]
