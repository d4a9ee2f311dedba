"""Meters are pure functions of signals and baseline: bounds, monotonicity, missing signals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.baseline import Baseline
from mapping.meters import compute_meters
from mapping.rules import METERS, default_rules, parse_rules

RULES = default_rules()
SIGNALS = sorted(RULES.signals)


def personal(name: str, slot: int = 0, median: float | None = None, scale: float | None = None) -> Baseline:
    sig = RULES.signals[name]
    return Baseline(sig.ref_median[slot] if median is None else median, scale or sig.ref_scale, 28, True)


BASE = {name: personal(name) for name in SIGNALS}
signal_values = st.dictionaries(
    st.sampled_from(SIGNALS), st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
)


@settings(max_examples=200, deadline=None)
@given(signal_values, st.integers(0, 3))
def test_meters_are_in_bounds_or_none_and_confidence_in_unit_interval(signals, slot):
    res = compute_meters(signals, BASE, slot)
    for m in METERS:
        v, c = res.values[m], res.confidence[m]
        assert 0.0 <= c <= 1.0
        if v is None:
            assert c == 0.0
            assert not res.evidence[m]["signals"]
        else:
            assert 0.0 <= v <= 1.0
            assert res.evidence[m]["signals"]  # every value says which signals made it
    assert 0.0 <= res.overall_confidence <= 1.0


@settings(max_examples=100, deadline=None)
@given(signal_values, st.floats(0, 900), st.floats(0, 900), st.integers(0, 3))
def test_more_sleep_never_lowers_vitality_or_cognition(signals, a, b, slot):
    lo, hi = sorted((a, b))
    r_lo = compute_meters({**signals, "sleep_min": lo}, BASE, slot)
    r_hi = compute_meters({**signals, "sleep_min": hi}, BASE, slot)
    for m in ("vitality", "cognition"):
        assert r_hi.values[m] >= r_lo.values[m] - 1e-12


@settings(max_examples=100, deadline=None)
@given(signal_values, st.floats(35, 110), st.floats(35, 110))
def test_higher_resting_hr_never_raises_vitality(signals, a, b):
    lo, hi = sorted((a, b))
    r_lo = compute_meters({**signals, "resting_hr_bpm": lo}, BASE, 0)
    r_hi = compute_meters({**signals, "resting_hr_bpm": hi}, BASE, 0)
    assert r_hi.values["vitality"] <= r_lo.values["vitality"] + 1e-12


@settings(max_examples=100, deadline=None)
@given(signal_values, st.floats(0, 600), st.floats(0, 600), st.integers(0, 3))
def test_more_stress_or_meetings_never_raise_serenity(signals, a, b, slot):
    lo, hi = sorted((a, b))
    for name in ("stress", "meeting_min"):
        r_lo = compute_meters({**signals, name: lo}, BASE, slot)
        r_hi = compute_meters({**signals, name: hi}, BASE, slot)
        assert r_hi.values["serenity"] <= r_lo.values["serenity"] + 1e-12


@settings(max_examples=150, deadline=None)
@given(signal_values, st.sampled_from(SIGNALS), st.integers(0, 3))
def test_removing_a_signal_never_raises_confidence(signals, drop, slot):
    full = compute_meters(signals, BASE, slot)
    less = compute_meters({k: v for k, v in signals.items() if k != drop}, BASE, slot)
    for m in METERS:
        assert less.confidence[m] <= full.confidence[m] + 1e-12


def test_no_signals_no_values():
    res = compute_meters({}, BASE, 0)
    assert all(v is None for v in res.values.values())
    assert res.overall_confidence == 0.0
    assert set(res.evidence["vitality"]["missing"]) == set(RULES.signals_of("vitality"))


def test_none_and_nan_are_missing_not_zero():
    with_none = compute_meters({"sleep_min": None, "steps": float("nan")}, BASE, 0)
    assert with_none.values["vitality"] is None and with_none.values["cognition"] is None


def test_usual_day_is_one_half():
    signals = {name: BASE[name].median for name in SIGNALS}
    res = compute_meters(signals, BASE, 0)
    for m in METERS:
        assert res.values[m] == pytest.approx(0.5)
        assert res.confidence[m] == pytest.approx(1.0)


def test_population_baseline_counts_half_towards_confidence():
    pop = {k: Baseline(b.median, b.scale, 2, False) for k, b in BASE.items()}
    signals = {name: BASE[name].median for name in SIGNALS}
    res = compute_meters(signals, pop, 0)
    assert res.confidence["vitality"] == pytest.approx(RULES.model.population_quality)


def test_one_signal_evidence_records_value_baseline_and_score():
    res = compute_meters({"sleep_min": 390.0}, {"sleep_min": personal("sleep_min", median=450, scale=60)}, 0)
    ev = res.evidence["vitality"]["signals"]["sleep_min"]
    assert ev["value"] == 390.0 and ev["baseline"] == 450.0 and ev["z"] == -1.0
    assert ev["score"] == pytest.approx(1 / (1 + math.exp(1.0)), abs=1e-4)
    assert res.values["vitality"] == pytest.approx(ev["score"], abs=1e-4)
    assert "resting_hr_bpm" in res.evidence["vitality"]["missing"]


def test_slot_weights_come_from_the_table():
    # last night's sleep counts fully in the morning, less at night (rules.toml)
    rule = next(r for r in RULES.for_meter("vitality") if r.signal == "sleep_min")
    assert rule.slot_weights[0] > rule.slot_weights[3]


def test_rules_table_is_validated():
    from common.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_rules({"signals": {}, "rule": [{"meter": "vitality", "signal": "nope", "direction": 1, "weight": 1}]})
    with pytest.raises(ConfigError):
        parse_rules({"signals": {"x": {"scope": "day", "ref_median": 1, "ref_scale": 1}},
                     "rule": [{"meter": "vitality", "signal": "x", "direction": 0, "weight": 1}]})


def test_every_signal_of_the_table_is_documented_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "mapping" / "README.md").read_text()
    for name in RULES.signals:
        assert f"`{name}`" in readme, f"{name} missing from mapping/README.md"
