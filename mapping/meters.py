"""The five meters of one (day, slot) from its signals and the person's baseline. Pure.

``compute_meters(signals, baselines, slot)`` follows mapping/rules.toml exactly:

- each present signal becomes ``score = logistic(steepness * direction * z)`` with
  ``z = (x - median) / scale`` from its baseline, so 0.5 is "usual for you";
- a meter is the weighted mean of its present signals' scores (weight x slot weight);
- its confidence is the share of the meter's total weight that is present, where a signal
  scored against the population reference counts only ``population_quality``;
- a meter with no present signal is ``None`` with confidence 0: nothing is invented.

The evidence records, for every meter, each signal used (value, baseline, z, score, weight)
and the signals that were missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mapping.baseline import Baseline
from mapping.rules import METERS, Rules, default_rules


@dataclass(frozen=True)
class MeterResult:
    values: dict[str, float | None]
    confidence: dict[str, float]
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def overall_confidence(self) -> float:
        """Mean confidence over the five meters (a NULL meter counts 0)."""
        return sum(self.confidence.values()) / len(METERS)

    def vector(self) -> list[float | None]:
        return [self.values[m] for m in METERS]


def logistic(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def signal_score(value: float, baseline: Baseline, direction: int, steepness: float) -> float:
    """Score in (0, 1) of one signal value against its baseline; 0.5 at the median."""
    return logistic(steepness * direction * baseline.z(value))


def _rnd(x: float, nd: int = 4) -> float:
    return float(round(x, nd))


def compute_meters(
    signals: Mapping[str, float | None],
    baselines: Mapping[str, Baseline],
    slot: int,
    rules: Rules | None = None,
) -> MeterResult:
    """Meters of one slot. ``signals`` maps signal names to values; absent or None = missing.

    A signal present without a baseline in ``baselines`` is scored against the population
    reference of the rules table.
    """
    rules = rules or default_rules()
    model = rules.model
    values: dict[str, float | None] = {}
    conf: dict[str, float] = {}
    evidence: dict[str, Any] = {}
    for meter in METERS:
        num = den = present_w = total_w = 0.0
        used: dict[str, Any] = {}
        missing: list[str] = []
        for rule in rules.for_meter(meter):
            w = rule.weight * rule.slot_weights[slot]
            if w <= 0:
                continue
            total_w += w
            x = signals.get(rule.signal)
            if x is None or not math.isfinite(float(x)):
                missing.append(rule.signal)
                continue
            sig = rules.signals[rule.signal]
            base = baselines.get(rule.signal) or Baseline(
                sig.ref_median[slot], sig.ref_scale, 0, False
            )
            score = signal_score(float(x), base, rule.direction, model.steepness)
            quality = 1.0 if base.personal else model.population_quality
            num += w * score
            den += w
            present_w += w * quality
            used[rule.signal] = {
                "value": _rnd(float(x), 3),
                "baseline": _rnd(base.median, 3),
                "scale": _rnd(base.scale, 3),
                "baseline_days": base.n,
                "personal": base.personal,
                "z": _rnd(base.z(float(x)), 3),
                "direction": rule.direction,
                "weight": _rnd(w, 3),
                "score": _rnd(score),
            }
        if den > 0:
            values[meter] = min(1.0, max(0.0, num / den))
            conf[meter] = min(1.0, present_w / total_w) if total_w > 0 else 0.0
        else:
            values[meter] = None
            conf[meter] = 0.0
        evidence[meter] = {
            "value": None if values[meter] is None else _rnd(values[meter]),
            "confidence": _rnd(conf[meter]),
            "signals": used,
            "missing": missing,
        }
    return MeterResult(values=values, confidence=conf, evidence=evidence)
