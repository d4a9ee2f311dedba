"""The joint filter of modifiers and meters for noisy readings, against the exact
linear-Gaussian posterior of the whole week (solved as one least-squares problem)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.belief import THETA_MID, THETA_SD_INDIST, BeliefState, linear_design
from agent.meter_filter import MeterFilter
from simulator import spec
from simulator.feedback_eval import play_episodes

NON_WORK = [spec.SLEEP, spec.EXERCISE, spec.MEDITATE, spec.FAMILY_TIME, spec.SOCIALIZE, spec.ME_TIME]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_filter_equals_the_exact_posterior_of_a_linear_week(seed):
    # Actions the vitality factor does not touch, serenity far above any spiral threshold and
    # meters far from the bounds: the week is exactly linear-Gaussian in (theta, m0, noises).
    rng = np.random.default_rng(seed)
    steps, r, q, v0 = 5, 0.08**2, 0.012**2, 0.01**2
    prior_cov = np.diag((1.3 * THETA_SD_INDIST) ** 2)
    m0 = np.array([0.45, 0.45, 0.45, 0.55, 0.45])
    slots = np.arange(steps) % 4
    while True:  # a week that stays well inside the bounds (for the truth and the filter)
        theta = THETA_MID + 1.3 * THETA_SD_INDIST * rng.standard_normal(9)
        actions = rng.choice(NON_WORK, steps)
        design = [linear_design(m0, s, a, 0) for s, a in zip(slots, actions, strict=True)]
        m = m0 + np.sqrt(v0) * rng.standard_normal(5)
        deltas, ms = [], [m.copy()]
        for (f0, j) in design:
            d = f0 + j @ theta + np.sqrt(q) * rng.standard_normal(5)
            deltas.append(d + np.sqrt(r) * rng.standard_normal(5))
            m = m + d
            ms.append(m.copy())
        lo, hi = np.min(ms), np.max(ms)
        if lo > 0.2 and hi < 0.8 and min(x[3] for x in ms) > 0.45:
            break
    readings = [x + np.sqrt(r) * rng.standard_normal(5) for x in ms]
    for arr in (readings, deltas):
        for x in arr:
            x[rng.random(5) < 0.3] = np.nan

    f = MeterFilter(THETA_MID, prior_cov, np.array([0.5]), lambda *a: linear_design(m0, *a[1:]), 0.08,
                    initial_meters=m0, initial_var=v0)
    f.observe_meters(readings[0])
    for i in range(steps):
        f.step(int(slots[i]), int(actions[i]), 0, deltas[i])
        f.observe_meters(readings[i + 1])
    means, cov = f.theta()

    # Exact: unknowns u = [theta (9), m0 (5), w_0..w_{T-1} (5 each)], Gaussian prior, linear readings.
    n = 9 + 5 + 5 * steps
    prior_mean = np.concatenate([THETA_MID, m0, np.zeros(5 * steps)])
    prior_var = np.concatenate([np.diag(prior_cov), np.full(5, v0), np.full(5 * steps, q)])
    rows, ys = [], []

    def meter_row(t, k):
        row = np.zeros(n)
        row[9 + k] = 1.0
        offset = 0.0
        for s in range(t):
            f0, j = design[s]
            row[:9] += j[k]
            row[14 + 5 * s + k] = 1.0
            offset += f0[k]
        return row, offset

    for t, y in enumerate(readings):
        for k in np.flatnonzero(np.isfinite(y)):
            row, off = meter_row(t, k)
            rows.append(row)
            ys.append(y[k] - off)
    for s, y in enumerate(deltas):
        f0, j = design[s]
        for k in np.flatnonzero(np.isfinite(y)):
            row = np.zeros(n)
            row[:9] = j[k]
            row[14 + 5 * s + k] = 1.0
            rows.append(row)
            ys.append(y[k] - f0[k])
    a, y = np.array(rows), np.array(ys)
    prec = np.diag(1.0 / prior_var) + a.T @ a / r
    post_cov = np.linalg.inv(prec)
    post_mean = post_cov @ (prior_mean / prior_var + a.T @ y / r)
    np.testing.assert_allclose(means[0], post_mean[:9], atol=1e-8)
    np.testing.assert_allclose(cov, post_cov[:9, :9], atol=1e-10)


def test_noisy_belief_reads_the_levels_and_the_week_ends_closer_to_the_truth():
    g = play_episodes(BeliefOnly(), [3, 4, 5], feedback=False, observe="noisy")
    assert g["mae_curve"][:, 28].mean() < g["mae_curve"][:, 0].mean() - 0.04


class BeliefOnly:
    """The heuristic's actions with a belief fed noisy readings (no answers)."""

    def __init__(self):
        self.b = BeliefState(noise_sd=spec.NOISE_SD, meter_obs_sd=0.08)

    def reset(self, seed):
        self.b.reset(seed)

    def act(self, obs):
        self.b.update_from_observation(obs)
        m = self.b.meters_estimate()
        from simulator.policies import heuristic_action

        return heuristic_action(m, int(obs["slot"])), self.b.belief()

    def final_belief(self, obs):
        self.b.update_from_observation(obs)
        return self.b.belief()
