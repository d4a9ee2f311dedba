"""MCP answers have a byte budget, and SQL comment tricks cannot get past a refusal (issue 41).

Each case runs against a copy of the seeded database (tests/hostile/conftest.py) and checks
the database is unchanged; memory is measured in a child process where it matters."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rhythm.mcp import budget, tools
from rhythm.mcp.models import ImportedText, PlanResult
from rhythm.settings import load_settings
from tests.hostile.conftest import Sealed, snapshot

REPO = Path(__file__).resolve().parents[2]
CHILD = (
    "import json, re, sys\n"
    "from rhythm.mcp import budget, tools\n"
    "from rhythm.settings import load_settings\n"
    "r = budget.fit(tools.query_sql(load_settings(), sys.argv[1], 5000))\n"
    "doc = r.model_dump(mode='json')\n"
    "hwm = int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) // 1024\n"
    "print(json.dumps({'bytes': len(json.dumps(doc).encode()), 'truncated': doc['truncated'], 'note': doc['note'],"
    " 'rows': doc['row_count'], 'peak_mb': hwm}))\n"
)
PEAK_MB = 800  # DuckDB evaluates the 200 MB string itself (~450 MB); before the budget: 1.7 GB


@pytest.mark.slow  # a child process each, 2-5 s
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory read from /proc (Linux)")
@pytest.mark.parametrize(("sql", "rows"), [
    ("SELECT repeat('x', 200000000) AS x", 1),
    ("SELECT {'a': repeat('y', 5000000)} AS s, [repeat('z', 3000000)] AS l", 1),
    ("SELECT repeat('x', 30000) AS x, range AS i FROM range(2000)", None),
], ids=["one-200-MB-string", "nested-values", "many-long-rows"])
def test_a_query_far_over_the_budget_gets_a_bounded_answer_that_says_so(sql, rows, sealed: Sealed):
    before = snapshot(sealed.db)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, sql], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["bytes"] <= budget.MAX_ANSWER_BYTES
    assert got["truncated"] is True and "cut" in got["note"] or "budget" in got["note"]
    if rows is not None:
        assert got["rows"] == rows
    else:
        assert 0 < got["rows"] < 2000 and "budget" in got["note"]
    assert got["peak_mb"] < PEAK_MB, got
    assert snapshot(sealed.db) == before


def test_a_value_is_cut_with_a_mark_and_short_values_are_untouched(sealed: Sealed):
    settings = load_settings()
    r = tools.query_sql(settings, "SELECT repeat('é', 50000) AS long, 'short' AS s, 42 AS n")
    long, short, n = r.rows[0]
    assert long == "é" * budget.MAX_VALUE_CHARS + budget.CUT_MARK and short == "short" and n == 42
    assert r.truncated and "1 values longer than" in r.note
    plain = tools.query_sql(settings, "SELECT count(*) AS n FROM samples")
    assert plain.truncated is False and plain.note is None


def test_every_other_answer_is_cut_to_the_budget_too():
    huge = PlanResult(day="2026-01-01", timezone="UTC", wake=None, bed=None, commitments=[], fixed_slots=None,
                      recommendations=[], belief={}, belief_sd={}, model="m", observed_slots=None,
                      feedback_used=None, notes=[ImportedText(text="n" * 400_000) for _ in range(10)], horizon=None,
                      origin="stored", planned_at=None)
    fitted = budget.fit(huge)
    assert budget.size(fitted.model_dump(mode="json")) <= budget.MAX_ANSWER_BYTES
    assert fitted.cut and "10 long values cut" in fitted.cut
    assert len(fitted.notes) == 10 and all(n.untrusted for n in fitted.notes)
    small = huge.model_copy(update={"notes": []})
    assert budget.fit(small) is small


# -- SQL comments cannot hide a refused keyword ---------------------------------------------------
TRICKS = [
    "EXPLAIN/**/ANALYZE SELECT 1",
    "EXPLAIN/**/ANALYSE SELECT 1",
    "EXPLAIN--x\nANALYZE SELECT 1",
    "EXPLAIN /* one /* nested */ two */ ANALYZE SELECT 1",
    "/**/EXPLAIN/**/ANALYZE/**/SELECT 1",
    "--lead\nEXPLAIN\t\nANALYZE SELECT count(*) FROM samples",
    "explain/*'*/analyze select 1",
    "EXPLAIN (ANALYZE) SELECT 1",
]


@pytest.mark.parametrize("sql", TRICKS, ids=[f"trick-{i}" for i in range(len(TRICKS))])
def test_sql_comment_tricks_cannot_get_past_the_explain_analyze_refusal(sql, sealed: Sealed):
    before = snapshot(sealed.db)
    rc, _out, err = sealed.run_cli("sql", "--", sql)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(r"refused|SQL error", lines[0]) and "Traceback" not in err
    with pytest.raises(Exception, match=r"refused|SQL error"):
        tools.query_sql(load_settings(), sql)
    assert snapshot(sealed.db) == before


def test_comments_and_quotes_in_a_plain_query_still_work(sealed: Sealed):
    r = tools.query_sql(load_settings(), "SELECT /* c */ 'EXPLAIN /* ANALYZE */ x' AS s -- tail\n")
    assert r.rows == [["EXPLAIN /* ANALYZE */ x"]] and r.columns == ["s"]
    both = tools.query_sql(load_settings(), 'SELECT 1 AS a, 2 AS a, 3 AS "we""ird"')
    assert both.rows == [[1, 2, 3]] and both.columns[2] == 'we"ird'
