"""The `rhythm` shell: init, sql, export, db info, --version, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from common.errors import StorageError
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


def test_global_options_work_after_the_subcommand_too(run_cli, tmp_path):
    other = tmp_path / "other.duckdb"
    run_cli("--db", other, "init")
    code, out, err = run_cli("sql", "--json", "select count(*) as n from schema_migrations", "--db", other)
    assert code == 0, err
    assert json.loads(out)[0]["n"] > 0
    code, out, _ = run_cli("db", "info", "--json", f"--db={other}")
    assert code == 0 and json.loads(out)["path"] == str(other)
    with pytest.raises(StorageError):  # --debug anywhere: the exception itself, not one line
        run_cli("sql", "select nope", "--db", tmp_path / "missing.duckdb", "--debug")


def test_wide_sql_results_switch_to_one_block_per_row(run_cli):
    run_cli("init")
    wide = ", ".join(f"'{'x' * 30}' AS column_number_{i}" for i in range(8))
    code, out, _ = run_cli("sql", f"select 1 AS id, {wide}")
    assert code == 0
    assert "-[ row 1 ]" in out and "column_number_7 | " + "x" * 30 in out
    assert "--csv" in out  # says how to get machine-readable output
    code, out, _ = run_cli("sql", "-x", "select 1 AS a")
    assert "-[ row 1 ]" in out and "a | 1" in out
    code, out, _ = run_cli("sql", "select 1 AS a, 2 AS b")  # narrow: still a table
    assert "-[ row" not in out and "1 row" in out


def test_sql_shows_imported_text_as_text_never_as_markup_or_terminal_codes(run_cli):
    run_cli("init")
    code, out, err = run_cli("sql", "select '[/] [bold]x[/bold] ' || chr(27) || ']0;pwned' || chr(7) AS title")
    assert code == 0, err
    assert "[/] [bold]x[/bold]" in out and "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07" in out


def test_config_set_writes_a_top_level_key_even_when_the_file_ends_in_a_section(run_cli, rhythm_home):
    run_cli("init")  # the default config.toml ends with a [daemon] section
    assert (rhythm_home / "config.toml").read_text().rstrip().splitlines()[-1].startswith("#")
    code, out, err = run_cli("config", "set", "timezone", "Europe/Berlin")
    assert code == 0, err
    text = (rhythm_home / "config.toml").read_text()
    assert text.index('timezone = "Europe/Berlin"') < text.index("[whoop]")
    assert "# Rhythm settings." in text  # comments kept
    code, out, _ = run_cli("config", "show", "--json")
    assert json.loads(out)["timezone"] == {"value": "Europe/Berlin", "from": "config"}
    code, _, _ = run_cli("config", "set", "whoop_lag_days", "5")  # into its own section
    import tomllib

    doc = tomllib.loads((rhythm_home / "config.toml").read_text())
    assert doc["whoop"]["lag_days"] == 5 and "whoop_lag_days" not in doc
    assert run_cli("config", "unset", "timezone")[0] == 0
    assert "timezone =" not in (rhythm_home / "config.toml").read_text().split("[whoop]")[0].replace("# timezone", "")


def test_config_set_refuses_bad_values_and_leaves_the_file(run_cli, rhythm_home):
    run_cli("init")
    before = (rhythm_home / "config.toml").read_bytes()
    for args, needle in ((("timezone", "Mars/Olympus"), "Mars/Olympus"), (("whoop_lag_days", "soon"), "whoop_lag_days"),
                         (("no_such_setting", "1"), "no_such_setting"),
                         (("implicit_answers", "maybe"), "expected true or false")):
        code, _, err = run_cli("config", "set", *args)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert (rhythm_home / "config.toml").read_bytes() == before


def test_config_show_masks_secrets(run_cli, rhythm_home, monkeypatch):
    monkeypatch.setenv("RHYTHM_WHOOP_CLIENT_SECRET", "s3cret-value")
    code, out, _ = run_cli("config", "show")
    assert code == 0 and "s3cret-value" not in out and "***" in out


def test_every_command_module_is_mounted_or_the_cli_fails_loudly(monkeypatch):
    """No silently dropped command: a command module that cannot be imported fails the CLI."""
    import importlib

    main = importlib.import_module("rhythm.cli.main")
    monkeypatch.delattr(sys.modules["rhythm.cli"], "sim")
    monkeypatch.setitem(sys.modules, "rhythm.cli.sim", None)
    try:
        importlib.reload(main)
        raised = False
    except ImportError:
        raised = True
    finally:
        monkeypatch.undo()
        importlib.reload(main)
    assert raised
