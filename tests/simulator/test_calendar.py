"""Calendar weeks (simulator.calendar): the drawn pattern, the forced action, the grade of the
week that happened, and evaluation in calendar weeks."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from simulator import spec
from simulator.calendar import (
    EVENING,
    NO_ACTION,
    WEEKEND,
    WORK_AFTERNOON,
    WORK_MORNING,
    CalendarWeek,
    draw_calendar,
)
from simulator.env import RhythmEnv
from simulator.evaluate import evaluate, rollout


def test_the_calendar_is_drawn_per_seed_from_a_working_week_pattern():
    cals = np.array([draw_calendar(s) for s in range(300)])
    assert (cals == np.array([draw_calendar(s) for s in range(300)])).all()
    fixed = cals != NO_ACTION
    assert not fixed[:, 3::4].any()  # nights are never booked
    for t in range(spec.EPISODE_STEPS):
        day, slot = divmod(t, 4)
        allowed = (
            set(WEEKEND) if day >= 5 else {0: set(WORK_MORNING), 1: set(WORK_AFTERNOON), 2: set(EVENING)}.get(slot, set())
        )
        assert set(cals[fixed[:, t], t].tolist()) <= allowed
    weekday = fixed[:, :20].reshape(-1, 5, 4)
    # working hours mostly booked, evenings and the weekend much less; weeks vary
    assert weekday[..., 1].mean() > 0.35 and weekday[..., 0].mean() > 0.3
    assert weekday[..., 2].mean() < 0.3 and fixed[:, 20:].mean() < 0.2
    per_week = fixed.sum(axis=1)
    assert per_week.min() < 4 and per_week.max() > 12


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_fixed_slots_force_the_action_and_the_grade_is_that_of_the_week_that_happened(seed):
    """Whatever is recommended, the person does the commitment; replaying the applied actions
    on a plain env gives the same week, bit for bit, and the same grade."""
    env = CalendarWeek(RhythmEnv())
    obs, info = env.reset(seed=seed)
    cal = info["calendar"]
    assert (obs["calendar"] == cal).all() and (cal != NO_ACTION).any()
    rng = np.random.default_rng(seed)
    applied, asked = [], []
    done = False
    while not done:
        a = int(rng.integers(0, spec.N_ACTIONS))
        belief = np.array([0.3, 0.6, 0.8])
        obs, _, done, _, info = env.step({"action": a, "belief": belief})
        asked.append(a)
        applied.append(int(obs["last_action"]))
    for t in range(spec.EPISODE_STEPS):
        assert applied[t] == (cal[t] if cal[t] != NO_ACTION else asked[t])
    assert info["overridden"] == [t for t in range(spec.EPISODE_STEPS) if cal[t] != NO_ACTION and cal[t] != asked[t]]
    plain = RhythmEnv()
    plain.reset(seed=seed)
    for a in applied:
        o, *_ = plain.step({"action": a, "belief": np.array([0.3, 0.6, 0.8])})
    np.testing.assert_array_equal(o["meters"], obs["meters"])
    assert plain.grade().to_dict() == env.grade().to_dict()
    assert env.grade().belief_mae is not None  # the belief of overridden steps still counts


def test_the_wrapped_env_passes_the_checker_and_refuses_feedback_mode():
    check_env(CalendarWeek(RhythmEnv()).unwrapped, skip_render_check=True)
    env = CalendarWeek(RhythmEnv())
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="feedback"):
        CalendarWeek(RhythmEnv(feedback=True))
    with pytest.raises(ValueError, match="feedback"):
        CalendarWeek(RhythmEnv(observe="noisy"))


def test_evaluation_in_calendar_weeks():
    g = rollout("heuristic", "in-dist", episodes=6, calendar=True)
    assert g["overridden"].shape == (6,) and g["overridden"].sum() > 0
    plain = rollout("heuristic", "in-dist", episodes=6)
    assert "overridden" not in plain
    assert not np.array_equal(g["final_score"], plain["final_score"])
    r = evaluate("heuristic", "in-dist", episodes=6, calendar=True)
    assert r.calendar and r.published is None and r.overridden_mean == pytest.approx(g["overridden"].mean())
    assert r.final_score == pytest.approx(g["final_score"].mean())
    assert evaluate("heuristic", "in-dist", episodes=6).published == 0.463
    with pytest.raises(ValueError, match="calendar"):
        rollout("heuristic", "in-dist", episodes=2, engine="batch", calendar=True)
    # combines with a misspecified world (on RhythmEnv)
    w = rollout("heuristic", "in-dist", episodes=2, calendar=True, world="kind")
    assert w["overridden"].shape == (2,)
