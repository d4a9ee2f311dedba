"""`rhythm map` and `rhythm meters` through the real entry point."""

from __future__ import annotations

import json
from datetime import timedelta

from lab.people.watch_calendar import START, calendar_records, watch_records
from storage import open_db
from storage.writer import write_records


def _seed(rhythm_home, days=21):
    with open_db(rhythm_home / "rhythm.duckdb") as db:
        write_records(db, [*watch_records(days), *calendar_records(days)])


def test_map_then_meters_json(run_cli, rhythm_home):
    _seed(rhythm_home)
    code, out, err = run_cli("map", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["first_day"] == START.isoformat() and summary["days"] == 21
    assert summary["actions"]["SLEEP"] >= 20 and summary["events_classified"] > 0
    day = (START + timedelta(days=16)).isoformat()
    code, out, err = run_cli("meters", "--day", day, "--days", "2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["rows"]) == 8 and data["plot"] is None
    row = data["rows"][-1]
    assert row["local_day"] == day and row["slot"] == "night"
    assert set(row["evidence"]) >= {"vitality", "cognition", "progress", "serenity", "connection"}
    assert row["action"] == "SLEEP"
    _, rows = open_db(rhythm_home / "rhythm.duckdb", read_only=True).query(
        "SELECT kind, ok FROM runs WHERE kind = 'map'")
    assert rows == [("map", True)]


def test_map_text_and_meters_table_with_explain_and_default_plot(run_cli, rhythm_home):
    _seed(rhythm_home)
    code, out, _ = run_cli("map", "--since", (START + timedelta(days=7)).isoformat())
    assert code == 0 and "mapped days" in out and "SLEEP" in out
    code, out, err = run_cli("meters", "--explain", "--plot", "default")
    assert code == 0, err
    assert "meters on" in out and "sleep_min" in out and "missing" in out
    png = rhythm_home / "plots" / "meters.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to" in out


def test_meters_plot_to_a_path(run_cli, rhythm_home, tmp_path):
    _seed(rhythm_home)
    assert run_cli("map")[0] == 0
    target = tmp_path / "sub" / "m.png"
    code, out, err = run_cli("meters", "--plot", str(target), "--json")
    assert code == 0, err
    assert json.loads(out)["plot"] == str(target) and target.stat().st_size > 1000


def test_meters_before_any_map(run_cli, rhythm_home):
    assert run_cli("init")[0] == 0
    code, out, _ = run_cli("meters")
    assert code == 0 and "no meters yet" in out


def test_bad_day_is_one_line_error(run_cli, rhythm_home):
    assert run_cli("init")[0] == 0
    code, _, err = run_cli("map", "--since", "yesterday")
    assert code != 0 and "YYYY-MM-DD" in err and "Traceback" not in err
    code, _, err = run_cli("meters", "--day", "2024-13-01")
    assert code != 0 and "YYYY-MM-DD" in err
