"""Section 4: the 15 parameters, sampling, named profiles, the belief truth."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import spec
from simulator.profiles import (
    Profile,
    belief_truth,
    belief_truth_array,
    named_profile,
    sample_profile,
    sample_profiles_array,
)


def test_neutral_profile():
    n = Profile.neutral()
    assert n.w == (0.2,) * 5
    assert (n.social_vitality, n.solo_recharge, n.leisure_guilt) == (0.0, 0.0, 0.0)
    assert (n.morning, n.metabolic_rate, n.stress_tolerance, n.event_resilience) == (
        0.5,
        1.0,
        0.5,
        0.5,
    )


def test_named_profiles_follow_the_table():
    p = named_profile("workaholic_stoic")
    assert p.w == (0.075, 0.075, 0.70, 0.075, 0.075)
    assert (p.work_vitality_recovery, p.progress_serenity_bonus, p.leisure_guilt) == (1.0, 0.8, 0.8)
    q = named_profile("extrovert_night_owl")
    assert (q.social_vitality, q.morning, q.metabolic_rate) == (0.6, 0.1, 1.1)
    with pytest.raises(ValueError):
        named_profile("nobody")


def test_round_trips():
    p = sample_profile(5, "ood")
    assert Profile.from_dict(p.to_dict()) == p
    assert Profile.from_array(p.to_array()) == p
    assert p.to_array().shape == (15,)


def test_seed_scrambling_and_dirichlet():
    """w is Dirichlet(1,...) drawn first from default_rng(seed ^ 0xA3C5F729)."""
    for seed in (0, 1, 12345):
        rng = np.random.default_rng(seed ^ 0xA3C5F729)
        np.testing.assert_array_equal(sample_profile(seed).w, rng.dirichlet(np.ones(5)))
        rng = np.random.default_rng(seed ^ 0xA3C5F729)
        np.testing.assert_array_equal(sample_profile(seed, "ood").w, rng.dirichlet(np.full(5, 0.3)))


def test_same_seed_same_person_and_batch_equals_scalar():
    assert sample_profile(42) == sample_profile(42)
    assert sample_profile(42) != sample_profile(43)
    for cond in ("in-dist", "ood"):
        batch = sample_profiles_array(range(50), cond)
        for s in range(50):
            np.testing.assert_array_equal(batch[s], sample_profile(s, cond).to_array())


def _mods(cond, n=2000):
    return sample_profiles_array(range(n), cond)[:, 5:]


def test_in_distribution_uses_the_middle_70_percent():
    ranges = np.array([spec.MODIFIER_RANGES[k] for k in spec.MODIFIERS])
    lo, hi = ranges[:, 0], ranges[:, 1]
    m = _mods("in-dist")
    assert np.all(m >= lo + 0.15 * (hi - lo)) and np.all(m <= hi - 0.15 * (hi - lo))
    # and fills it: close to both inner bounds
    assert np.all(m.min(axis=0) < lo + 0.16 * (hi - lo))
    assert np.all(m.max(axis=0) > hi - 0.16 * (hi - lo))
    w = sample_profiles_array(range(500))[:, :5]
    np.testing.assert_allclose(w.sum(axis=1), 1.0)


def test_ood_draws_tails_half_the_time():
    ranges = np.array([spec.MODIFIER_RANGES[k] for k in spec.MODIFIERS])
    lo, hi = ranges[:, 0], ranges[:, 1]
    m = _mods("ood", 4000)
    assert np.all((m >= lo) & (m <= hi))
    tail = (m < lo + 0.15 * (hi - lo)) | (m > hi - 0.15 * (hi - lo))
    assert abs(tail.mean() - 0.5) < 0.02
    low = m < lo + 0.15 * (hi - lo)
    assert abs(low.sum() / tail.sum() - 0.5) < 0.03
    # "most OOD people have several extreme traits"
    assert np.mean(tail.sum(axis=1) >= 3) > 0.9
    # Dirichlet(0.3) weights are more concentrated than Dirichlet(1)
    w_ood = sample_profiles_array(range(2000), "ood")[:, :5]
    w_in = sample_profiles_array(range(2000))[:, :5]
    assert w_ood.max(axis=1).mean() > w_in.max(axis=1).mean() + 0.1


def test_unknown_condition_raises():
    with pytest.raises(ValueError):
        sample_profile(0, "discrete")


def test_belief_truth_by_hand():
    p = named_profile("introvert_morning")
    # social: 0.4 u(-1) + 0.3 u(-0.6) + 0.3 min(1, 0.1/0.4) = 0 + 0.06 + 0.075 = 0.135 -> 0 after stretch
    # work: 0.4 u(-0.3) + 0.3 u(0.2) + 0.3 * 0.5 = 0.14 + 0.18 + 0.15 = 0.47 -> 0.44
    social, morning, work = belief_truth(p)
    assert social == 0.0
    assert morning == 0.9
    assert work == pytest.approx(0.44)
    s = named_profile("workaholic_stoic")
    assert belief_truth(s)[2] == 1.0  # 0.4 + 0.27 + 0.3 = 0.97 -> 1


def test_belief_truth_array_matches_scalar():
    params = sample_profiles_array(range(200), "ood")
    arr = belief_truth_array(params)
    for i in range(200):
        np.testing.assert_allclose(arr[i], belief_truth(Profile.from_array(params[i])), atol=1e-15)
    assert np.all((arr >= 0) & (arr <= 1))


def test_constant_guess_has_belief_mae_about_0_20_in_distribution():
    truth = belief_truth_array(sample_profiles_array(range(2000)))
    mae = np.abs(truth - 0.5).mean()
    assert 0.17 < mae < 0.23
