"""Section 3 (one step) and section 5 (reward), checked against a literal transcription."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import dynamics, spec
from simulator.profiles import Profile, named_profile, sample_profile

EFFECT = spec.EFFECT
WORK = {0, 1, 2}


def reference_delta(m, slot, a, p: Profile, event: int) -> np.ndarray:
    """Spec section 3, steps 1-6, transcribed line by line (no noise, no clipping)."""
    base = list(EFFECT[a])  # 1. base
    # 2. time of day
    chrono = 1 + 0.6 * (2 * p.morning - 1) * [0.5, 0.2, -0.2, -0.5][slot]
    if a in WORK:
        base = [x * chrono if x > 0 else x * (2 - chrono) for x in base]
    if a == 3:
        base = [x * [0.7, 0.5, 0.8, 1.3][slot] for x in base]
    if a in (6, 7):
        base[4] *= [0.8, 1.0, 1.2, 0.9][slot]
    if slot == 3 and a != 3:
        base[0] += -0.04
    # 3.3 vitality factor on positive P and C entries of the work actions
    fv = min(1.15, max(0.4, 0.4 + 0.6 * m[0] / 0.7))
    if a in WORK:
        for k in (1, 2):
            if base[k] > 0:
                base[k] *= fv
    d = np.array(base)
    # 3. profile modifiers
    if a == 7:
        d[0] += 0.13 * p.social_vitality
        d[3] += 0.08 * p.social_serenity
    if a == 6:
        d[0] += 0.06 * p.social_vitality
        d[3] += 0.05 * p.social_serenity
    if a == 0:
        d[0] += 0.10 * p.work_vitality_recovery
    if a in (1, 2):
        d[0] += 0.05 * p.work_vitality_recovery
    if a in WORK:
        d[3] += 0.08 * p.progress_serenity_bonus
    if a in (9, 8):
        d[3] -= 0.10 * p.leisure_guilt
    if a in (8, 5):
        d[0] += 0.05 * p.solo_recharge
        d[3] += 0.05 * p.solo_recharge
    # 4. passive drift
    d += [-0.015 * p.metabolic_rate, -0.010, spec.DRIFT_P, -0.008, -0.015]
    # 5. event
    if event:
        d += np.array(spec.EVENT_EFFECT[event]) * (1.3 - 0.8 * p.event_resilience)
    # 6. stress spiral
    if m[3] < 0.40 - 0.25 * p.stress_tolerance:
        d[1] -= 0.03
        d[0] -= 0.02
    return d


def test_progress_drift_is_the_calibrated_value_inside_the_allowed_range():
    lo, hi = spec.PROGRESS_DRIFT_RANGE
    assert lo <= spec.DRIFT_P <= hi


def test_expected_delta_matches_the_literal_spec_for_many_states():
    rng = np.random.default_rng(7)
    profiles = [Profile.neutral(), *(named_profile(n) for n in spec.NAMED_PROFILES)]
    profiles += [sample_profile(s, c) for s in range(20) for c in ("in-dist", "ood")]
    for p in profiles:
        for _ in range(40):
            m = rng.random(5)
            slot, a, e = int(rng.integers(4)), int(rng.integers(10)), int(rng.integers(7))
            got = dynamics.expected_delta(m, slot, a, p, e)
            np.testing.assert_allclose(got, reference_delta(m, slot, a, p, e), atol=1e-12)


@pytest.mark.parametrize(
    ("action", "slot", "expected"),
    [
        # neutral person, V = 0.7 (fv = 1), serene, no event: base + drift
        (
            "DEEP_WORK",
            1,
            (-0.12 - 0.015, -0.10 - 0.010, 0.18 + spec.DRIFT_P, -0.05 - 0.008, -0.015),
        ),
        (
            "SLEEP",
            3,
            (0.18 * 1.3 - 0.015, 0.10 * 1.3 - 0.010, spec.DRIFT_P, 0.03 * 1.3 - 0.008, -0.015),
        ),
        (
            "SLEEP",
            1,
            (0.18 * 0.5 - 0.015, 0.10 * 0.5 - 0.010, spec.DRIFT_P, 0.03 * 0.5 - 0.008, -0.015),
        ),
        ("FAMILY_TIME", 2, (-0.02 - 0.015, -0.010, spec.DRIFT_P, 0.05 - 0.008, 0.15 * 1.2 - 0.015)),
        (
            "ME_TIME",
            3,
            (0.05 - 0.04 - 0.015, 0.02 - 0.010, spec.DRIFT_P, 0.08 - 0.008, -0.02 - 0.015),
        ),
    ],
)
def test_golden_neutral_deltas(action, slot, expected):
    m = [0.7, 0.7, 0.5, 0.7, 0.7]
    got = dynamics.expected_delta(m, slot, spec.ACTIONS.index(action), Profile.neutral())
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_chronotype_helps_morning_people_work_in_the_morning():
    lark = Profile.from_dict({**Profile.neutral().to_dict(), "morning": 1.0})
    owl = Profile.from_dict({**Profile.neutral().to_dict(), "morning": 0.0})
    m = [0.7, 0.7, 0.5, 0.7, 0.7]
    p_lark = dynamics.expected_delta(m, 0, spec.DEEP_WORK, lark)[spec.P]
    p_owl = dynamics.expected_delta(m, 0, spec.DEEP_WORK, owl)[spec.P]
    assert p_lark == pytest.approx(0.18 * 1.3 + spec.DRIFT_P)
    assert p_owl == pytest.approx(0.18 * 0.7 + spec.DRIFT_P)


def test_vitality_factor_bounds():
    assert dynamics.vitality_factor(0.0) == 0.4
    assert dynamics.vitality_factor(0.7) == pytest.approx(1.0)
    assert dynamics.vitality_factor(1.0) == 1.15


def test_tired_people_work_badly():
    n = Profile.neutral()
    fresh = dynamics.expected_delta([0.7, 0.7, 0.5, 0.7, 0.7], 1, spec.DEEP_WORK, n)
    tired = dynamics.expected_delta([0.0, 0.7, 0.5, 0.7, 0.7], 1, spec.DEEP_WORK, n)
    assert tired[spec.P] - spec.DRIFT_P == pytest.approx(0.4 * (fresh[spec.P] - spec.DRIFT_P))
    assert tired[spec.C] == pytest.approx(fresh[spec.C])  # negative entries are not scaled


def test_stress_spiral_below_threshold_only():
    n = Profile.neutral()  # threshold 0.40 - 0.25 * 0.5 = 0.275
    calm = dynamics.expected_delta([0.7, 0.7, 0.5, 0.28, 0.7], 1, spec.ME_TIME, n)
    spiral = dynamics.expected_delta([0.7, 0.7, 0.5, 0.27, 0.7], 1, spec.ME_TIME, n)
    np.testing.assert_allclose(spiral - calm, [-0.02, -0.03, 0, 0, 0], atol=1e-12)


def test_event_scaled_by_resilience():
    n = Profile.neutral()
    m = [0.7, 0.7, 0.5, 0.7, 0.7]
    none = dynamics.expected_delta(m, 1, spec.ME_TIME, n, None)
    sick = dynamics.expected_delta(m, 1, spec.ME_TIME, n, "sick_day")
    np.testing.assert_allclose(sick - none, np.array([-0.15, -0.05, 0, 0, 0]) * 0.9, atol=1e-12)
    assert dynamics.event_id(4) == dynamics.event_id("sick_day") == 4
    with pytest.raises(ValueError):
        dynamics.event_id("meteor")


def test_invalid_slot_or_action_raise():
    with pytest.raises(ValueError):
        dynamics.expected_delta([0.5] * 5, 4, 0, Profile.neutral())
    with pytest.raises(ValueError):
        dynamics.expected_delta([0.5] * 5, 0, 10, Profile.neutral())


@settings(max_examples=200, deadline=None)
@given(
    m=st.lists(st.floats(0, 1), min_size=5, max_size=5),
    slot=st.integers(0, 3),
    a=st.integers(0, 9),
    e=st.integers(0, 6),
    noise=st.lists(st.floats(-0.2, 0.2), min_size=5, max_size=5),
    seed=st.integers(0, 10_000),
)
def test_step_clips_and_reports_the_actual_delta(m, slot, a, e, noise, seed):
    p = sample_profile(seed, "ood")
    new, actual = dynamics.step(m, slot, a, p, e, noise=noise)
    assert np.all((new >= 0) & (new <= 1))
    np.testing.assert_allclose(
        new, np.clip(np.array(m) + dynamics.expected_delta(m, slot, a, p, e) + noise, 0, 1)
    )
    np.testing.assert_array_equal(actual, new - np.array(m))


def test_step_with_rng_adds_gaussian_noise_of_sd_0_012():
    rng = np.random.default_rng(0)
    m, p = [0.5] * 5, Profile.neutral()
    exp = dynamics.expected_delta(m, 1, spec.ME_TIME, p)
    samples = np.array(
        [dynamics.step(m, 1, spec.ME_TIME, p, rng=rng)[1] - exp for _ in range(4000)]
    )
    assert abs(samples.std() - 0.012) < 0.0007
    assert abs(samples.mean()) < 0.001


def test_neutral_delta_is_clipped_and_anomaly_zero_for_the_neutral_person():
    m = [0.99, 0.5, 0.5, 0.5, 0.5]
    nd = dynamics.neutral_delta(m, 3, spec.SLEEP)  # V would overshoot 1
    assert nd[spec.V] == pytest.approx(0.01)
    new, actual = dynamics.step(m, 3, spec.SLEEP, Profile.neutral())
    np.testing.assert_allclose(dynamics.anomaly(m, 3, spec.SLEEP, None, actual), 0.0, atol=1e-15)


def test_anomaly_reveals_the_introvert():
    introvert = named_profile("introvert_morning")
    m = [0.6, 0.6, 0.5, 0.6, 0.5]
    _, actual = dynamics.step(m, 2, spec.SOCIALIZE, introvert)
    an = dynamics.anomaly(m, 2, spec.SOCIALIZE, None, actual)
    assert an[spec.V] == pytest.approx(0.13 * -1.0)
    assert an[spec.S] == pytest.approx(0.08 * -0.6)


def test_reward_terms_by_hand():
    w = (0.1, 0.2, 0.3, 0.2, 0.2)
    d = (0.05, -0.02, 0.10, 0.0, -0.01)
    after = (0.6, 0.05, 0.7, 0.5, 0.08)  # two meters below 0.10
    t = dynamics.reward_terms(w, d, after)
    assert t["delta"] == pytest.approx(10 * (0.005 - 0.004 + 0.03 + 0 - 0.002))
    assert t["level"] == pytest.approx(0.06 + 0.01 + 0.21 + 0.10 + 0.016 - 0.5)
    assert t["progress"] == pytest.approx(0.05)
    assert t["connection"] == pytest.approx(-0.004)
    assert t["crash"] == -1.0
    assert dynamics.reward(w, d, after) == pytest.approx(sum(t.values()))
    assert dynamics.crash_count(after) == 2


def test_batch_expected_delta_equals_scalar():
    from simulator.profiles import sample_profiles_array

    params = sample_profiles_array(range(30), "ood")
    k = dynamics.compact_params(params)
    rng = np.random.default_rng(3)
    m = rng.random((30, 5))
    e = rng.integers(0, 7, 30)
    allacts = np.tile(np.arange(10), (30, 1))
    for slot in range(4):
        got = dynamics.expected_delta_batch(k, m, slot, allacts, e)
        for i in range(30):
            p = Profile.from_array(params[i])
            for a in range(10):
                assert np.array_equal(got[i, a], dynamics.expected_delta(m[i], slot, a, p, e[i]))
