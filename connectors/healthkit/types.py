"""Apple Health vocabulary: type identifiers -> metric names, unit conversions, sleep stages.

Pure tables and small pure functions; no I/O. Unknown identifiers are kept (never
dropped) under a snake_case name derived from the identifier, with Apple's own unit.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from functools import lru_cache

QUANTITY_PREFIX = "HKQuantityTypeIdentifier"
CATEGORY_PREFIX = "HKCategoryTypeIdentifier"
_PREFIXES = (QUANTITY_PREFIX, CATEGORY_PREFIX, "HKDataType", "HKCorrelationTypeIdentifier")

_KCAL = {"kcal": 1.0, "Cal": 1.0, "kJ": 1 / 4.184, "cal": 0.001, "J": 1 / 4184}
_MIN = {"min": 1.0, "s": 1 / 60, "hr": 60.0, "ms": 1 / 60000}
_METRE = {"m": 1.0, "km": 1000.0, "mi": 1609.344, "ft": 0.3048, "yd": 0.9144, "cm": 0.01}
_BPM = {"count/min": 1.0, "count/s": 60.0}
_COUNT = {"count": 1.0}

# HK identifier (without prefix) -> (metric, stored unit, {apple unit: factor}).
# Apple units not listed are stored unconverted with Apple's unit string.
QUANTITY_TYPES: dict[str, tuple[str, str, dict[str, float]]] = {
    "HeartRate": ("heart_rate", "bpm", _BPM),
    "RestingHeartRate": ("resting_heart_rate", "bpm", _BPM),
    "WalkingHeartRateAverage": ("walking_heart_rate", "bpm", _BPM),
    "HeartRateVariabilitySDNN": ("hrv_sdnn", "ms", {"ms": 1.0, "s": 1000.0}),
    "StepCount": ("steps", "count", _COUNT),
    "ActiveEnergyBurned": ("active_energy", "kcal", _KCAL),
    "BasalEnergyBurned": ("basal_energy", "kcal", _KCAL),
    "AppleExerciseTime": ("exercise_time", "min", _MIN),
    "RespiratoryRate": ("respiratory_rate", "brpm", _BPM),
    "OxygenSaturation": ("spo2", "pct", {"%": 100.0}),  # Apple stores a 0-1 fraction
    "DistanceWalkingRunning": ("distance", "m", _METRE),
    "DistanceCycling": ("distance_cycling", "m", _METRE),
    "DistanceSwimming": ("distance_swimming", "m", _METRE),
    "DistanceWheelchair": ("distance_wheelchair", "m", _METRE),
    "DistanceDownhillSnowSports": ("distance_downhill_snow_sports", "m", _METRE),
    "FlightsClimbed": ("floors", "count", _COUNT),
    "VO2Max": ("vo2max", "ml/kg/min", {"mL/min·kg": 1.0, "ml/(kg*min)": 1.0}),
    "BodyMass": ("weight", "kg", {"kg": 1.0, "lb": 0.45359237, "g": 0.001, "st": 6.35029318}),
}

# Metrics whose samples are amounts per interval (summed for daily totals); the
# source-priority rule of storage/views/healthkit_daily_totals.sql applies to these.
CUMULATIVE_METRICS = (
    "steps",
    "active_energy",
    "basal_energy",
    "distance",
    "exercise_time",
    "floors",
)

SLEEP_TYPE = "HKCategoryTypeIdentifierSleepAnalysis"
MINDFUL_TYPE = "HKCategoryTypeIdentifierMindfulSession"
STAND_HOUR_TYPE = "HKCategoryTypeIdentifierAppleStandHour"
HRV_TYPE = "HKQuantityTypeIdentifierHeartRateVariabilitySDNN"

# HKCategoryValueSleepAnalysis* -> stage name stored in samples.detail.
SLEEP_STAGES = {
    "HKCategoryValueSleepAnalysisInBed": "in_bed",
    "HKCategoryValueSleepAnalysisAsleepUnspecified": "asleep_unspecified",
    "HKCategoryValueSleepAnalysisAsleep": "asleep",  # pre-iOS 16 (deprecated value)
    "HKCategoryValueSleepAnalysisAwake": "awake",
    "HKCategoryValueSleepAnalysisAsleepCore": "core",
    "HKCategoryValueSleepAnalysisAsleepDeep": "deep",
    "HKCategoryValueSleepAnalysisAsleepREM": "rem",
    # Very old exports wrote the raw enum numbers.
    "0": "in_bed",
    "1": "asleep",
    "2": "awake",
    "3": "core",
    "4": "deep",
    "5": "rem",
}
ASLEEP_STAGES = frozenset({"asleep_unspecified", "asleep", "core", "deep", "rem"})

_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(identifier: str) -> str:
    """`HKQuantityTypeIdentifierWalkingSpeed` -> `walking_speed`."""
    for p in _PREFIXES:
        if identifier.startswith(p):
            identifier = identifier[len(p) :]
            break
    return _SNAKE.sub("_", identifier).lower().replace(" ", "_")


@lru_cache(maxsize=4096)
def quantity_mapping(hk_type: str, unit: str | None) -> tuple[str, str | None, float]:
    """(metric, stored unit, factor) for a quantity Record's type and Apple unit."""
    short = hk_type[len(QUANTITY_PREFIX) :] if hk_type.startswith(QUANTITY_PREFIX) else hk_type
    known = QUANTITY_TYPES.get(short)
    if known is None:
        return snake(hk_type), unit, 1.0
    metric, stored, factors = known
    if unit in factors:
        return metric, stored, factors[unit]
    return metric, unit, 1.0  # an unexpected unit: keep it as given rather than guess


def metric_for(hk_type: str) -> str:
    if hk_type == SLEEP_TYPE:
        return "sleep_stage"
    if hk_type == MINDFUL_TYPE:
        return "mindful"
    if hk_type == STAND_HOUR_TYPE:
        return "stand_hour"
    if hk_type.startswith(QUANTITY_PREFIX):
        return quantity_mapping(hk_type, None)[0]
    return snake(hk_type)


@lru_cache(maxsize=1024)
def parse_device(text: str | None) -> str | None:
    """The HKDevice description without its memory address (which changes per record).

    `<<HKDevice: 0x283a8a5d0>, name:Apple Watch, model:Watch, ...>` ->
    `name:Apple Watch, model:Watch, ...`; free-text devices are kept as they are.
    """
    if not text:
        return None
    t = text.strip()
    if t.startswith("<<HKDevice"):
        close = t.find(">,")
        t = t[close + 2 :].strip() if close >= 0 else t[2:]
        if t.endswith(">"):
            t = t[:-1]
    return t or None


@lru_cache(maxsize=64)
def _tz(minutes: int) -> timezone:
    return timezone(timedelta(minutes=minutes))


@lru_cache(maxsize=65536)
def parse_date(text: str) -> tuple[datetime, int | None]:
    """`2021-01-01 01:21:35 +0200` -> (aware datetime in that offset, offset minutes).

    Raises ValueError on anything else. A missing offset is read as UTC with offset None.
    """
    s = text.strip()
    if len(s) < 19 or s[4] != "-" or s[7] != "-" or s[13] != ":" or s[16] != ":":
        raise ValueError(f"unrecognised date {text!r}")
    y, mo, d = int(s[0:4]), int(s[5:7]), int(s[8:10])
    h, mi, se = int(s[11:13]), int(s[14:16]), int(s[17:19])
    tail = s[19:].strip()
    if not tail:
        return datetime(y, mo, d, h, mi, se, tzinfo=UTC), None
    if tail in ("Z", "UTC", "GMT"):
        return datetime(y, mo, d, h, mi, se, tzinfo=UTC), 0
    if len(tail) not in (5, 6) or tail[0] not in "+-":
        raise ValueError(f"unrecognised UTC offset in {text!r}")
    digits = tail[1:].replace(":", "")
    off = int(digits[:2]) * 60 + int(digits[2:4])
    off = -off if tail[0] == "-" else off
    return datetime(y, mo, d, h, mi, se, tzinfo=_tz(off)), off


def local_day(dt: datetime) -> date:
    """Calendar day of an aware datetime in its own (recorded) offset."""
    return dt.date()
