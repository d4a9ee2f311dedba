"""The rolling robust baseline: median and MAD of the days before, population fallback."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.baseline import baselines_for, robust_baseline, rolling_baselines, window_days
from mapping.rules import default_rules

RULES = default_rules()
MODEL = RULES.model
SLEEP = RULES.signals["sleep_min"]
STEPS = RULES.signals["steps"]


def test_median_and_scaled_mad_of_the_history():
    b = robust_baseline([400, 420, 440, 460, 480, None, 10_000], SLEEP, 0, MODEL)
    assert b.personal and b.n == 6
    assert b.median == 450.0
    # |x - 450| = 50, 30, 10, 10, 30, 9550 -> MAD 30: the outlier barely moves it
    assert b.scale == MODEL.mad_to_sd * 30.0


def test_few_days_fall_back_to_the_population_reference():
    b = robust_baseline([400, 420, None, None], SLEEP, 0, MODEL)
    assert not b.personal
    assert (b.median, b.scale) == (SLEEP.ref_median[0], SLEEP.ref_scale)


def test_flat_history_is_floored_not_infinitely_sure():
    b = robust_baseline([450.0] * 20, SLEEP, 0, MODEL)
    assert b.scale == MODEL.scale_floor * SLEEP.ref_scale


def test_slot_reference_differs_per_slot():
    assert robust_baseline([], STEPS, 3, MODEL).median == STEPS.ref_median[3]
    assert robust_baseline([], STEPS, 0, MODEL).median == STEPS.ref_median[0]


def test_the_day_itself_is_excluded_and_the_window_is_28_days():
    day = date(2024, 3, 1)
    days = window_days(day, MODEL)
    assert len(days) == 28 and day not in days and days[-1] == day - timedelta(days=1)
    history = {(d, 0): {"sleep_min": 400.0} for d in days}
    history[(day, 0)] = {"sleep_min": 100.0}  # a terrible night does not pull its own baseline
    history[(day - timedelta(days=29), 0)] = {"sleep_min": 1.0}  # outside the window
    b = baselines_for(day, 0, history, {"sleep_min": SLEEP}, MODEL)["sleep_min"]
    assert b.median == 400.0 and b.n == 28


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(200, 700)), min_size=1, max_size=60))
def test_rolling_equals_the_one_at_a_time_definition(series):
    rolled = rolling_baselines(series, SLEEP, 0, MODEL)
    for i, b in enumerate(rolled):
        ref = robust_baseline(series[max(0, i - MODEL.baseline_days) : i], SLEEP, 0, MODEL)
        assert b.personal == ref.personal and b.n == ref.n
        assert np.isclose(b.median, ref.median) and np.isclose(b.scale, ref.scale)
