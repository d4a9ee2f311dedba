"""The statistics behind `rhythm insights` (mapping/stats.py): t distribution, Welch's
interval, the autocorrelation correction, Benjamini-Hochberg and the days-for-power rule.
Checked against published table values and by simulation (seeded)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.stats import (
    autocorrelation_inflation,
    bh_qvalues,
    days_for_power,
    inflation,
    lag1,
    t_ppf,
    t_sf,
    welch,
)

# Two-sided 5 % critical values of Student's t (any statistics table).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


@pytest.mark.parametrize(("df", "crit"), sorted(T_975.items()))
def test_t_quantile_matches_the_tables(df, crit):
    assert t_ppf(0.975, df) == pytest.approx(crit, abs=6e-4)
    assert 2 * t_sf(crit, df) == pytest.approx(0.05, abs=2e-4)


@settings(max_examples=200, deadline=None)
@given(q=st.floats(0.0005, 0.9995), df=st.floats(1.0, 500.0))
def test_t_quantile_inverts_the_distribution(q, df):
    t = t_ppf(q, df)
    # t_sf is exact to ~1e-7 near the centre (where no decision hangs on it) and far tighter in
    # the tails (test_t_tail_is_accurate_far_out); a random search found 1.1e-7 at worst
    assert 1.0 - t_sf(t, df) == pytest.approx(q, abs=2e-7)
    assert t_ppf(1 - q, df) == pytest.approx(-t, abs=1e-7 * (1 + abs(t)))  # symmetric


def test_t_tail_is_accurate_far_out():
    """Tiny p-values matter for BH over thousands of tests: compare with the normal limit and
    with the exact Cauchy tail (df = 1: P(T > t) = 1/2 - atan(t)/pi)."""
    for t in (5.0, 50.0, 5000.0):
        assert t_sf(t, 1.0) == pytest.approx(0.5 - math.atan(t) / math.pi, rel=1e-9)
    assert t_sf(6.0, 1e9) == pytest.approx(9.8659e-10, rel=1e-3)


def _coverage(n1: int, n2: int, sd1: float, sd2: float, reps: int = 2000) -> float:
    rng = np.random.default_rng(n1 * 100 + n2)
    hit = 0
    for _ in range(reps):
        w = welch(rng.normal(0.3, sd1, n1), rng.normal(0.0, sd2, n2))
        hit += w.ci95[0] <= 0.3 <= w.ci95[1]
    return hit / reps


@pytest.mark.parametrize(("n1", "n2", "sd1", "sd2"), [(10, 10, 1.0, 1.0), (25, 80, 2.0, 0.5), (40, 12, 0.5, 1.5)])
def test_the_95_interval_covers_the_true_difference(n1, n2, sd1, sd2):
    """Arms of ten days or more: about 95 % coverage, whatever the spreads."""
    cov = _coverage(n1, n2, sd1, sd2)
    assert 0.94 <= cov <= 0.975, cov


@pytest.mark.parametrize(("n1", "n2", "sd1", "sd2"), [(3, 60, 1.0, 1.0), (3, 60, 2.0, 1.0), (3, 60, 0.5, 1.0),
                                                       (5, 60, 2.0, 1.0), (3, 10, 1.0, 1.0)])
def test_small_arms_are_conservative(n1, n2, sd1, sd2):
    """Three to five days: the interval is wider than it needs to be, never narrower."""
    assert _coverage(n1, n2, sd1, sd2) >= 0.95


def test_three_days_that_happen_to_agree_do_not_make_a_discovery():
    """The small arm's variance is floored at the pooled one: three nights that happen to be
    within 4 minutes of each other say little about how much nights vary."""
    rng = np.random.default_rng(0)
    without = rng.normal(415, 38, 105)
    three = np.array([388.0, 384.0, 386.5])
    naive_t = (three.mean() - without.mean()) / math.sqrt(three.var(ddof=1) / 3 + without.var(ddof=1) / 105)
    assert abs(naive_t) > 5  # plain Welch would call this a discovery
    w = welch(three, without)
    assert w.p_value > 0.1
    assert w.ci95[0] < three.mean() - without.mean() - 30  # an honest, wide interval


def _ar1(rng, n, rho):
    y = np.empty(n)
    y[0] = rng.normal()
    for i in range(1, n):
        y[i] = rho * y[i - 1] + rng.normal() * math.sqrt(1 - rho * rho)
    return y


def test_lag1_estimates_the_autocorrelation_and_skips_gaps():
    rng = np.random.default_rng(3)
    y = _ar1(rng, 3000, 0.7)
    assert lag1(y) == pytest.approx(0.7, abs=0.04)
    holes = y.copy()
    holes[::5] = np.nan
    assert lag1(holes) == pytest.approx(0.7, abs=0.05)
    assert lag1(np.array([1.0, np.nan, 2.0, np.nan, 3.0])) == 0.0  # no consecutive pairs: unknown


def test_the_autocorrelation_correction_keeps_the_false_alarm_rate():
    """A persistent factor and a drifting meter with no link: without the correction the
    5 % test fires far too often; with it, about 5 %."""
    rng = np.random.default_rng(11)
    plain = corrected = 0
    reps = 600
    for _ in range(reps):
        y = _ar1(rng, 120, 0.8)
        x = _ar1(rng, 120, 0.8) > 0.3
        resid = np.where(x, y - y[x].mean(), y - y[~x].mean())
        infl = inflation(x.astype(float), resid)
        plain += welch(y[x], y[~x]).p_value < 0.05
        corrected += welch(y[x], y[~x], infl).p_value < 0.05
    assert plain / reps > 0.2
    assert corrected / reps < 0.075


def test_inflation_is_never_below_one():
    assert autocorrelation_inflation(0.8, -0.5) == 1.0
    assert autocorrelation_inflation(0.0, 0.9) == 1.0
    assert autocorrelation_inflation(0.5, 0.5) == pytest.approx(1.25 / 0.75)
    rng = np.random.default_rng(2)
    alternating = np.tile([1.0, 0.0], 30)  # every other day: negative lag-1 autocorrelation
    assert inflation(alternating, _ar1(rng, 60, 0.9)) >= 1.0
    assert inflation(rng.normal(size=60), rng.normal(size=60)) == pytest.approx(1.0, abs=0.6)


def _bh_by_definition(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    rank = {i: r + 1 for r, i in enumerate(order)}
    return [min(1.0, min(p[j] * m / rank[j] for j in range(m) if p[j] >= p[i])) for i in range(m)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40))
def test_bh_qvalues_follow_the_definition(p):
    q = bh_qvalues(p)
    expected = _bh_by_definition(p)
    assert q == pytest.approx(expected)
    assert all(qi >= pi - 1e-12 for qi, pi in zip(q, p, strict=True))


def test_days_for_power_gives_about_80_percent_power():
    """Collect the days it asks for, at the same mix, and the effect is found ~80 % of the time."""
    effect, sd = 0.1, 0.15
    more = days_for_power(effect, sd, sd, 8, 20, alpha=0.05, power=0.8, df=25)
    assert more is not None and more[0] > 0 and more[1] > 0
    n1, n2 = 8 + more[0], 20 + more[1]
    assert n2 / n1 == pytest.approx(20 / 8, rel=0.15)
    rng = np.random.default_rng(5)
    found = sum(welch(rng.normal(effect, sd, n1), rng.normal(0, sd, n2)).p_value < 0.05 for _ in range(800))
    assert 0.72 <= found / 800 <= 0.9
    assert days_for_power(0.0, sd, sd, 8, 20, alpha=0.05) is None  # no effect seen: no number of days
