"""Small statistics for `rhythm insights`, in plain Python and numpy (no SciPy). Pure.

- Student's t distribution: ``t_sf`` (upper tail, from the regularised incomplete beta
  function) and ``t_ppf`` (quantile, Newton from the normal quantile);
- ``welch``: difference of two means with Welch's standard error, its 95 % interval and a
  two-sided p-value, with a variance inflation for autocorrelated days (``lag1``,
  ``autocorrelation_inflation``);
- ``bh_qvalues``: Benjamini-Hochberg q-values over every test of a run;
- ``days_for_power``: how many days each arm needs to detect an effect with 80 % power.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()


# -- Student's t ---------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` (real, > 0) degrees of freedom."""
    if math.isinf(df):
        return 1.0 - _NORMAL.cdf(t)
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_pdf(t: float, df: float) -> float:
    return math.exp(
        math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (0 < q < 1)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    z = _NORMAL.inv_cdf(q)
    if math.isinf(df) or df > 1e7:
        return z
    # Cornish-Fisher start, then Newton on the CDF (a few steps are plenty).
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
    if df < 2.5 or not math.isfinite(t):
        t = z * (1.0 + 1.0 / max(df, 0.5))
    for _ in range(60):
        err = (1.0 - t_sf(t, df)) - q
        step = err / max(t_pdf(t, df), 1e-300)
        t_new = t - step
        if abs(step) > 1.0 + abs(t):  # damp wild steps in the tails
            t_new = t - math.copysign(1.0 + abs(t), step) * 0.5
        if abs(t_new - t) < 1e-12 * (1.0 + abs(t)):
            return t_new
        t = t_new
    return t


@lru_cache(maxsize=4096)
def _t975(df: float) -> float:
    return t_ppf(0.975, df)


# -- autocorrelated days -------------------------------------------------------------------------
def autocorrelations(values: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelations at lags 1..max_lag of a daily series with gaps (NaN): the mean
    product of centred values ``lag`` days apart over the pairs that both have a value,
    over their mean square. 0 at a lag with fewer than six such pairs (too few to say)."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    out = np.zeros(max_lag)
    n = int(ok.sum())
    if n < 7:
        return out
    c = np.where(ok, v - v[ok].mean(), 0.0)
    var = float(c @ c) / n
    if var <= 0:
        return out
    okf = ok.astype(float)
    for k in range(1, min(max_lag, len(v) - 1) + 1):
        pairs = float(okf[:-k] @ okf[k:])
        if pairs >= 6:
            out[k - 1] = max(-1.0, min(1.0, float(c[:-k] @ c[k:]) / pairs / var))
    return out


def autocorrelation(values: np.ndarray, lag: int = 1) -> float:
    """The autocorrelation at one lag (``autocorrelations``)."""
    return 0.0 if lag < 1 else float(autocorrelations(values, lag)[lag - 1])


def lag1(values: np.ndarray) -> float:
    """The lag-1 autocorrelation (``autocorrelation(values, 1)``)."""
    return autocorrelation(values, 1)


def autocorrelation_inflation(r_factor: float, r_outcome: float) -> float:
    """Variance inflation of a difference of means when both the factor and the outcome are
    autocorrelated, for two AR(1) series (Bartlett: (1 + rx ry) / (1 - rx ry)). Never below
    1: a negative product does not shrink the interval."""
    p = max(-0.95, min(0.95, r_factor)) * max(-0.95, min(0.95, r_outcome))
    if p <= 0:
        return 1.0
    p = min(p, 0.9)
    return (1.0 + p) / (1.0 - p)


MAX_INFLATION = 19.0  # (1 + 0.9) / (1 - 0.9)


def inflation(factor: np.ndarray, residuals: np.ndarray, max_lag: int = 7) -> float:
    """How much autocorrelated days widen the interval: the larger of the AR(1) formula and
    Bartlett's sum over the first ``max_lag`` lags, 1 + 2 sum_k r_x(k) r_y(k) (a week: the
    meters' 7-day signals fade over a week, not geometrically). Between 1 and MAX_INFLATION.
    ``factor`` is 1/0 (NaN unknown), ``residuals`` the outcome minus its arm's mean."""
    rx, ry = autocorrelations(factor, max_lag), autocorrelations(residuals, max_lag)
    ar1 = autocorrelation_inflation(float(rx[0]), float(ry[0]))
    total = 1.0 + 2.0 * float(rx @ ry)
    return min(MAX_INFLATION, max(1.0, ar1, total))


# -- the comparison ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Welch:
    effect: float  # mean(with) - mean(without)
    se: float
    df: float
    ci95: tuple[float, float]
    p_value: float
    sd_pooled: float
    sd_with: float  # each arm's standard deviation as used (floored at the pooled one)
    sd_without: float


def welch(with_: Sequence[float] | np.ndarray, without: Sequence[float] | np.ndarray,
          inflation: float = 1.0) -> Welch | None:
    """Welch's t comparison of two samples, each arm's variance floored at the pooled
    variance (conservative: never narrower than Welch's or Student's interval); the variance
    is multiplied (and the degrees of freedom divided) by ``inflation``. None when either sample has fewer than two values or
    both have no spread (nothing to test)."""
    a = np.asarray(with_, dtype=float)
    b = np.asarray(without, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        return None
    m1, m2 = float(a.mean()), float(b.mean())
    v1, v2 = float(a.var(ddof=1)), float(b.var(ddof=1))
    pooled_var = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
    # Each arm's variance is at least the pooled one: three days that happen to agree would
    # otherwise give a tiny standard error with the other arm's many degrees of freedom.
    # The degrees of freedom stay Welch's (each arm's n - 1): conservative for a small arm.
    s1, s2 = max(v1, pooled_var) / n1, max(v2, pooled_var) / n2
    if s1 + s2 <= 0:
        return None
    se = math.sqrt((s1 + s2) * inflation)
    df = (s1 + s2) ** 2 / ((s1 * s1) / (n1 - 1) + (s2 * s2) / (n2 - 1))
    df = max(1.0, df / inflation)
    effect = m1 - m2
    t = effect / se
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    half = _t975(round(df, 2)) * se
    return Welch(effect, se, df, (effect - half, effect + half), p, math.sqrt(pooled_var),
                 math.sqrt(s1 * n1), math.sqrt(s2 * n2))


def bh_qvalues(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order."""
    m = len(p_values)
    if m == 0:
        return []
    order = sorted(range(m), key=lambda i: p_values[i])
    q = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        q[i] = min(1.0, running)
    return q


def days_for_power(
    effect: float, sd_with: float, sd_without: float, n_with: int, n_without: int,
    alpha: float, power: float = 0.8, inflation: float = 1.0, df: float = math.inf,
) -> tuple[int, int] | None:
    """More days (with, without) for a two-sided test at ``alpha`` to have ``power`` against
    ``effect``, keeping today's mix of days with and without the factor (the t quantile at
    today's degrees of freedom ``df``; at least one more day). None when the effect is 0."""
    if effect == 0 or not math.isfinite(effect):
        return None
    k = t_ppf(1 - alpha / 2, df) + _NORMAL.inv_cdf(power)
    share = n_with / (n_with + n_without)
    # SE^2 = (v1/(N s) + v2/(N (1-s))) * inflation; solve |effect| / SE = k for N.
    need = (k / abs(effect)) ** 2 * inflation * (sd_with**2 / share + sd_without**2 / (1 - share))
    total = math.ceil(need)
    more_with = max(0, math.ceil(total * share) - n_with)
    more_without = max(0, math.ceil(total * (1 - share)) - n_without)
    if more_with + more_without == 0:  # asked only for effects not yet found: one more at least
        return (1, 0) if n_with <= n_without else (0, 1)
    return more_with, more_without
