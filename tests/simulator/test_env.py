"""RhythmEnv: the Gymnasium contract, determinism, the episode, observation and info."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import simulator  # noqa: F401  (registers Rhythm-v0)
from simulator import dynamics, episode, spec
from simulator.env import RhythmEnv
from simulator.profiles import Profile, belief_truth, named_profile, sample_profile


def play(env, seed, actions, options=None):
    obs, info = env.reset(seed=seed, options=options)
    out = [(obs, None, info)]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, info))
    return out


def test_check_env_passes_without_warnings():
    env = gym.make("Rhythm-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)


def test_registration_is_idempotent():
    import importlib

    importlib.reload(simulator)
    assert gym.spec("Rhythm-v0").entry_point == "simulator.env:RhythmEnv"


def test_same_seed_same_episode_bit_for_bit():
    acts = list(np.random.default_rng(0).integers(0, 10, 28))
    a = play(RhythmEnv(), 17, [int(x) for x in acts])
    b = play(RhythmEnv(), 17, [int(x) for x in acts])
    for (o1, r1, i1), (o2, r2, i2) in zip(a, b, strict=True):
        assert r1 == r2
        for k in o1:
            np.testing.assert_array_equal(o1[k], o2[k])
        assert i1.get("reward_breakdown") == i2.get("reward_breakdown")
    c = play(RhythmEnv(), 18, [int(x) for x in acts])
    assert not np.array_equal(a[-1][0]["meters"], c[-1][0]["meters"])


def test_reset_without_seed_continues_deterministically():
    e1, e2 = RhythmEnv(), RhythmEnv()
    e1.reset(seed=3)
    e2.reset(seed=3)
    o1, i1 = e1.reset()
    o2, i2 = e2.reset()
    assert i1["seed"] == i2["seed"]
    np.testing.assert_array_equal(o1["meters"], o2["meters"])


def test_episode_is_28_steps_then_terminated():
    env = RhythmEnv()
    env.reset(seed=0)
    for t in range(28):
        obs, r, term, trunc, info = env.step(spec.SLEEP)
        assert trunc is False
        assert term is (t == 27)
        assert info["t"] == t
    assert obs["t"] == 28 and obs["remaining_steps"] == 0
    with pytest.raises(ResetNeeded):
        env.step(0)
    with pytest.raises(ResetNeeded):
        RhythmEnv().step(0)


def test_initial_meters_and_observation_layout():
    env = RhythmEnv()
    obs, info = env.reset(seed=9)
    m0, events, noise = episode.episode(9)
    np.testing.assert_array_equal(obs["meters"], m0)
    assert np.all(np.abs(obs["meters"] - [0.7, 0.7, 0.5, 0.7, 0.7]) <= 0.05)
    assert (obs["t"], obs["day"], obs["slot"], obs["remaining_steps"]) == (0, 0, 0, 28)
    assert obs["last_action"] == 10 and obs["active_event"] == 0
    np.testing.assert_array_equal(obs["history_actions"], [10] * 7)
    assert obs in env.observation_space
    # the profile and the belief truth are only in info
    assert set(obs) == set(env.observation_space.spaces)
    assert "profile" not in obs and "belief_truth" not in obs
    assert Profile.from_dict(info["profile"]) == sample_profile(9)
    assert info["belief_truth"] == belief_truth(sample_profile(9))


def test_every_step_follows_the_pure_dynamics():
    """Env step == dynamics.step with the episode's event and noise; reward and anomalies too."""
    seed = 21
    m, events, noise = episode.episode(seed)
    profile = sample_profile(seed)
    env = RhythmEnv()
    env.reset(seed=seed)
    rng = np.random.default_rng(5)
    hist = []
    for t in range(28):
        a = int(rng.integers(10))
        obs, r, _, _, info = env.step(a)
        new, d = dynamics.step(m, t % 4, a, profile, int(events[t]), noise=noise[t])
        np.testing.assert_allclose(obs["meters"], new, atol=1e-12)
        np.testing.assert_allclose(obs["deltas"], d, atol=1e-12)
        np.testing.assert_allclose(
            obs["anomalies"], dynamics.anomaly(m, t % 4, a, int(events[t]), d), atol=1e-12
        )
        terms = dynamics.reward_terms(profile.w, d, new)
        assert r == pytest.approx(dynamics.reward(profile.w, d, new), abs=1e-12)
        for k, v in terms.items():
            assert info["reward_breakdown"][k] == pytest.approx(v, abs=1e-12)
        assert sum(info["reward_breakdown"].values()) == pytest.approx(r, abs=1e-12)
        assert obs["active_event"] == events[t]
        assert info["event"] == spec.EVENTS[events[t]]
        assert (obs["last_action"], obs["slot"], obs["day"]) == (a, (t + 1) % 4, (t + 1) // 4)
        hist.append((a, r, d))
        last = hist[-7:]
        pad = 7 - len(last)
        np.testing.assert_array_equal(obs["history_actions"], [10] * pad + [x[0] for x in last])
        np.testing.assert_allclose(obs["history_rewards"], [0.0] * pad + [x[1] for x in last])
        np.testing.assert_allclose(obs["history_deltas"][pad:], [x[2] for x in last], atol=1e-12)
        assert obs in env.observation_space
        m = new


def test_events_fire_about_12_percent_of_steps_and_are_uniform():
    ev = np.concatenate([episode.episode(s)[1] for s in range(3000)])
    assert abs((ev > 0).mean() - 0.12) < 0.01
    counts = np.bincount(ev[ev > 0], minlength=7)[1:]
    assert counts.min() > 0.8 * counts.mean()


def test_final_info_has_the_grade():
    env = RhythmEnv()
    env.reset(seed=2)
    for _ in range(28):
        _, _, term, _, info = env.step(spec.SLEEP)
    for k in (
        "final_score",
        "crash_free",
        "progress",
        "connection",
        "adaptation",
        "efficiency",
        "belief_accuracy",
        "belief_mae",
        "crashes",
    ):
        assert k in info
    assert info["belief_mae"] is None and info["belief_accuracy"] == 0.0
    assert 0.0 <= info["final_score"] <= 1.0
    assert info["final_score"] == env.grade().final_score


def test_last_emitted_belief_counts():
    env = RhythmEnv()
    _, info = env.reset(seed=4)
    truth = np.array(info["belief_truth"])
    env.step({"action": 0, "belief": [0.0, 0.0, 0.0]})
    for _ in range(26):
        env.step({"action": 3, "belief": None})  # no belief: keeps the last one
    env.step({"action": 3, "belief": truth})
    g = env.grade()
    assert g.belief_mae == 0.0 and g.belief_accuracy == 1.0
    env.reset(seed=4)
    env.step({"action": 0, "belief": truth})
    for _ in range(27):
        env.step({"action": 3, "belief": [1.0, 1.0, 1.0], "emit_belief": 0})  # flag off
    assert env.grade().belief_mae == 0.0


def test_invalid_actions_raise():
    env = RhythmEnv()
    env.reset(seed=0)
    for bad in (
        10,
        -1,
        {"action": 11},
        {"action": 1, "belief": [0.5, 0.5]},
        {"action": 1, "belief": [np.nan] * 3},
    ):
        with pytest.raises(ValueError):
            env.step(bad)


def test_named_profile_through_options_and_constructor():
    env = RhythmEnv(profile="workaholic_stoic")
    _, info = env.reset(seed=1)
    assert Profile.from_dict(info["profile"]) == named_profile("workaholic_stoic")
    _, info = RhythmEnv().reset(seed=1, options={"profile": "introvert_morning"})
    assert Profile.from_dict(info["profile"]) == named_profile("introvert_morning")
    _, info = RhythmEnv(condition="ood").reset(seed=1)
    assert Profile.from_dict(info["profile"]) == sample_profile(1, "ood")
    with pytest.raises(ValueError):
        RhythmEnv(condition="weird")


def test_render_ansi():
    env = gym.make("Rhythm-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step(spec.SLEEP)
    text = env.render()
    assert "last=SLEEP" in text and "V=" in text


def test_a_week_can_start_from_given_meters_with_the_same_draws():
    """The ``meters`` reset option replaces the drawn starting meters only: the events and the
    profile are the same draws, and the week from there follows the dynamics as usual."""
    env = RhythmEnv()
    start = [0.4, 0.6, 0.02, 0.5, 0.3]
    actions = [0, 2, 6, 3] * 7
    plain = play(env, 9, actions)
    moved = play(env, 9, actions, options={"meters": start})
    np.testing.assert_array_equal(moved[0][0]["meters"], start)
    assert [o["active_event"] for o, _, _ in moved] == [o["active_event"] for o, _, _ in plain]
    assert moved[0][2]["profile"] == plain[0][2]["profile"]
    assert not np.array_equal(moved[-1][0]["meters"], plain[-1][0]["meters"])
    # None is the drawn week, bit for bit
    again = play(env, 9, actions, options={"meters": None})
    for (a, _, _), (b, _, _) in zip(again, plain, strict=True):
        np.testing.assert_array_equal(a["meters"], b["meters"])
    for bad in ([0.5] * 4, [0.5, 0.5, 1.2, 0.5, 0.5], [0.5, float("nan"), 0.5, 0.5, 0.5]):
        with pytest.raises(ValueError, match="meters must be 5 numbers"):
            env.reset(seed=9, options={"meters": bad})
