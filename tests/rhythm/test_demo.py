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
def test_demo_prints_a_plan_and_writes_the_report(rhythm_home, tmp_path, run_cli):
    home = tmp_path / "demo"
    code, out, err = run_cli("demo", "--demo-home", home)
    assert code == 0, err
    assert re.search(r"imported Apple Health: \d+ records, days 2025-02-\d\d \.\. 2025-03-26", out)
    assert "imported WHOOP" in out and "imported Calendar" in out
    assert "Plan for Wednesday 26 Mar 2025 (Europe/Amsterdam)" in out  # the timeline
    assert "Team stand-up" in out and "Movie night" in out  # her commitments in it
    assert re.search(r"social 0\.\d\d ±\s?0\.\d\d", out)  # the belief with its uncertainty
    m = re.search(r"report (\S+report\.html) \((\d)/7 sections with data, (\d+) plots\)", out)
    assert m and m.group(1) == str(home / "report.html") and int(m.group(3)) >= 6
    page = (home / "report.html").read_text()
    assert "Today's plan" in page and "No plan for" not in page
    assert (home / "rhythm.duckdb").exists()


@pytest.mark.slow
def test_the_demo_plan_respects_maras_calendar(rhythm_home, tmp_path):
    """Gym 07:00, stand-up 09:30, meetings all afternoon, movie night 20:30: no block over
    any of them, every block with evidence and an expected effect."""
    from datetime import datetime

    from rhythm.demo import run_demo
    from rhythm.settings import load_settings

    r = run_demo(load_settings(), tmp_path / "d")
    plan = r.plan_obj.to_dict()
    spans = [(datetime.fromisoformat(c["start"]), datetime.fromisoformat(c["end"])) for c in plan["commitments"]]
    titles = {c["title"] for c in plan["commitments"]}
    assert any(t.startswith("Gym") for t in titles) and any(t.startswith("Movie night") for t in titles)
    assert plan["recommendations"]
    for rec in plan["recommendations"]:
        s, e = datetime.fromisoformat(rec["start"]), datetime.fromisoformat(rec["end"])
        assert s < e
        if rec["kind"] != "bedtime":
            assert all(e <= cs or s >= ce for cs, ce in spans), rec
        assert rec["evidence"] and any(ch.isdigit() for ch in " ".join(rec["evidence"]))
        assert rec["expected_effect"] and all(k in ("vitality", "cognition", "progress", "serenity", "connection")
                                             for k in rec["expected_effect"])


def test_the_demo_writes_its_zone_into_the_demo_home(tmp_path):
    """After the demo, the demo home plans in the sample person's zone (not the machine's)."""
    from rhythm.data.make_sample import SAMPLE_TIMEZONE
    from rhythm.demo import prepare_demo_home
    from rhythm.settings import load_settings, user_zone

    home = tmp_path / "demo"
    prepare_demo_home(load_settings(home=tmp_path / "user", env={}, timezone="Etc/UTC"), home)
    again = load_settings(home=home, env={})  # a later `rhythm recommend` in the demo home
    assert SAMPLE_TIMEZONE != "Etc/UTC"
    assert again.timezone == SAMPLE_TIMEZONE
    assert str(user_zone(again)) == SAMPLE_TIMEZONE
    prepare_demo_home(load_settings(home=tmp_path / "user", env={}), home)  # a second run
    lines = (home / "config.toml").read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("timezone =")) == 1
