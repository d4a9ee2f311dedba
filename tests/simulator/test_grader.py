"""Section 8: the grader, component by component."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import spec
from simulator.grader import grade, grade_batch, rescore

A, Q, E = spec.GRADER_A, spec.GRADER_Q, spec.GRADER_E


def test_weights_sum_to_one_and_constants_are_frozen():
    assert sum(spec.GRADER_WEIGHTS.values()) == pytest.approx(1.0)
    assert (A, Q, E) == (0.5, 1.0, 0.7)


def test_components_by_hand():
    rewards = [0.1] * 14 + [0.4] * 14  # early 0.1, late 0.4, mean 0.25
    final = [0.5, 0.5, 0.8, 0.5, 0.6]
    g = grade(rewards, final, crashes=14, belief=[0.5, 0.5, 0.5], truth=[0.6, 0.3, 0.5])
    assert g.crash_free == pytest.approx(0.9)
    assert g.progress == 0.8 and g.connection == 0.6
    assert (g.early_reward, g.late_reward, g.mean_reward) == pytest.approx((0.1, 0.4, 0.25))
    adaptation = min(1, max(0, 0.5 + 0.3 / A)) * min(1, max(0, 0.4 / Q))
    assert g.adaptation == pytest.approx(adaptation)
    assert g.efficiency == pytest.approx(min(1.0, 0.25 / E))
    assert g.belief_mae == pytest.approx(0.1)
    assert g.belief_accuracy == pytest.approx(0.8)
    expected = (
        0.15 * 0.9 + 0.20 * 0.8 + 0.10 * 0.6 + 0.25 * adaptation + 0.10 * g.efficiency + 0.20 * 0.8
    )
    assert g.final_score == pytest.approx(expected)


def test_no_belief_scores_zero_and_bad_belief_is_floored():
    r = [0.0] * 28
    assert grade(r, [0.5] * 5, 0, None, [0.5] * 3).belief_accuracy == 0.0
    assert grade(r, [0.5] * 5, 0, None, [0.5] * 3).belief_mae is None
    assert grade(r, [0.5] * 5, 0, [1, 1, 1], [0, 0, 0.2]).belief_accuracy == 0.0
    assert grade(r, [0.5] * 5, 0, [0.2, 0.9, 0.1], [0.2, 0.9, 0.1]).belief_accuracy == 1.0


def test_negative_late_rewards_give_no_adaptation_and_no_efficiency():
    g = grade([0.5] * 14 + [-0.1] * 14, [0.5] * 5, 0, None, [0.5] * 3)
    assert g.adaptation == 0.0
    g = grade([-0.3] * 28, [0.5] * 5, 0, None, [0.5] * 3)
    assert g.efficiency == 0.0


@settings(max_examples=100, deadline=None)
@given(
    rewards=st.lists(st.floats(-13.5, 11.5), min_size=28, max_size=28),
    meters=st.lists(st.floats(0, 1), min_size=5, max_size=5),
    crashes=st.integers(0, 140),
    belief=st.none() | st.lists(st.floats(0, 1), min_size=3, max_size=3),
    truth=st.lists(st.floats(0, 1), min_size=3, max_size=3),
)
def test_final_score_in_unit_interval(rewards, meters, crashes, belief, truth):
    g = grade(rewards, meters, crashes, belief, truth)
    assert 0.0 <= g.final_score <= 1.0 + 1e-12


def test_batch_grade_and_rescore():
    rng = np.random.default_rng(0)
    n = 50
    r = rng.normal(0.1, 0.4, (n, 28))
    fm = rng.random((n, 5))
    cr = rng.integers(0, 20, n)
    b = rng.random((n, 3))
    b[::3] = np.nan
    truth = rng.random((n, 3))
    g = grade_batch(r, fm, cr, b, truth)
    for i in range(n):
        one = grade(r[i], fm[i], int(cr[i]), None if np.isnan(b[i]).any() else b[i], truth[i])
        assert one.final_score == pytest.approx(g["final_score"][i], abs=1e-12)
    np.testing.assert_allclose(rescore(g, A, Q, E), g["final_score"], atol=1e-12)
    other = grade_batch(r, fm, cr, b, truth, a=1.0, q=0.5, e=0.3)
    np.testing.assert_allclose(rescore(g, 1.0, 0.5, 0.3), other["final_score"], atol=1e-12)
