"""`rhythm demo` (what `make demo` runs) and the bundled sample it runs on."""

from __future__ import annotations

import re

import pytest

from rhythm.data import make_sample
from rhythm.demo import SAMPLE_DIR, SAMPLE_FILES


def test_sample_files_are_what_the_script_makes_and_small():
    built = make_sample.build()
    assert sorted(built) == sorted(name for _, name, _ in SAMPLE_FILES)
    for name, data in built.items():
        assert (SAMPLE_DIR / name).read_bytes() == data, f"{name}: run `python -m rhythm.data.make_sample`"
    assert sum(len(d) for d in built.values()) < 2_000_000


@pytest.mark.slow
def test_demo_prints_a_plan_and_writes_the_report(rhythm_home, tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_AGENT_BACKEND", "bayes")
    home = tmp_path / "demo"
    code, out, err = run_cli("demo", "--demo-home", home)
    assert code == 0, err
    assert re.search(r"imported Apple Health: \d+ records, days 2025-02-\d\d \.\. 2025-03-26", out)
    assert "imported WHOOP" in out and "imported Calendar" in out
    assert "Plan for 2025-03-26" in out or "plan for 2025-03-26" in out
    assert re.search(r"social 0\.\d\d ±\s?0\.\d\d", out)  # the belief with its uncertainty
    m = re.search(r"report (\S+report\.html) \((\d)/6 sections with data, (\d+) plots\)", out)
    assert m and m.group(1) == str(home / "report.html") and int(m.group(3)) >= 6
    page = (home / "report.html").read_text()
    assert "Today's plan" in page and "No plan for" not in page
    assert (home / "rhythm.duckdb").exists()


