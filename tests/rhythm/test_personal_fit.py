"""`rhythm meters --fit` and the real plan with the person's fitted dynamics, end to end on
a generated person (lab/people/insight_person.py: wearables and a calendar, written through
the real storage writer and mapped by `rhythm map`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from lab.people import insight_person
from lab.people.insight_person import FIRST, LAST
from rhythm import jobs
from rhythm.personal import fit_report, personal_dynamics
from rhythm.settings import init_home, load_settings
from storage import open_db
from storage.writer import write_records


def _home(tmp_path_factory, name: str, days: int):
    home = tmp_path_factory.mktemp(name)
    settings = load_settings(home=home, env={}, timezone="Europe/Amsterdam")
    init_home(settings)
    with open_db(settings.database) as db:
        write_records(db, insight_person.records(days=days))
    last = FIRST + timedelta(days=days - 1)
    jobs.map_data(settings, now=datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
                  .replace(hour=12))
    return settings


@pytest.fixture(scope="module")
def person(tmp_path_factory):
    return _home(tmp_path_factory, "fit_home", insight_person.DAYS)


def test_meters_fit_prints_the_effects_and_the_held_out_errors(person, run_cli):
    code, out, err = run_cli("--db", person.database, "meters", "--fit")
    assert code == 0, err
    assert "slot-to-slot steps" in out and "EXERCISE" in out and "SOCIALIZE" in out
    assert "±" in out
    for label in ("no change", "simulator's dynamics", "your fitted dynamics"):
        assert label in out


def test_meters_fit_json_and_the_fit_beats_both_predictors(person, run_cli):
    code, out, err = run_cli("--db", person.database, "meters", "--fit", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["fitted"] and rep["transitions"] > 300
    assert rep["last_day"] >= LAST.isoformat()  # the last night ends the morning after
    names = {e["action"] for e in rep["effects"]}
    assert {"EXERCISE", "SLEEP", "DEEP_WORK"} <= names  # evening runs, nights, focus blocks
    ex = next(e for e in rep["effects"] if e["action"] == "EXERCISE")
    assert ex["steps"] > 20 and ex["mornings_after"] > 20
    assert all(v >= 0 for v in ex["sd"].values())
    mae = rep["heldout"]["mae"]
    assert rep["heldout"]["test_steps"] > 50
    assert mae["fitted"] < mae["no_change"] and mae["fitted"] < mae["simulator"], mae


def test_the_planted_run_shows_in_the_fit(person):
    """Evening runs lower the next morning's stress (serenity up) in the generated data."""
    with open_db(person.database, read_only=True) as db:
        rep = fit_report(db)
    ex = next(e for e in rep["effects"] if e["action"] == "EXERCISE")
    assert ex["effect"]["serenity"] > ex["table"]["serenity"]


def test_the_plan_is_fitted_on_the_days_before(person):
    with open_db(person.database, read_only=True) as db:
        early = personal_dynamics(db, FIRST + timedelta(days=2))
        late = personal_dynamics(db, LAST)
    assert not early.fitted and early.n_transitions < 14
    assert late.fitted and late.n_transitions > 300


def test_too_little_history_says_so_in_one_line(tmp_path_factory, run_cli):
    settings = _home(tmp_path_factory, "fit_short", 2)
    code, out, err = run_cli("--db", settings.database, "meters", "--fit")
    assert code == 0, err
    assert out.strip().startswith("too little history to fit your dynamics")
    assert len(out.strip().splitlines()) <= 3  # one sentence, wrapped by the terminal at most
    code, out, _ = run_cli("--db", settings.database, "meters", "--fit", "--json")
    assert json.loads(out)["fitted"] is False
