"""Personal dynamics (agent.personal): steps from stored slots, the fit, held-out prediction,
and the real-day planner using a person's fitted dynamics. Generated histories only
(lab/people/meter_histories.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pytest

from agent.day import DayPlanner, with_model_pick
from agent.personal import (
    STRUCTURE,
    SlotMeters,
    fit_personal,
    heldout_errors,
    prediction_errors,
    transitions,
)
from lab.people.meter_histories import EX, PEOPLE, SL, V, history
from simulator import spec
from tests.agent.test_day import WED, inputs

D0 = date(2024, 3, 4)


def _slot(day: int, slot: int, v: float | None, action: int | None = None) -> SlotMeters:
    return SlotMeters(D0 + timedelta(days=day), slot, (v, None, None, 0.5, None), action)


def test_steps_join_consecutive_slots_across_the_night_and_break_at_gaps():
    slots = [_slot(0, 1, 0.5, spec.DEEP_WORK), _slot(0, 2, 0.55, EX), _slot(0, 3, 0.5, SL),
             _slot(1, 0, 0.7), _slot(1, 1, 0.68), _slot(2, 0, 0.4)]  # (1, 2) .. (1, 3) missing
    steps = transitions(slots)
    assert [(s.day - D0).days * 4 + s.slot for s in steps] == [2, 3, 4, 5]
    morning = steps[2]
    assert morning.slot == 0 and morning.before[V] == 0.5 and morning.after[V] == 0.7
    assert sorted(morning.carried) == sorted([spec.DEEP_WORK, EX, SL])  # yesterday's afternoon, evening, night
    assert steps[0].action == EX and steps[1].action == SL and steps[3].action is None
    assert np.isnan(steps[0].before[1])  # missing stays missing


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_planted_overnight_effect_is_recovered(seed):
    for name, planted in (("restores", +0.08), ("exercise-drains", -0.08)):
        fit = fit_personal(transitions(history(PEOPLE[name], 240, seed)))
        dep, sd = fit.departure()
        assert fit.fitted and fit.n_carry[EX] > 50
        # the right sign, within three posterior sds of the planted size (plus the
        # shrinkage the prior may leave)
        assert np.sign(dep[EX, V]) == np.sign(planted), (name, dep[EX, V])
        assert abs(dep[EX, V] - planted) < 3 * sd[EX, V] + 0.01, (name, dep[EX, V], sd[EX, V])
        assert fit.supported()[EX, V]
        # the planner's residual points the same way
        assert np.sign(fit.plan_residual()[EX, V]) == np.sign(planted)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_no_effect_no_departure(seed):
    fit = fit_personal(transitions(history(PEOPLE["no-effects"], 240, seed)))
    assert fit.fitted
    assert not fit.supported()[EX].any()
    assert len(fit.departures()) <= 1  # a hundred entries: at most a rare chance finding


@pytest.mark.parametrize("name", list(PEOPLE))
@pytest.mark.parametrize("seed", [0, 1])
def test_held_out_the_fit_beats_no_change_and_the_simulator(name, seed):
    held = heldout_errors(history(PEOPLE[name], 120, seed))
    err = {k: v for k, (v, _n) in held.errors.items()}
    assert held.test_steps >= 100 and held.errors["fitted"][1] > 200
    assert err["fitted"] < err["no_change"] < err["simulator"], err


def test_too_short_a_history_is_the_prior():
    empty = fit_personal([])
    short = fit_personal(transitions(history(PEOPLE["restores"], 3, 0)))
    for fit in (empty, short):
        assert not fit.fitted and fit.departures() == []
        assert not fit.plan_residual().any()
        m = np.array([0.4, 0.6, 0.5, 0.5, 0.5])
        np.testing.assert_allclose(fit.predict(m, 2, None), 0.0)  # no change
        np.testing.assert_allclose(fit.predict(m, 2, EX), fit.kappa * STRUCTURE[2, EX])
    assert short.n_transitions == 11
    held = heldout_errors(history(PEOPLE["restores"], 1, 0))
    assert held.test_steps == 0 and math.isnan(held.errors["fitted"][0])


def test_missing_and_non_finite_meters_are_skipped():
    rng = np.random.default_rng(3)
    slots = []
    for s in history(PEOPLE["calendar"], 90, 1):
        m = [None if rng.random() < 0.3 else v for v in s.meters]
        if rng.random() < 0.05:
            m[0] = float("nan")
        slots.append(SlotMeters(s.day, s.slot, tuple(m), s.action))
    fit = fit_personal(transitions(slots))
    assert fit.fitted
    for arr in (fit.intercept, fit.reversion, fit.residual, fit.carry, fit.residual_sd, fit.sigma):
        assert np.isfinite(arr).all()
    d = fit.predict([np.nan, 0.5, 0.6, np.nan, 0.5], 0, None, (EX,))
    assert d[0] == 0.0 and d[3] == 0.0 and np.isfinite(d).all()
    errors = prediction_errors(transitions(slots), fit)
    assert all(np.isfinite(v) and n > 0 for v, n in errors.values())
    # the same history gives the same fit (pure)
    again = fit_personal(transitions(slots))
    np.testing.assert_array_equal(again.carry, fit.carry)


# she has exercised lately (three evenings: no habit yet), so exercise is no try for her, and
# today is no poor-recovery day (her HRV at her usual: test_day's short night with a low HRV
# would rule a workout out whatever her dynamics say)
DONE = [(WED - timedelta(days=k), "evening", "EXERCISE") for k in (2, 5, 9)]


def _inputs(**over):
    base = inputs()
    facts = replace(base.facts, hrv_ms={**base.facts.hrv_ms, WED: 53.0})
    return inputs(recent_actions=DONE, facts=facts, **over)


def _planned(dynamics=None, **over):
    return DayPlanner(_inputs(dynamics=dynamics, **over)).plan()


@pytest.mark.slow
def test_the_plan_drops_exercise_for_a_person_whose_exercise_drains():
    base = _planned()
    assert "EXERCISE" in [b.action for b in base.blocks]  # the table's plan for this day
    drains = fit_personal(transitions(history(PEOPLE["exercise-drains"], 240, 0)))
    dp = _planned(drains)
    assert "EXERCISE" not in [b.action for b in dp.blocks]
    # ... nor in today's look-ahead (tomorrow's slots, planned for variety, may try it)
    assert "EXERCISE" not in [a for d, _s, a in dp.horizon if d == WED.isoformat()]
    # offered for the morning anyway (as a local model might), it is refused as clearly
    # worse, or its expected effect on vitality is below the table's plan
    planner = DayPlanner(_inputs(dynamics=drains))
    dp = planner.plan()
    ok, note = with_model_pick(planner, dp, "morning", "EXERCISE", "test-model")
    base_ex = next(b for b in base.blocks if b.action == "EXERCISE")
    if ok:
        ex = next(b for b in dp.blocks if b.slot == "morning")
        assert ex.expected_effect["vitality"] < base_ex.expected_effect["vitality"]
    else:
        assert "clearly worse" in note
    # a person whose exercise restores more than the table: more of it, and the plan says why
    restores = fit_personal(transitions(history(PEOPLE["restores"], 240, 0)))
    pick = _planned(restores)
    ex = [b for b in pick.blocks if b.action == "EXERCISE"]
    assert ex and ex[0].expected_effect["vitality"] > next(
        b for b in base.blocks if b.action == "EXERCISE").expected_effect["vitality"]
    assert any(e.startswith("your data: EXERCISE leaves your vitality +") for e in ex[0].evidence)
    assert ex[0].rationale.count("your data") == 1


def test_the_plan_is_stable_without_evidence():
    base = _planned()
    for fit in (fit_personal([]), fit_personal(transitions(history(PEOPLE["no-effects"], 240, 0)))):
        dp = _planned(fit)
        assert [(b.slot, b.action, b.expected_effect) for b in dp.blocks] == \
            [(b.slot, b.action, b.expected_effect) for b in base.blocks]


@pytest.mark.slow
def test_a_fitted_effect_the_insights_contradict_is_neither_used_nor_shown():
    """Issue 36: 'your data: EXERCISE leaves your vitality +...' next to insights saying
    exercise lowers vitality is no reason; the plan drops that entry of the fit (its model
    and its evidence) and keeps the rest."""
    restores = fit_personal(transitions(history(PEOPLE["restores"], 240, 0)))
    shown = _planned(restores)
    ex = [b for b in shown.blocks if b.action == "EXERCISE"]
    assert ex and any(e.startswith("your data: EXERCISE leaves your vitality") for e in ex[0].evidence)
    vetoed = _planned(restores, contradicted=frozenset({("EXERCISE", "vitality")}))
    for b in vetoed.blocks:
        assert not any(e.startswith("your data: EXERCISE leaves your vitality") for e in b.evidence)
    # the model the plan uses is the table's for that entry: the same as without the fit there
    base = _planned()
    table_ex = [b for b in base.blocks if b.action == "EXERCISE"]
    vetoed_ex = [b for b in vetoed.blocks if b.action == "EXERCISE"]
    if table_ex and vetoed_ex:
        assert vetoed_ex[0].expected_effect["vitality"] < ex[0].expected_effect["vitality"]
