"""One truth (issue 36): every evidence sentence of a stored plan is recomputed from the
database (lab.plan_check: its own SQL over the stored sleeps, samples, events, slot actions
and the stored belief) and agrees; no block over a commitment, another block or the person's
sleep; a fitted effect the insights contradict is neither used nor shown. Generated people
(lab.people.shift_people) through the product's own path: storage writer, `rhythm map`,
`rhythm recommend`."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from lab.people.shift_people import shift_person
from lab.plan_check import check_day, stored_blocks


def _home(tmp_path, person):
    from rhythm import jobs
    from rhythm.settings import init_home, load_settings
    from storage import open_db
    from storage.writer import write_records

    s = load_settings(home=tmp_path / person.name, env={}, timezone=person.zone, agent_backend="bayes")
    init_home(s)
    with open_db(s.database) as db:
        write_records(db, list(person.records))
    jobs.map_data(s, now=datetime.combine(person.last, time(23), ZoneInfo(person.zone)))
    return s


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "kind", "lang"), [(2, "night_nurse", "es"), (0, "office", "de"), (1, "rotating", "fr")])
def test_every_evidence_number_is_recomputed_from_the_database(tmp_path, seed, kind, lang):
    from rhythm import jobs
    from rhythm.insights import find_insights
    from storage import open_db

    p = shift_person(seed, kind=kind, lang=lang, plan_days=4)
    tz = ZoneInfo(p.zone)
    s = _home(tmp_path, p)
    checked = 0
    for day in p.plan_days:
        now = datetime.combine(day, time(6), tz)
        jobs.recommend(s, day, now=now)
        findings = find_insights(s, until=day - timedelta(days=1))  # what `rhythm insights` showed
        with open_db(s.database, read_only=True) as db:
            c = check_day(db, tz, day, now, sleeps=p.sleeps, findings=findings)
            blocks = stored_blocks(db, day)
        assert c.blocks > 0
        assert c.overlaps == [] and c.asleep == [] and c.missing_sleep == []
        assert c.wrong == [], c.wrong
        assert c.unchecked == [], c.unchecked
        checked += c.evidence
        # the rationale's reasons are the evidence checked above, and its expected effect the
        # one stored with the block (the model's), never another number
        for b in blocks:
            if b["evidence"]:
                assert "; ".join(b["evidence"][:2]) in b["rationale"]
            effect = json.loads(b["effect"])
            for m, v in effect.items():
                if f"{m} {v:+.2f}" not in b["rationale"]:
                    assert sorted(effect, key=lambda k: -abs(effect[k])).index(m) >= 3
    assert checked >= 10


@pytest.mark.slow
def test_the_night_nurses_shift_days_read_as_shift_days(tmp_path):
    """Spanish titles, New York across the DST change: the shift is work, the day sleep after
    it is a SLEEP block, a shift night has no bedtime."""
    from rhythm import jobs
    from storage import open_db

    p = shift_person(8, kind="night_nurse", lang="es", plan_days=10)
    tz = ZoneInfo(p.zone)
    s = _home(tmp_path, p)
    with open_db(s.database, read_only=True) as db:
        labels = dict(db.con.execute("SELECT title, any_value(action) FROM events GROUP BY 1").fetchall())
    assert labels["Turno de noche"] == "ADMIN_WORK" and labels.get("Guardia", "ADMIN_WORK") == "ADMIN_WORK"
    after_night = [d for d in p.plan_days if p.shifts.get(d - timedelta(days=1)) and
                   p.shifts[d - timedelta(days=1)].kind == "night"]
    assert after_night
    for day in after_night:
        plan = jobs.recommend(s, day, now=datetime.combine(day, time(6), tz))
        kinds = [sl.kind for sl in plan.slots]
        assert "day_sleep" in kinds
        tonight = p.shifts.get(day)
        if tonight is not None and tonight.kind == "night":
            assert "bedtime" not in kinds and "early_night" not in kinds


@pytest.mark.slow
def test_a_fitted_effect_rhythm_insights_contradicts_is_not_shown(tmp_path):
    """A generated night nurse whose fitted dynamics say sleep lowers her vitality (her day
    sleeps after 12-hour shifts) while the insights on the same days find a night's sleep
    raises it (at q <= 0.1 among the sleep factors; `rhythm insights` over all her days too):
    the plan neither shows nor uses that entry."""
    from common.records import ACTIONS, METERS
    from rhythm import jobs
    from rhythm.insights import contradicted_effects, find_insights
    from rhythm.personal import personal_dynamics
    from storage import open_db

    p = shift_person(14, plan_days=14)
    tz = ZoneInfo(p.zone)
    s = _home(tmp_path, p)
    day = date(2025, 3, 24)
    assert day in p.plan_days
    with open_db(s.database, read_only=True) as db:
        dyn = personal_dynamics(db, day)
        deps = [{**d, "action": ACTIONS[d["action"]], "meter": METERS[d["meter"]]} for d in dyn.departures()]
        vetoed = contradicted_effects(db, tz, deps, day)
    fitted = {(d["action"], d["meter"]): d["fitted"] for d in deps}
    assert ("SLEEP", "vitality") in vetoed and fitted[("SLEEP", "vitality")] < 0
    shown = find_insights(s)  # all her stored days: a night's sleep raises her vitality
    assert any(f["factor"].startswith("action:SLEEP") and f["meter"].startswith("vitality") and f["effect"] > 0
               for f in shown)
    plan = jobs.recommend(s, day, now=datetime.combine(day, time(6), tz))
    for sl in plan.slots:
        assert not any(e.startswith("your data: SLEEP leaves your vitality") for e in sl.evidence)
