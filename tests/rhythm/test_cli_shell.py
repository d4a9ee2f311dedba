"""The `rhythm` shell: init, sql, export, db info, --version, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq

from storage.db import load_migrations


def test_init_creates_home_config_and_database(run_cli, rhythm_home):
    code, out, _ = run_cli("init", "--json")
    assert code == 0
    info = json.loads(out)
    expected = [f"{m.version:04d}_{m.name}" for m in load_migrations()]
    assert info["migrations_applied"] == expected and info["schema_version"] == load_migrations()[-1].version
    assert (rhythm_home / "config.toml").exists() and (rhythm_home / "rhythm.duckdb").exists()
    assert (rhythm_home / "tokens").stat().st_mode & 0o777 == 0o700
    code, out, _ = run_cli("init", "--json")  # again: nothing to apply
    assert code == 0 and json.loads(out)["migrations_applied"] == []


def test_sql_select_in_three_formats(run_cli):
    run_cli("init")
    code, out, _ = run_cli("sql", "select 1 as one, 'a' as letter")
    assert code == 0 and "one" in out and "letter" in out and "1 row" in out
    code, out, _ = run_cli("sql", "--csv", "select 1 as one, 'a' as letter")
    assert out.splitlines() == ["one,letter", "1,a"]
    code, out, _ = run_cli("sql", "--json", "select 1 as one, 'a' as letter")
    assert json.loads(out) == [{"one": 1, "letter": "a"}]


def test_sql_insert_is_refused_with_one_line(run_cli):
    run_cli("init")
    code, out, err = run_cli("sql", "insert into feedback values (1, 'accept', now())")
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "read-only" in lines[0] and "Traceback" not in err
    code, out, _ = run_cli("sql", "--csv", "select count(*) as n from feedback")
    assert out.splitlines()[1] == "0"


def test_sql_error_is_one_line_and_debug_shows_traceback(run_cli, rhythm_home):
    run_cli("init")
    code, _, err = run_cli("sql", "select * from no_such_table")
    assert code == 1 and "no_such_table" in err and "Traceback" not in err
    proc = subprocess.run(
        [sys.executable, "-m", "rhythm", "--debug", "sql", "select * from no_such_table"],
        capture_output=True, text=True, env={"RHYTHM_HOME": str(rhythm_home), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_sql_before_init_says_what_to_do(run_cli):
    code, _, err = run_cli("sql", "select 1")
    assert code != 0 and "rhythm init" in err


def test_db_info_reports_tables_size_and_version(run_cli):
    run_cli("init")
    code, out, _ = run_cli("db", "info", "--json")
    info = json.loads(out)
    assert code == 0 and info["schema_version"] == load_migrations()[-1].version and info["file_size_bytes"] > 0
    assert info["tables"]["samples"] == 0 and "daily_summary" in info["views"]


def test_export_writes_parquet_per_table(run_cli, tmp_path):
    run_cli("init")
    code, out, _ = run_cli("export", str(tmp_path / "out"), "--json")
    files = json.loads(out)
    assert code == 0 and "samples" in files and "events" in files
    assert pq.read_table(files["meters"]["path"]).num_rows == 0


def test_db_option_overrides_the_database(run_cli, tmp_path):
    other = tmp_path / "elsewhere.duckdb"
    code, _, _ = run_cli("--db", str(other), "init")
    assert code == 0 and other.exists()


def test_version(run_cli):
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith("rhythm ")
