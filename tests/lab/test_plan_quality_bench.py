"""benchmarks/plan_quality.py end to end on one small person: the issue-37 columns (top
share, repeated-reason days, short blocks alone, the model's veto rate) and the hidden answer
rules' acceptance reach the JSON and the markdown tables."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("plan_quality", ROOT / "benchmarks" / "plan_quality.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plan_quality", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_benchmark_reports_the_new_columns_and_the_rules(tmp_path, capsys):
    bench = _bench()
    args = ["--people", "1", "--seed", "2", "--days", "3", "--backend", "bayes", "--rules", "no_repeat,day_sleeper",
            "--rule-people", "1", "--rule-days", "3"]
    assert bench.main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["kind"] == "night_nurse" and row["days"] == 3
    assert row["top_action"] in row["actions"] and 0 < row["top_share"] <= 1
    assert row["actions"][row["top_action"]] == max(row["actions"].values())
    assert sum(row["actions"].values()) == row["non_sleep_blocks"] <= row["blocks"]
    assert row["repeated_days"] <= 3 and len(row["repeated"]) >= row["repeated_days"]
    assert row["short_alone"] == len(row["short_alone_blocks"])
    assert row["asks"] == 0 and row["veto_rate"] is None  # the bayes backend asks no model
    assert [r["rule"] for r in out["rules"]] == ["no_repeat", "day_sleeper"]
    for r in out["rules"]:
        assert len(r["people"]) == 1 and len(r["per_day"]) == 3
        assert r["offered_first_ns"] > 0 and 0 <= r["first_ns"] <= 1 and 0 <= r["last_all"] <= 1
        assert r["answers_stored"] == sum(d["offered"] for d in r["per_day"])  # every answer in `feedback`
    sleeper = out["rules"][1]
    assert sleeper["people"][0].split("-")[0] in ("night_nurse", "rotating")
    # a saved run renders as the markdown tables, and rewrites only its section of a results file
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(out))
    md = tmp_path / "results.md"
    md.write_text("# Results\n\n## Plan quality\n\nold\n\n## Other\n\nkept\n")
    assert bench.main(["--render", str(saved), "--results-md", str(md)]) == 0
    text = capsys.readouterr().out
    assert "| top action | top share | repeated days | short alone | asks | vetoes | veto rate |" in text
    assert "| no_repeat | 1 (" in text and "| day_sleeper | 1 (" in text
    written = md.read_text()
    assert "old" not in written and "## Other\n\nkept" in written and "veto rate" in written
    assert "--days 3" in written and "--json" not in written


@pytest.mark.slow
@pytest.mark.ml
def test_with_the_bundled_model_the_asks_and_vetoes_come_from_the_stored_runs(capsys):
    pytest.importorskip("llama_cpp")
    bench = _bench()
    assert bench.main(["--people", "1", "--days", "3", "--backend", "auto", "--rules", "none", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert 0 < row["asks"] <= 3
    assert row["vetoes"] == len(row["vetoed_picks"]) <= row["asks"]
    assert row["veto_rate"] == round(row["vetoes"] / row["asks"], 3)
