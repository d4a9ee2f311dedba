"""Misspecified worlds: the nominal world untouched, departures pure and seeded apart."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simulator  # noqa: F401  (registers Rhythm-v0)
from simulator import episode, spec, worlds
from simulator.dynamics import profile_lists
from simulator.env import RhythmEnv
from simulator.evaluate import evaluate, evaluate_worlds, rollout
from simulator.policies import heuristic_action
from simulator.profiles import belief_truth, sample_profile


def _play(env, seed, actions, options=None):
    obs, info = env.reset(seed=seed, options=options)
    out = [(obs, 0.0, info)]
    for a in actions:
        obs, r, _, _, info = env.step(int(a))
        out.append((obs, r, info))
    return out


def _same(a, b) -> bool:
    for (o1, r1, i1), (o2, r2, i2) in zip(a, b, strict=True):
        if r1 != r2 or _info_differs(i1, i2):
            return False
        if any(not np.array_equal(o1[k], o2[k]) for k in o1):
            return False
    return True


def _info_differs(i1, i2) -> bool:
    return any(
        not np.array_equal(np.asarray(i1[k], dtype=object), np.asarray(i2[k], dtype=object))
        for k in i1.keys() | i2.keys()
    )


@pytest.mark.parametrize("seed", [0, 1, 7, 123, 10007])
def test_nominal_world_is_the_spec_bit_for_bit(seed):
    actions = np.random.default_rng(seed).integers(0, spec.N_ACTIONS, spec.EPISODE_STEPS)
    plain = _play(RhythmEnv(), seed, actions)
    for env in (RhythmEnv(world="nominal"), RhythmEnv(world=None)):
        assert _same(plain, _play(env, seed, actions))
    assert _same(plain, _play(RhythmEnv(world="kind"), seed, actions, {"world": "nominal"}))
    assert "world" not in plain[-1][2]


@pytest.mark.parametrize("seed", [3, 42, 10001])
def test_nominal_ingredients_give_the_env_tables_exactly(seed):
    profile = sample_profile(seed, "ood" if seed > 10000 else "in-dist")
    _, _, noise = episode.episode(seed)
    tables = worlds.world_tables(profile, noise, "nominal", seed)
    const, scaled, events, threshold, _ = profile_lists(profile)
    for t in range(spec.EPISODE_STEPS):
        assert tables.const[t].tolist() == const[t % 4]
        assert tables.scaled[t].tolist() == scaled[t % 4]
        assert tables.events[t].tolist() == events
        assert tables.spiral_threshold[t] == threshold
    assert np.array_equal(tables.noise, noise)


@pytest.mark.parametrize("world", worlds.world_names())
def test_check_env_passes_in_every_world(world):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(spec.ENV_ID, world=world).unwrapped)


@pytest.mark.parametrize("world", [w for w in worlds.world_names() if w != "nominal"])
def test_a_world_keeps_the_episode_draws_and_is_reproducible(world):
    seed = 11
    actions = np.random.default_rng(5).integers(0, spec.N_ACTIONS, spec.EPISODE_STEPS)
    nominal = _play(RhythmEnv(), seed, actions)
    a = _play(RhythmEnv(world=world), seed, actions)
    assert _same(a, _play(RhythmEnv(world=world), seed, actions))
    # same initial meters and the same announced events: the episode's generator is untouched
    assert np.array_equal(a[0][0]["meters"], nominal[0][0]["meters"])
    assert [x[2].get("event") for x in a] == [x[2].get("event") for x in nominal]
    assert a[-1][2]["world"] == world
    assert any(
        not np.array_equal(x[0]["meters"], y[0]["meters"]) for x, y in zip(a, nominal, strict=True)
    )


def test_each_departure_draws_from_its_own_generator():
    profile = sample_profile(4)
    _, _, noise = episode.episode(4)
    base = worlds.nominal_week(profile, noise)
    alone = worlds.apply_world(base, "effects", 4)
    both = worlds.apply_world(base, "effects+noise+timing", 4)
    assert np.array_equal(alone.effect, both.effect)  # noise and timing do not shift it
    noisy = worlds.apply_world(base, "noise", 4)
    assert np.array_equal(noisy.noise, both.noise)
    other = worlds.apply_world(base, "effects", 5)
    assert not np.array_equal(alone.effect, other.effect)
    # the composition order is fixed, whatever the name says
    assert worlds.parse_world("drift+kind") == worlds.parse_world("kind+drift")


def test_effects_scale_every_entry_per_episode_and_keep_signs():
    ratios = []
    for seed in range(40):
        week = worlds.nominal_week(sample_profile(seed), np.zeros((28, 5)))
        out = worlds.effects(week, np.random.default_rng([seed, 1]))
        table = np.array(spec.EFFECT)
        nz = table != 0
        r = out.effect[:, nz] / table[nz]
        assert np.all(r > 0)
        assert np.allclose(r, r[0])  # drawn once per episode, the same every step
        ratios.append(r[0])
    ratios = np.log(np.concatenate(ratios))
    assert 0.25 < ratios.std() < 0.45
    assert abs(ratios.mean()) < 0.05


def test_timing_shifts_the_time_of_day_curves():
    slots = np.arange(8) % 4
    k = np.array(spec.CHRONO_K)
    assert np.allclose(worlds._cyclic_shift(k, slots, 0.0), k[slots])
    assert np.allclose(worlds._cyclic_shift(k, slots, 1.0), np.roll(k, 1)[slots])
    assert np.allclose(worlds._cyclic_shift(k, slots, -0.5), (k[slots] + np.roll(k, -1)[slots]) / 2)
    week = worlds.nominal_week(sample_profile(1), np.zeros((28, 5)))
    shifted = worlds.timing(week, np.random.default_rng(2))
    assert not np.allclose(shifted.chrono_k, week.chrono_k)
    assert not np.allclose(shifted.sleep_mult, week.sleep_mult)


def test_noise_is_twice_as_large_with_heavy_tails():
    z = np.random.default_rng(0).standard_normal((4000, 28, 5)) * spec.NOISE_SD
    out = []
    for i in range(200):
        week = worlds.nominal_week(sample_profile(i), z[i])
        out.append(worlds.noise(week, np.random.default_rng(i)).noise)
    x = np.concatenate(out).ravel()
    ratio = np.median(np.abs(x)) / np.median(np.abs(z[:200]))
    assert 1.3 < ratio < 2.2  # twice the sd, but the mass sits closer in and the tails farther
    kurtosis = ((x / x.std()) ** 4).mean()
    assert kurtosis > 6.0  # a Gaussian has 3


def test_kind_changes_two_actions_one_of_them_a_recovery_action():
    seen = set()
    for seed in range(60):
        week = worlds.nominal_week(sample_profile(seed), np.zeros((28, 5)))
        out = worlds.kind(week, np.random.default_rng(seed))
        changed = {
            a
            for a in range(spec.N_ACTIONS)
            if not np.array_equal(out.effect[:, a], week.effect[:, a])
        }
        recovery = {a for _, a, _ in worlds.KIND_CHANGES[: worlds.N_RECOVERY_CHANGES]}
        assert 1 <= len(changed) <= 2
        assert changed & recovery
        seen |= changed
    assert len(seen) >= 8


def test_exercise_drains_vitality_in_the_test_world():
    env = RhythmEnv(world="exercise-drains")
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        v0 = obs["meters"][spec.V]
        obs, *_ = env.step(spec.EXERCISE)
        if obs["active_event"] == 0:
            assert obs["meters"][spec.V] < v0 - 0.05
    tables = env._week[5]
    assert np.all(tables.const[:, spec.EXERCISE, spec.V] < 0)


def test_drift_moves_traits_and_the_grade_uses_the_person_at_the_end():
    env = RhythmEnv(world="drift")
    moved = 0
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        start = sample_profile(seed)
        end = env._week[5].final_profile
        assert info["belief_truth"] == belief_truth(end)
        moved += info["belief_truth"] != belief_truth(start)
        for _ in range(spec.EPISODE_STEPS):
            a = heuristic_action(obs["meters"], obs["slot"])
            obs, _, _, _, info = env.step({"action": a, "belief": list(belief_truth(end))})
        assert info["belief_mae"] < 1e-12
    assert moved >= 8


def test_hidden_disruptions_are_not_announced():
    env_n, env_h = RhythmEnv(), RhythmEnv(world="hidden")
    hits, vitality = 0, []
    for seed in range(30):
        a = _play(env_n, seed, [spec.ME_TIME] * 28)
        b = _play(env_h, seed, [spec.ME_TIME] * 28)
        assert [x[0]["active_event"] for x in a] == [x[0]["active_event"] for x in b]
        extra = np.array(env_h._week[4]) - episode.episode(seed)[2]
        hits += int((np.abs(extra).sum(axis=1) > 0).sum())
        vitality.append(extra[:, spec.V].sum())
    assert 0.08 < hits / (30 * 28) < 0.22  # about 15% of the steps
    assert np.mean(vitality) < 0  # disruptions are mostly bad news


def test_unknown_world_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown world"):
        RhythmEnv(world="sideways")
    with pytest.raises(ValueError, match="unknown world"):
        worlds.parse_world("kind+sideways")


def test_evaluate_in_a_world_plays_the_env_on_the_same_seeds():
    res = evaluate("heuristic", "in-dist", episodes=6, world="kind")
    assert res.world == "kind" and res.episodes == 6 and res.published is None
    nominal = evaluate("heuristic", "in-dist", episodes=6)
    assert nominal.world == "nominal" and nominal.published == 0.463
    with pytest.raises(ValueError, match="batch"):
        rollout("heuristic", "in-dist", episodes=2, engine="batch", world="kind")
    by_world = evaluate_worlds("heuristic", episodes=3, world_list=("nominal", "kind"))
    assert list(by_world) == ["nominal", "kind"]
    assert (
        by_world["kind"].final_score == evaluate("heuristic", episodes=3, world="kind").final_score
    )
