"""`rhythm sql` cannot write, reach outside the database, or change its own settings.

Each escape the audit found (and more) goes through the real CLI; the database and every
file around it stay as they were. Probes that would reach the network (INSTALL, URLs) are
only sent where external access is already off, so they fail before any connection.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest


@pytest.fixture
def home(rhythm_home, run_cli):
    assert run_cli("init")[0] == 0
    run_cli("config", "set", "timezone", "Europe/Berlin")
    secret = rhythm_home / "tokens" / "whoop.json"
    secret.write_text('{"access_token": "tok-123"}')
    os.chmod(secret, 0o600)
    return rhythm_home


def _snapshot(home):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in home.rglob("*") if p.is_file()} | {
        "files": tuple(sorted(str(p) for p in home.parent.rglob("*")))}


ESCAPES = [
    # writes through EXPLAIN ANALYZE (it runs what it explains)
    "EXPLAIN ANALYZE COPY (SELECT 'api_base = \"http://evil\"' AS x) TO '{home}/config.toml' (HEADER false)",
    "explain analyze copy (select 1) to '{home}/../leak.csv'",
    "/* hi */ EXPLAIN ANALYZE SELECT 1",
    "EXPLAIN (ANALYZE) SELECT 1",
    "EXPLAIN ANALYZE INSTALL httpfs",
    # writes and settings
    "COPY (SELECT * FROM runs) TO '{home}/../runs.csv'",
    "EXPORT DATABASE '{home}/../dump'",
    "ATTACH '{home}/../other.duckdb' AS o",
    "LOAD httpfs",
    "INSTALL httpfs",
    "SET enable_external_access = true",
    "SET threads = 1",
    "RESET lock_configuration",
    "PRAGMA enable_profiling",
    "CREATE TABLE x AS SELECT 1",
    "INSERT INTO feedback VALUES (1, 'accept', now())",
    "DELETE FROM runs",
    "DROP VIEW daily_summary",
    "CHECKPOINT",
    "SELECT 1; DELETE FROM runs",
    # reading files other than the database
    "SELECT * FROM read_text('{home}/tokens/whoop.json')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('{home}/config.toml')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM glob('{home}/tokens/*')",
    "SELECT * FROM '{home}/tokens/whoop.json'",
    "SELECT * FROM read_json('{home}/tokens/whoop.json')",
    "SELECT * FROM read_parquet('https://example.invalid/x.parquet')",
    "WITH t AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM t",
]


@pytest.mark.parametrize("sql", ESCAPES)
def test_sql_escapes_are_refused_with_one_line_and_change_nothing(home, run_cli, sql):
    before = _snapshot(home)
    code, out, err = run_cli("sql", sql.format(home=home))
    assert code != 0, out
    assert len(err.strip().splitlines()) == 1, err
    assert "tok-123" not in out + err
    assert _snapshot(home) == before


def test_plain_reads_still_work(home, run_cli):
    for sql in ("SELECT count(*) AS n FROM runs", "DESCRIBE samples", "SHOW TABLES", "SUMMARIZE runs",
                "EXPLAIN SELECT * FROM samples", "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
                "SELECT current_setting('TimeZone') AS tz"):
        code, out, err = run_cli("sql", "--json", sql)
        assert code == 0, (sql, err)
    code, out, _ = run_cli("sql", "--json", "SELECT current_setting('TimeZone') AS tz")
    assert json.loads(out) == [{"tz": "UTC"}]  # instants come back in UTC, as documented


def test_export_still_writes_parquet(home, run_cli, tmp_path):
    code, out, err = run_cli("export", tmp_path / "pq", "--json")
    assert code == 0, err
    assert (tmp_path / "pq" / "runs.parquet").exists()


def test_database_config_and_wal_are_private(home, run_cli):
    for p in (home / "rhythm.duckdb", home / "config.toml"):
        assert p.stat().st_mode & 0o077 == 0, p


def test_cut_values_keep_short_nested_values_and_cut_long_ones_in_the_database(tmp_path):
    from storage import open_db

    with open_db(tmp_path / "cut.duckdb") as db:
        cols, rows = db.query(
            "SELECT [1, 2] AS short_list, {'a': 1} AS short_struct, [repeat('x', 500)] AS long_list, "
            "{'b': repeat('y', 500)} AS long_struct, repeat('z', 500) AS long_text",
            max_chars=100,
        )
    assert cols == ["short_list", "short_struct", "long_list", "long_struct", "long_text"]
    short_list, short_struct, long_list, long_struct, long_text = rows[0]
    assert short_list == [1, 2] and short_struct == {"a": 1}
    # long values come back as their text, cut by the database to max_chars + 1 characters
    assert isinstance(long_list, str) and len(long_list) == 101 and long_list.startswith("[xxx")
    assert isinstance(long_struct, str) and len(long_struct) == 101 and "yyy" in long_struct
    assert long_text == "z" * 101
