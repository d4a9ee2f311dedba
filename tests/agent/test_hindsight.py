"""Targets from answers with hindsight (agent/hindsight.py), against the answer model by hand."""

from __future__ import annotations

import numpy as np
import pytest

from agent.belief import BeliefState
from agent.hindsight import Answered, action_values, answer_targets
from simulator import spec
from simulator.dynamics import compact_params
from simulator.feedback import TAU, utilities_batch
from simulator.policies import heuristic_action
from simulator.profiles import sample_profile


def _by_hand(profile_row: np.ndarray, meters, slot: int) -> np.ndarray:
    """Expected one-step value of each recommendation for one profile, action by action."""
    u = utilities_batch(compact_params(profile_row[None, :]), np.asarray(meters)[None, :], slot)[0]
    med = float(np.median(u))
    habit = heuristic_action(meters, slot)
    out = []
    for a in range(spec.N_ACTIONS):
        p = 1.0 / (1.0 + np.exp(-(u[a] - med) / TAU))
        out.append(p * u[a] + (1 - p) * u[habit])
    return np.array(out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_action_values_are_the_answer_models_expected_value(seed):
    rng = np.random.default_rng(seed)
    params = np.stack([sample_profile(seed * 10 + k, "in-dist").to_array() for k in range(3)])
    meters, slot = rng.uniform(0.2, 0.9, 5), int(rng.integers(4))
    want = np.mean([_by_hand(p, meters, slot) for p in params], axis=0)
    np.testing.assert_allclose(action_values(params, meters, slot), want, rtol=1e-10, atol=1e-12)


def test_missing_meters_are_taken_at_the_usual_level():
    params = sample_profile(5, "in-dist").to_array()[None, :]
    m = np.array([0.6, np.nan, 0.4, np.nan, 0.7])
    np.testing.assert_allclose(action_values(params, m, 1), action_values(params, np.nan_to_num(m, nan=0.5), 1))


def test_accepted_keeps_its_action_and_ignored_gets_the_best_other_one():
    bs = BeliefState()
    m = np.array([0.55, 0.6, 0.45, 0.5, 0.4])
    answered = [Answered(m, 0, a, a % 2 == 0) for a in range(spec.N_ACTIONS)]
    targets = answer_targets(bs, answered)
    values = action_values(bs.sample_params(64), m, 0)
    for a, t in zip(answered, targets, strict=True):
        if a.accepted:
            assert t.action == a.action and not t.changed and t.value_gain == 0.0
        else:
            assert t.action != a.action and t.changed
            others = np.delete(np.arange(spec.N_ACTIONS), a.action)
            assert t.action == others[np.argmax(values[others])]
            assert t.value_gain == pytest.approx(values[t.action] - values[a.action])
        assert all(0.0 <= b <= 1.0 for b in t.belief)


def test_the_targets_follow_what_the_answers_taught_the_belief():
    """A person who turns down evening SOCIALIZE and takes up evening ME_TIME: with hindsight
    the belief leans less social, and an ignored SOCIALIZE no longer points to socialising."""
    m = [0.6, 0.6, 0.5, 0.55, 0.5]
    bs = BeliefState(min_ess=100)
    prior_social = bs.belief()[0]
    for _ in range(10):
        bs.observe_answer(m, 2, spec.ACTIONS.index("SOCIALIZE"), False)
        bs.observe_answer(m, 2, spec.ACTIONS.index("ME_TIME"), True)
    assert bs.belief()[0] < prior_social - 0.05
    (t,) = answer_targets(bs, [Answered(m, 2, spec.ACTIONS.index("SOCIALIZE"), False)])
    assert spec.ACTIONS[t.action] not in ("SOCIALIZE", "FAMILY_TIME")


def test_out_of_range_answers_are_refused():
    with pytest.raises(ValueError, match="out of range"):
        answer_targets(BeliefState(), [Answered([0.5] * 5, 4, 0, True)])
    with pytest.raises(ValueError, match="out of range"):
        answer_targets(BeliefState(), [Answered([0.5] * 5, 0, 10, True)])
