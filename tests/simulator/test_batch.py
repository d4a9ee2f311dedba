"""BatchEnv: same seeds, same trajectories as RhythmEnv (to 1e-9), and its own contract."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import spec
from simulator.batch import BatchEnv, unbatch_obs
from simulator.env import RhythmEnv
from simulator.evaluate import rollout
from simulator.profiles import sample_profile

TOL = 1e-9


def _parity(seeds, condition, profiles, rng):
    n = len(seeds)
    actions = rng.integers(0, 10, (28, n))
    beliefs = rng.random((28, n, 3))
    beliefs[rng.random((28, n)) < 0.7] = np.nan  # most steps emit no belief
    benv = BatchEnv(seeds, condition, profiles)
    bobs, binfo = benv.reset()
    env = RhythmEnv(condition=condition)
    singles = []
    for i, seed in enumerate(seeds):
        options = None if profiles is None else {"profile": profiles[i]}
        obs, info = env.reset(seed=int(seed), options=options)
        if profiles is None:
            np.testing.assert_array_equal(
                binfo["profiles"][i], sample_profile(seed, condition).to_array()
            )
        np.testing.assert_allclose(binfo["belief_truth"][i], info["belief_truth"], atol=TOL)
        steps = [obs]
        for t in range(28):
            b = beliefs[t, i]
            act = (
                int(actions[t, i])
                if np.isnan(b).any()
                else {"action": int(actions[t, i]), "belief": b}
            )
            obs, r, term, trunc, info = env.step(act)
            steps.append((obs, r, term, info))
        singles.append(steps)
    for i in range(n):
        first = unbatch_obs(bobs, i)
        for k in first:
            np.testing.assert_allclose(first[k], singles[i][0][k], atol=TOL)
    for t in range(28):
        bobs, br, bterm, btrunc, binfo = benv.step(actions[t], beliefs[t])
        assert not btrunc.any()
        for i in range(n):
            obs, r, term, info = singles[i][t + 1]
            u = unbatch_obs(bobs, i)
            assert set(u) == set(obs)
            for k in obs:
                np.testing.assert_allclose(u[k], obs[k], atol=TOL, err_msg=k)
            assert abs(br[i] - r) <= TOL
            assert bool(bterm[i]) == term
            for k, v in info["reward_breakdown"].items():
                assert abs(binfo["reward_breakdown"][k][i] - v) <= TOL
    grade = binfo["grade"]
    for i in range(n):
        info = singles[i][-1][3]
        for k in (
            "final_score",
            "crash_free",
            "progress",
            "connection",
            "adaptation",
            "efficiency",
            "belief_accuracy",
            "crashes",
            "mean_reward",
        ):
            assert abs(grade[k][i] - info[k]) <= TOL, k
        if info["belief_mae"] is None:
            assert np.isnan(grade["belief_mae"][i])
        else:
            assert abs(grade["belief_mae"][i] - info["belief_mae"]) <= TOL


@pytest.mark.parametrize("condition", ["in-dist", "ood"])
def test_parity_with_rhythm_env(condition):
    seeds = [0, 1, 2, 7, 99, 10_000, 123_456_789, 2**31 + 5]
    _parity(seeds, condition, None, np.random.default_rng(11))


def test_parity_with_named_profiles():
    names = list(spec.NAMED_PROFILES) * 2
    _parity(list(range(6)), "in-dist", names, np.random.default_rng(12))


def test_policies_give_identical_grades_on_both_engines():
    for name in ("random", "heuristic", "greedy-true", "greedy-neutral", "greedy-true-belief"):
        for cond in ("in-dist", "discrete"):
            a = rollout(name, cond, episodes=4, engine="batch")
            b = rollout(name, cond, episodes=4, engine="env")
            for k in a:
                np.testing.assert_allclose(a[k], b[k], atol=TOL, err_msg=f"{name} {cond} {k}")


def test_step_contract():
    env = BatchEnv([1, 2, 3])
    with pytest.raises(RuntimeError):
        env.step([0, 0, 0])
    env.reset()
    with pytest.raises(ValueError):
        env.step([0, 0])
    with pytest.raises(ValueError):
        env.step([0, 10, 0])
    for _ in range(28):
        obs, r, term, trunc, info = env.step([3, 3, 3])
    assert term.all() and "grade" in info
    assert obs["t"].tolist() == [28] * 3
    with pytest.raises(RuntimeError):
        env.step([0, 0, 0])
    obs, _ = env.reset(seeds=[4, 5])
    assert env.n == 2 and obs["meters"].shape == (2, 5)


def test_profiles_argument_forms():
    from simulator.profiles import named_profile

    p = named_profile("workaholic_stoic")
    a = BatchEnv([0, 1], profiles=p)
    a.reset()
    b = BatchEnv([0, 1], profiles=["workaholic_stoic", "workaholic_stoic"])
    b.reset()
    c = BatchEnv([0, 1], profiles=np.stack([p.to_array()] * 2))
    c.reset()
    np.testing.assert_array_equal(a.profiles, b.profiles)
    np.testing.assert_array_equal(a.profiles, c.profiles)
    with pytest.raises(ValueError):
        BatchEnv([0, 1], profiles=["workaholic_stoic"]).reset()
