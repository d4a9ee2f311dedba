"""Health Auto Export metric names and units -> Rhythm metrics in common.records.METRIC_UNITS.

The app names a metric in JSON by its snake-case name (``step_count``) and in CSV by its
display name and unit (``Step Count (count)``, ``Heart Rate [Avg] (count/min)``). Each known
metric maps to one Rhythm metric; its value is converted from the unit the app wrote (which
follows the phone's unit settings: kJ or kcal, km or mi, degF or degC, ...) to the unit the
metric is stored in. Unknown metrics (nutrition, audio exposure, ...) are kept raw only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.records import METRIC_UNITS


@dataclass(frozen=True)
class MetricSpec:
    metric: str  # Rhythm metric (samples.metric)
    kind: str  # unit family: a key of UNITS
    cumulative: bool  # amounts per interval (summed per day); else instants/averages


# HAE JSON name -> spec. Names follow the app's documented metric list.
JSON_METRICS: dict[str, MetricSpec] = {
    "step_count": MetricSpec("steps", "count", True),
    "active_energy": MetricSpec("active_energy", "energy", True),
    "basal_energy_burned": MetricSpec("basal_energy", "energy", True),
    "resting_energy": MetricSpec("basal_energy", "energy", True),
    "apple_exercise_time": MetricSpec("exercise_time", "minutes", True),
    "apple_stand_hour": MetricSpec("stand_hour", "count", True),
    "walking_running_distance": MetricSpec("distance", "distance", True),
    "flights_climbed": MetricSpec("floors", "count", True),
    "mindful_minutes": MetricSpec("mindful", "minutes", True),
    "heart_rate": MetricSpec("heart_rate", "rate", False),
    "resting_heart_rate": MetricSpec("resting_heart_rate", "rate", False),
    "walking_heart_rate_average": MetricSpec("walking_heart_rate", "rate", False),
    "heart_rate_variability": MetricSpec("hrv_sdnn", "ms", False),  # Apple's HRV is SDNN
    "respiratory_rate": MetricSpec("respiratory_rate", "rate", False),
    "blood_oxygen_saturation": MetricSpec("spo2", "percent", False),
    "apple_sleeping_wrist_temperature": MetricSpec("skin_temp", "temperature", False),
    "vo2_max": MetricSpec("vo2max", "vo2", False),
    "weight_body_mass": MetricSpec("weight", "mass", False),
}
SLEEP = "sleep_analysis"

# CSV display name (lower case, without "[...]" and "(unit)") -> JSON name.
CSV_NAMES: dict[str, str] = {
    "step count": "step_count",
    "active energy": "active_energy",
    "resting energy": "basal_energy_burned",
    "basal energy burned": "basal_energy_burned",
    "apple exercise time": "apple_exercise_time",
    "apple stand hour": "apple_stand_hour",
    "walking + running distance": "walking_running_distance",
    "flights climbed": "flights_climbed",
    "mindful minutes": "mindful_minutes",
    "heart rate": "heart_rate",
    "resting heart rate": "resting_heart_rate",
    "walking heart rate average": "walking_heart_rate_average",
    "heart rate variability": "heart_rate_variability",
    "respiratory rate": "respiratory_rate",
    "blood oxygen saturation": "blood_oxygen_saturation",
    "apple sleeping wrist temperature": "apple_sleeping_wrist_temperature",
    "vo2 max": "vo2_max",
    "weight & body mass": "weight_body_mass",
    "weight": "weight_body_mass",
    "body mass": "weight_body_mass",
    "sleep analysis": SLEEP,
}

# Unit family -> {unit as written (normalised by unit_key) -> (scale, offset)}: stored value
# = written * scale + offset, in the metric's METRIC_UNITS unit.
KCAL_PER_KJ = 1 / 4.184
UNITS: dict[str, dict[str, tuple[float, float]]] = {
    "count": {"count": (1, 0), "steps": (1, 0), "hr": (1, 0), "hours": (1, 0)},  # stand hours as "hr"
    "energy": {"kcal": (1, 0), "cal": (1, 0), "kj": (KCAL_PER_KJ, 0)},  # "Cal" (capital) = kcal
    "minutes": {"min": (1, 0), "hr": (60, 0), "h": (60, 0), "s": (1 / 60, 0), "sec": (1 / 60, 0)},
    "distance": {"m": (1, 0), "km": (1000, 0), "mi": (1609.344, 0), "yd": (0.9144, 0), "ft": (0.3048, 0)},
    "rate": {"count/min": (1, 0), "bpm": (1, 0), "beats/min": (1, 0), "breaths/min": (1, 0), "brpm": (1, 0),
             "/min": (1, 0)},
    "ms": {"ms": (1, 0), "s": (1000, 0)},
    "percent": {"%": (1, 0)},
    "temperature": {"degc": (1, 0), "°c": (1, 0), "c": (1, 0),
                    "degf": (5 / 9, -32 * 5 / 9), "°f": (5 / 9, -32 * 5 / 9), "f": (5 / 9, -32 * 5 / 9)},
    "vo2": {"ml/(kg·min)": (1, 0), "ml/kg/min": (1, 0), "ml/(kg*min)": (1, 0), "ml/min·kg": (1, 0),
            "ml/(min·kg)": (1, 0), "ml/kg·min": (1, 0)},
    "mass": {"kg": (1, 0), "g": (0.001, 0), "lb": (0.45359237, 0), "lbs": (0.45359237, 0)},
    "hours": {"hr": (60, 0), "h": (60, 0), "min": (1, 0), "s": (1 / 60, 0)},  # sleep durations -> min
}


def unit_key(unit: str) -> str:
    """A unit as written, compared case- and space-insensitively ("Cal" and "kcal" stay apart
    only by letter: both mean kilocalories in Apple Health)."""
    return unit.strip().lower().replace(" ", "")


def conversion(kind: str, unit: str) -> tuple[float, float] | None:
    """(scale, offset) from ``unit`` to the family's stored unit; None when unknown."""
    return UNITS[kind].get(unit_key(unit))


def known_units(kind: str) -> str:
    return ", ".join(UNITS[kind])


_CSV_COLUMN = re.compile(r"^\s*(?P<name>[^\[(]+?)\s*(?:\[(?P<part>[^\]]+)\])?\s*(?:\((?P<unit>.*)\))?\s*$")


def csv_column(header: str) -> tuple[str, str | None, str | None]:
    """``Heart Rate [Avg] (count/min)`` -> ("heart rate", "avg", "count/min")."""
    m = _CSV_COLUMN.match(header)
    if not m:
        return header.strip().lower(), None, None
    part = m.group("part")
    return m.group("name").lower(), part.strip().lower() if part else None, m.group("unit")


def _check() -> None:  # every target metric is in the shared vocabulary
    for spec in JSON_METRICS.values():
        assert spec.metric in METRIC_UNITS, spec.metric


_check()
