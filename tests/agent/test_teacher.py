"""The Bayesian teacher: rollout model, protocol, registry, and that it beats the heuristic."""

from __future__ import annotations

import numpy as np
import pytest

from agent.day import PLANNER_NAME
from agent.lab.policies import register_ablations, register_agent_policies
from agent.teacher import BayesAgent, default_plan, improve_plan, neighbours
from agent.world import EVENT_MEAN, PlanModel, expected_belief_accuracy
from simulator import spec
from simulator.dynamics import reward, step
from simulator.evaluate import evaluate
from simulator.policies import get_policy, policy_names
from simulator.profiles import Profile, sample_profile


def test_plan_model_rollout_matches_the_expected_dynamics():
    prof = sample_profile(4)
    p = prof.to_array()
    model = PlanModel(p[None, :], p[:5])
    rng = np.random.default_rng(0)
    plan = rng.integers(0, spec.N_ACTIONS, spec.EPISODE_STEPS - 3)
    m0 = np.array([0.6, 0.7, 0.5, 0.45, 0.65])
    sim = model.simulate(plan[None, :], m0, 3)
    ev = EVENT_MEAN * (spec.EVENT_SCALE_BASE - spec.EVENT_SCALE_RESILIENCE * prof.event_resilience)
    m = m0
    for j, a in enumerate(plan):
        new, d = step(m, (3 + j) % 4, int(a), prof, noise=ev)
        assert sim["rewards"][0, 0, j] == pytest.approx(reward(prof.w, d, new), abs=1e-12)
        m = new
    np.testing.assert_allclose(sim["meters"][0, 0], m, atol=1e-12)


def test_score_rewards_progress_and_needs_the_past_rewards():
    p = Profile.neutral().to_array()
    model = PlanModel(p[None, :], p[:5])
    m = np.full(5, 0.6)
    lazy = np.full((1, 28), spec.BINGE_WATCH)
    worker = np.array([[spec.DEEP_WORK, spec.LEARN, spec.FAMILY_TIME, spec.SLEEP] * 7])
    s = model.score(np.vstack([lazy, worker]), m, 0, [], 0)
    assert s[1] > s[0]
    with pytest.raises(ValueError):
        model.score(worker[:, 2:], m, 2, [], 0)


def test_neighbours_and_improvement_never_lower_the_score():
    plan = np.arange(5) % spec.N_ACTIONS
    cands = neighbours(plan)
    assert cands.shape == (50, 5)
    assert (cands != plan).sum(axis=1).max() == 1
    p = Profile.neutral().to_array()
    model = PlanModel(p[None, :], p[:5])
    m = np.array(spec.INITIAL_METERS)
    start = np.full(spec.EPISODE_STEPS, spec.BINGE_WATCH)
    better = improve_plan(model, start, m, 0, [], 0, 5, 0.0, np.eye(9))
    assert model.score(better[None], m, 0, [], 0)[0] > model.score(start[None], m, 0, [], 0)[0]
    assert len(default_plan()) == spec.EPISODE_STEPS


def test_expected_belief_accuracy_grows_with_information():
    prec = np.eye(9) * 4.0
    assert expected_belief_accuracy(prec * 100.0) > expected_belief_accuracy(prec)
    assert 0.0 <= expected_belief_accuracy(prec) <= 1.0


def test_agent_follows_the_policy_protocol_and_explains():
    from simulator.env import RhythmEnv

    env = RhythmEnv()
    agent = BayesAgent()
    obs, _ = env.reset(seed=5)
    agent.reset(5)
    actions = []
    for _ in range(spec.EPISODE_STEPS):
        a, belief = agent.act(obs)
        assert 0 <= a < spec.N_ACTIONS
        assert belief.shape == (3,) and np.all((belief >= 0) & (belief <= 1))
        assert agent.explain()
        actions.append(a)
        obs, _, _, _, info = env.step({"action": a, "belief": belief})
    # it probes: at least one social and one work action in the first two days
    assert set(actions[:8]) & set(spec.SOCIAL_ACTIONS)
    assert set(actions[:8]) & set(spec.WORK_ACTIONS)
    # deterministic given the seed
    agent2 = BayesAgent()
    obs, _ = env.reset(seed=5)
    agent2.reset(5)
    again = []
    for _ in range(spec.EPISODE_STEPS):
        a, belief = agent2.act(obs)
        again.append(a)
        obs, *_ = env.step({"action": a, "belief": belief})
    assert again == actions


def test_registration_is_idempotent_and_leaves_the_ablations_to_benchmarks():
    names = register_agent_policies()
    assert register_agent_policies() == names
    assert {"bayes", "bayes-robust", "bayes-calendar", PLANNER_NAME, "ideal"} == set(names)
    assert {"bayes-noinfo", "belief-only"}.isdisjoint(names)
    assert register_ablations() == ["bayes-noinfo", "belief-only"] == register_ablations()
    assert {"bayes", "bayes-noinfo", "belief-only"} <= set(policy_names())
    assert isinstance(get_policy("bayes"), BayesAgent)
    assert get_policy("belief-only").use_planner is False


def test_belief_only_ablation_acts_like_the_heuristic():
    a = evaluate(BayesAgent(plan=False), "in-dist", episodes=3, engine="env")
    h = evaluate("heuristic", "in-dist", episodes=3)
    assert a.progress == pytest.approx(h.progress)
    assert a.belief_mae is not None and a.belief_mae < 0.15


@pytest.mark.slow
def test_bayes_beats_the_heuristic_in_distribution_and_ood():
    for condition, seeds in (("in-dist", 12), ("ood", 8)):
        bayes = evaluate(BayesAgent(), condition, episodes=seeds, engine="env")
        heur = evaluate("heuristic", condition, episodes=seeds)
        assert bayes.final_score > heur.final_score + 0.1
        assert bayes.final_score > 0.62
        assert bayes.belief_mae < 0.15
        assert bayes.crashes_mean < 1.0


def test_agent_can_join_mid_week():
    from simulator.env import RhythmEnv

    env = RhythmEnv()
    obs, _ = env.reset(seed=8)
    for a in (spec.DEEP_WORK, spec.SLEEP, spec.SOCIALIZE, spec.LEARN, spec.SLEEP):
        obs, *_ = env.step(a)
    agent = BayesAgent()
    for _ in range(spec.EPISODE_STEPS - 5):
        a, belief = agent.act(obs)
        obs, _, done, _, info = env.step({"action": a, "belief": belief})
    assert done and info["final_score"] > 0.5
