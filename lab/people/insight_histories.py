"""Generated day tables for the insights statistics: factors and meters, with or without
planted effects. Fed straight to ``mapping.insights.compare`` (fast, no database).

Realistic on purpose where it matters for false findings: meters drift from day to day
(AR(1)), day means are the means of the slots, the body measures have their own units, some
days are missing, and factors come in streaks (a factor tends to repeat the next day).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from common.records import METERS, SLOTS
from mapping.insights import (
    MEASURES,
    OUTCOME_BY_NAME,
    DailyTable,
    Factor,
    default_factors,
    parse_factor,
)

START = date(2024, 1, 1)
MEASURE_LEVELS = {"sleep_min": (420.0, 40.0), "hrv_rmssd_ms": (45.0, 8.0), "hrv_sdnn_ms": (50.0, 9.0),
                  "resting_hr_bpm": (58.0, 3.0)}


@dataclass(frozen=True)
class Planted:
    factor: str  # a factor expression
    outcome: str  # a slot meter ("serenity@morning") or a measure ("sleep_min")
    lag: int
    delta: float


def _series(rng: np.random.Generator, n: int, mu: float, sd: float, rho: float) -> np.ndarray:
    e = rng.normal(0.0, sd * np.sqrt(1 - rho * rho), n)
    y = np.empty(n)
    y[0] = mu + rng.normal(0.0, sd)
    for i in range(1, n):
        y[i] = mu + rho * (y[i - 1] - mu) + e[i]
    return y


def _factor_days(rng: np.random.Generator, n: int, rate: float, persistence: float) -> np.ndarray:
    """A yes/no series with the given rate where each day repeats yesterday with probability
    ``persistence`` (else a fresh draw)."""
    x = np.empty(n, dtype=bool)
    x[0] = rng.random() < rate
    for i in range(1, n):
        x[i] = x[i - 1] if rng.random() < persistence else rng.random() < rate
    return x


def history(
    seed: int,
    days: int = 120,
    planted: Sequence[Planted] = (),
    extra_factors: Sequence[str] = ("title:Choir",),
    persistence: float = 0.3,
    rho: float = 0.5,
    meter_sd: float = 0.08,
    missing: float = 0.05,
    rates: dict[str, float] | None = None,
) -> DailyTable:
    rng = np.random.default_rng(seed)
    factors: list[Factor] = default_factors() + [parse_factor(e) for e in extra_factors]
    n_out = days + 1
    first, last = START, START + timedelta(days=days - 1)
    fvals: dict[Factor, np.ndarray] = {}
    known: dict[Factor, np.ndarray] = {}
    for f in factors:
        rate = (rates or {}).get(f.name, float(rng.uniform(0.05, 0.6)))
        fvals[f] = _factor_days(rng, days, rate, persistence)
        known[f] = rng.random(days) >= missing
    slot_vals = {(m, s): np.clip(_series(rng, n_out, 0.5, meter_sd, rho), 0, 1) for m in METERS for s in SLOTS}
    measures = {name: _series(rng, n_out, *MEASURE_LEVELS[name], rho) for name, _ in MEASURES}
    by_name = {f.name: f for f in factors}
    for p in planted:
        x = fvals[by_name[parse_factor(p.factor).name]]
        target = slot_vals[tuple(p.outcome.split("@"))] if "@" in p.outcome else measures[p.outcome]
        for i in np.flatnonzero(x):
            if i + p.lag < n_out:
                target[i + p.lag] += p.delta
    for k in slot_vals:
        slot_vals[k] = np.clip(slot_vals[k], 0, 1)
    day = [first + timedelta(days=i) for i in range(n_out)]
    outcomes: dict = {o: {} for o in OUTCOME_BY_NAME.values()}
    present = {k: rng.random(n_out) >= missing for k in [*slot_vals, *measures]}
    for (m, s), v in slot_vals.items():
        for i in np.flatnonzero(present[(m, s)]):
            outcomes[OUTCOME_BY_NAME[f"{m}@{s}"]][day[i]] = float(v[i])
    for m in METERS:
        for i in range(n_out):
            vals = [slot_vals[(m, s)][i] for s in SLOTS if present[(m, s)][i]]
            if len(vals) >= 2:
                outcomes[OUTCOME_BY_NAME[m]][day[i]] = float(np.mean(vals))
    for name, v in measures.items():
        for i in np.flatnonzero(present[name]):
            outcomes[OUTCOME_BY_NAME[name]][day[i]] = float(v[i])
    table = {f: {day[i]: bool(fvals[f][i]) for i in range(days) if known[f][i]} for f in factors}
    return DailyTable(first, last, table, outcomes)
