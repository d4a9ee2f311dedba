"""The physical ranges every stored value must lie in, whatever its source (issue 41).

One table, shared by every connector and applied once, by the writer (storage/writer.py),
before anything is stored: a value that is NaN, infinite, negative where a quantity cannot
be, or beyond what a human body does (a heart rate of 900, 1e308 steps) is *rejected*: a
sample carrying it is not stored; a sleep or workout keeps its row with that field missing
(None: never a made-up value). Each rejection is counted in the import's summary
(``WriteSummary.rejected``, the CLI's "rejected as impossible" line).

The limits are wide on purpose (an ultramarathon, a 20-hour sleep, a week-long exercise
tally): they catch damaged and hostile data, not unusual days. docs/limits.md lists them.
"""

from __future__ import annotations

import math

# (lowest, highest) accepted, inclusive. None: no bound on that side (finite still required).
HEART_RATE = (0.0, 300.0)  # bpm
HRV = (0.0, 3_000.0)  # ms
ENERGY = (0.0, 50_000.0)  # kcal in one sample, day or workout
DISTANCE = (0.0, 1_000_000.0)  # m: 1,000 km
STEPS = (0.0, 500_000.0)  # in one sample or day
DAY_MINUTES = (0.0, 1_440.0)  # minutes asleep (or in one stage) in one night
LONG_MINUTES = (0.0, 10_080.0)  # a week: in bed, awake, a workout, an exercise tally
PERCENT = (0.0, 100.0)
BREATHS = (0.0, 100.0)  # breaths per minute

#: samples.metric -> range of samples.value (metrics not named here: finite only).
METRICS: dict[str, tuple[float | None, float | None]] = {
    "heart_rate": HEART_RATE,
    "resting_heart_rate": HEART_RATE,
    "walking_heart_rate": HEART_RATE,
    "hrv_sdnn": HRV,
    "hrv_rmssd": HRV,
    "rr_interval": (0.0, 5_000.0),
    "steps": STEPS,
    "active_energy": ENERGY,
    "basal_energy": ENERGY,
    "total_energy": ENERGY,
    "distance": DISTANCE,
    "exercise_time": LONG_MINUTES,
    "mindful": LONG_MINUTES,
    "sleep_stage": DAY_MINUTES,
    "intensity_minutes": LONG_MINUTES,
    "respiratory_rate": BREATHS,
    "spo2": PERCENT,
    "floors": (0.0, 10_000.0),
}

#: (table, column) -> range, for the typed rows of sleeps and workouts.
FIELDS: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "sleep_sessions": {
        "sleep_min": DAY_MINUTES, "light_min": DAY_MINUTES, "deep_min": DAY_MINUTES, "rem_min": DAY_MINUTES,
        "in_bed_min": LONG_MINUTES, "awake_min": LONG_MINUTES, "efficiency_pct": PERCENT,
        "respiratory_rate_brpm": BREATHS, "hrv_rmssd_ms": HRV, "resting_hr_bpm": HEART_RATE, "score": (None, None),
    },
    "workouts": {
        "duration_min": LONG_MINUTES, "energy_kcal": ENERGY, "distance_m": DISTANCE,
        "avg_hr_bpm": HEART_RATE, "max_hr_bpm": HEART_RATE, "strain": (None, None),
    },
}


def problem(value: float | None, bounds: tuple[float | None, float | None]) -> str | None:
    """Why ``value`` cannot be stored ("NaN or infinite", "negative", "above 300"), or None."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "not a number"
    if not math.isfinite(v):
        return "NaN or infinite"
    lo, hi = bounds
    if lo is not None and v < lo:
        return "negative" if lo == 0 else f"below {lo:g}"
    if hi is not None and v > hi:
        return f"above {hi:g}"
    return None


def metric_problem(metric: str, value: float | None) -> str | None:
    """Why a sample of ``metric`` with ``value`` cannot be stored, or None."""
    return problem(value, METRICS.get(metric, (None, None)))


def describe() -> list[tuple[str, str]]:
    """(what, accepted range) rows for the docs and `--help`."""
    def text(b: tuple[float | None, float | None]) -> str:
        lo, hi = b
        return f"{'-inf' if lo is None else f'{lo:g}'} .. {'inf' if hi is None else f'{hi:g}'}"

    rows = [(f"samples: {m}", text(b)) for m, b in METRICS.items()]
    rows += [(f"{t}.{c}", text(b)) for t, cols in FIELDS.items() for c, b in cols.items()]
    return rows
