"""fit_effects: per-action effects from a history, with the simulator's table as the prior."""

from __future__ import annotations

import numpy as np
import pytest

from agent.effects import EffectPrior, fit_effects, gaussian_posterior, transition_rows
from simulator import spec
from simulator.dynamics import expected_delta
from simulator.env import RhythmEnv
from simulator.profiles import Profile, sample_profile


def _history(seed: int, world: str = "nominal", weeks: int = 3, profile=None):
    """Transitions (meters before, slot, action, meters after, event) of a person taking
    random actions for a few weeks."""
    env = RhythmEnv(world=world, profile=profile or Profile.neutral())
    rng = np.random.default_rng(seed)
    out = []
    for w in range(weeks):
        obs, _ = env.reset(seed=seed * 100 + w)
        for _ in range(spec.EPISODE_STEPS):
            a = int(rng.integers(spec.N_ACTIONS))
            before = obs["meters"].copy()
            obs, *_ = env.step(a)
            out.append((before, (obs["t"] - 1) % 4, a, obs["meters"].copy(), obs["active_event"]))
    return out


def test_gaussian_posterior_evidence_matches_the_marginal_density():
    rng = np.random.default_rng(0)
    n, d, g = 7, 3, 2
    x = rng.standard_normal((n, d))
    r = rng.standard_normal((g, n))
    mu0 = rng.standard_normal(d)
    p0 = np.diag(rng.uniform(0.5, 2.0, d))
    sigma = 0.7
    fit = gaussian_posterior(x.T @ x, r @ x, (r * r).sum(axis=1), n, mu0, p0, sigma)
    cov_y = x @ np.linalg.inv(p0) @ x.T + sigma**2 * np.eye(n)
    for k in range(g):
        e = r[k] - x @ mu0
        _, logdet = np.linalg.slogdet(2.0 * np.pi * cov_y)
        want = -0.5 * (logdet + e @ np.linalg.solve(cov_y, e))
        assert fit["log_ev"][k] == pytest.approx(want, abs=1e-9)
        # posterior mean = the regularised least-squares solution
        sol = np.linalg.solve(p0 + x.T @ x / sigma**2, p0 @ mu0 + x.T @ r[k] / sigma**2)
        np.testing.assert_allclose(fit["means"][k], sol, atol=1e-10)
    np.testing.assert_allclose(fit["cov"], np.linalg.inv(fit["prec"]), atol=1e-10)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_simulator_itself_keeps_the_table(seed):
    fit = fit_effects(_history(seed))
    assert fit.tau == min(EffectPrior().tau_grid)
    assert fit.sigma == spec.NOISE_SD
    assert np.abs(fit.residual).max() < 0.005
    np.testing.assert_allclose(fit.effect, np.array(spec.EFFECT), atol=0.005)
    assert fit.n_obs.sum() == 3 * spec.EPISODE_STEPS


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_a_person_whose_exercise_drains_is_found(seed):
    fit = fit_effects(_history(seed, "exercise-drains"))
    assert fit.tau > min(EffectPrior().tau_grid)
    ex_v = fit.effect[spec.EXERCISE, spec.V]
    assert ex_v < -0.05  # the table says +0.08; this person loses about 0.10
    assert abs(ex_v - (-0.10)) < 3 * fit.residual_sd[spec.EXERCISE, spec.V] + 0.01
    assert fit.multipliers()[spec.EXERCISE, spec.V] < 0
    others = np.delete(fit.residual.ravel(), spec.EXERCISE * spec.N_METERS + spec.V)
    assert np.abs(others).max() < 0.03


def test_effects_off_by_tens_of_percent_are_recovered_for_the_actions_seen_often():
    # one person of the "effects" world (episode seed 700) replayed for four weeks of
    # random actions: the same multipliers every week
    env = RhythmEnv(world="effects", profile=Profile.neutral())
    rng = np.random.default_rng(0)
    hist = []
    for _ in range(4):
        obs, _ = env.reset(seed=700)
        for _ in range(spec.EPISODE_STEPS):
            a = int(rng.integers(spec.N_ACTIONS))
            before = obs["meters"].copy()
            obs, *_ = env.step(a)
            hist.append((before, (obs["t"] - 1) % 4, a, obs["meters"].copy(), obs["active_event"]))
    fit = fit_effects(hist)
    world = env._week[5].const
    err_fit, err_table = [], []
    for a, k in [
        (spec.SLEEP, spec.V),
        (spec.SOCIALIZE, spec.N),
        (spec.FAMILY_TIME, spec.N),
        (spec.MEDITATE, spec.S),
        (spec.EXERCISE, spec.V),
        (spec.ME_TIME, spec.S),
    ]:
        table = np.array(
            [expected_delta(np.full(5, 0.6), t % 4, a, Profile.neutral())[k] for t in range(28)]
        )
        err_table.append(np.abs(world[:, a, k] - table).mean())
        err_fit.append(np.abs(world[:, a, k] - (table + fit.residual[a, k])).mean())
    assert fit.tau > min(EffectPrior().tau_grid)
    assert np.mean(err_fit) < 0.5 * np.mean(err_table)


def test_a_few_surprising_steps_move_the_robust_fit_less():
    hist = _history(8, weeks=2)
    bad = []
    for i, (m0, slot, a, m1, e) in enumerate(hist):
        if a == spec.SLEEP and len(bad) < 2:
            m1 = m1.copy()
            m1[spec.V] = max(0.01, m1[spec.V] - 0.25)  # an unlogged bad night
            hist[i] = (m0, slot, a, m1, e)
            bad.append(i)
    assert len(bad) == 2
    robust = fit_effects(hist, EffectPrior(tail_dof=4.0))
    gauss = fit_effects(hist, EffectPrior(tail_dof=None))
    r, g = robust.residual[spec.SLEEP, spec.V], gauss.residual[spec.SLEEP, spec.V]
    assert abs(r) < abs(g)


def test_predict_is_the_prior_dynamics_plus_the_residual():
    fit = fit_effects(_history(9, "exercise-drains", weeks=2))
    m = np.array([0.5, 0.6, 0.4, 0.7, 0.5])
    for a in range(spec.N_ACTIONS):
        want = expected_delta(m, 2, a, Profile.neutral()) + fit.residual[a]
        np.testing.assert_allclose(fit.predict(m, 2, a), want, atol=1e-12)


def test_an_empty_or_unusable_history_is_the_prior():
    fit = fit_effects([])
    assert np.all(fit.residual == 0) and fit.n_obs.sum() == 0
    nan = np.full(5, np.nan)
    fit = fit_effects([(nan, 0, 3, nan), (np.full(5, 0.5), 1, 99, np.full(5, 0.6))])
    assert np.all(fit.residual == 0)
    np.testing.assert_allclose(fit.effect, np.array(spec.EFFECT))


def test_clipped_components_are_censored_and_the_event_is_used():
    prof = sample_profile(3)
    m0 = np.array([0.95, 0.5, 0.5, 0.5, 0.5])
    d = expected_delta(m0, 3, spec.SLEEP, prof, event=4)
    m1 = np.clip(m0 + d, 0.0, 1.0)
    acts, mets, res, _ = transition_rows([(m0, 3, spec.SLEEP, m1, 4)], prof)
    assert spec.V not in mets.tolist()  # V ended at 1.0
    assert np.abs(res).max() < 1e-12  # the event's effect is in the prior's prediction
