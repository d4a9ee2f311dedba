"""Rolling robust personal baseline: median and MAD of the previous days. Pure.

A meter of 0.5 means "usual for you". "Usual" is the median of the signal over the
``baseline_days`` (28) days *before* the day (the day itself is excluded, so a bad day does
not pull its own reference), and the spread is the MAD scaled to a standard deviation
(x 1.4826), floored at ``scale_floor`` x the population scale so that a flat history does not
turn a tiny change into an extreme score. With fewer than ``min_baseline_days`` present
values the population reference of the rules table is used instead, and signals scored
against it count ``population_quality`` (0.5) towards the meter's confidence.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from mapping.rules import Model, Signal


@dataclass(frozen=True)
class Baseline:
    median: float
    scale: float
    n: int  # present values in the window
    personal: bool  # False: the population reference

    def z(self, x: float) -> float:
        return (x - self.median) / self.scale

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            "median": round(self.median, 4),
            "scale": round(self.scale, 4),
            "n": self.n,
            "personal": self.personal,
        }


def robust_baseline(
    history: Iterable[float | None], signal: Signal, slot: int, model: Model
) -> Baseline:
    """Baseline of one signal (at one slot) from its past values; ``None`` = missing."""
    vals = np.array([float(v) for v in history if v is not None and np.isfinite(v)], dtype=float)
    floor = model.scale_floor * signal.ref_scale
    if vals.size < model.min_baseline_days:
        return Baseline(signal.ref_median[slot], signal.ref_scale, int(vals.size), False)
    med = float(np.median(vals))
    mad = float(np.median(np.abs(vals - med)))
    return Baseline(med, max(model.mad_to_sd * mad, floor), int(vals.size), True)


def window_days(day: date, model: Model) -> list[date]:
    """The days whose values form ``day``'s baseline: the ``baseline_days`` days before it."""
    return [day - timedelta(days=k) for k in range(model.baseline_days, 0, -1)]


def baselines_for(
    day: date,
    slot: int,
    history: Mapping[tuple[date, int], Mapping[str, float]],
    signals: Mapping[str, Signal],
    model: Model,
) -> dict[str, Baseline]:
    """Every signal's baseline for ``(day, slot)``.

    ``history[(d, s)]`` holds the signals present at day d, slot s. Slot-scope signals are
    compared with the same slot on earlier days ("usual for you at this time of day");
    day-scope signals with earlier days.
    """
    days = window_days(day, model)
    out = {}
    for name, sig in signals.items():
        s = slot if sig.scope == "slot" else 0
        vals = [history.get((d, s), {}).get(name) for d in days]
        out[name] = robust_baseline(vals, sig, slot, model)
    return out


def rolling_baselines(
    series: Sequence[float | None], signal: Signal, slot: int, model: Model
) -> list[Baseline]:
    """Baseline of every position of a daily series, vectorised.

    ``series[i]`` is the signal on day i (None or NaN = missing); the result's element i is
    ``robust_baseline(series[i - baseline_days : i])`` (positions before 0 count as missing).
    """
    x = np.array([np.nan if v is None else float(v) for v in series], dtype=float)
    k = model.baseline_days
    padded = np.concatenate([np.full(k, np.nan), x])
    win = np.lib.stride_tricks.sliding_window_view(padded, k)[: len(x)]  # (n, k): days i-k..i-1
    n = np.sum(~np.isnan(win), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: handled below
        med = np.nanmedian(win, axis=1)
        mad = np.nanmedian(np.abs(win - med[:, None]), axis=1)
    floor = model.scale_floor * signal.ref_scale
    out = []
    for i in range(len(x)):
        if n[i] < model.min_baseline_days:
            out.append(Baseline(signal.ref_median[slot], signal.ref_scale, int(n[i]), False))
        else:
            out.append(
                Baseline(float(med[i]), max(model.mad_to_sd * float(mad[i]), floor), int(n[i]), True)
            )
    return out
