"""Health Auto Export workouts (JSON export versions 1 and 2, and the CSV export's rows).

A workout's key is ``<start, UTC, to the minute>/<sport>`` (``2024-02-06T15:00Z/outdoor_run``):
the JSON ``id`` (version 2) does not exist in version 1 or in the CSV export, so one workout
exported in any of them, or in overlapping files, is one row. The JSON ``id`` stays in the
raw payload.

Energy (``activeEnergyBurned`` in v2, ``activeEnergy`` as one quantity in v1) is converted to
kcal from kJ; distance to metres from km, mi, yd, ft. Heart rate: the workout's own summary
(``heartRate.avg``/``.max`` in v2, ``avgHeartRate``/``maxHeartRate``), else computed from its
``heartRateData`` (per-minute ``Min``/``Avg``/``Max``, or ``qty`` in v1): the mean of the
averages and the largest maximum. The per-minute data are kept raw, not as samples (they
repeat the heart-rate metric of the same minutes).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from common.records import Workout
from connectors.hae.dates import BadDate, Instant, day_of, parse_instant, to_datetime
from connectors.hae.metrics import conversion, known_units, unit_key
from connectors.hae.series import SOURCE, devices

Fail = Callable[[str, str], Exception]


def sport_of(name: str) -> str:
    """``Traditional Strength Training`` -> ``traditional_strength_training``."""
    out = "".join(ch.lower() if ch.isalnum() else "_" for ch in name.strip())
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_") or "unknown"


def workout_id(start: Instant, sport: str) -> str:
    return f"{datetime.fromtimestamp(start.epoch - start.epoch % 60, UTC):%Y-%m-%dT%H:%MZ}/{sport}"


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _quantity(v: Any, key: str, kind: str, default_unit: str, pos: str, fail: Fail) -> float | None:
    """``{"qty": 3.5, "units": "mi"}`` (or a bare number in ``default_unit``) in the stored unit."""
    if v is None:
        return None
    if isinstance(v, dict):
        qty, unit = v.get("qty"), v.get("units") or default_unit
    else:
        qty, unit = v, default_unit
    if qty is None:
        return None
    q = _number(qty)
    if q is None:
        raise fail(pos, f"{key!r} is not a number: {qty!r}")
    conv = conversion(kind, str(unit))
    if conv is None:
        raise fail(pos, f"{key!r}: unknown unit {unit!r} (known: {known_units(kind)})")
    return q * conv[0] + conv[1]


def _bpm(v: Any) -> float | None:
    if isinstance(v, dict):
        v = v.get("qty")
    return _number(v)


def _heart(obj: dict) -> tuple[float | None, float | None]:
    hr = obj.get("heartRate")
    avg = mx = None
    if isinstance(hr, dict):
        avg, mx = _bpm(hr.get("avg")), _bpm(hr.get("max"))
    avg = avg if avg is not None else _bpm(obj.get("avgHeartRate"))
    mx = mx if mx is not None else _bpm(obj.get("maxHeartRate"))
    data = obj.get("heartRateData")
    if (avg is None or mx is None) and isinstance(data, list) and data:
        avgs = [a for p in data if isinstance(p, dict) and (a := _number(p.get("Avg", p.get("qty")))) is not None]
        maxs = [m for p in data if isinstance(p, dict) and (m := _number(p.get("Max", p.get("qty")))) is not None]
        if avg is None and avgs:
            avg = round(sum(avgs) / len(avgs), 1)
        if mx is None and maxs:
            mx = max(maxs)
    return avg, mx


def from_json(obj: Any, pos: str, fail: Fail) -> Workout:
    if not isinstance(obj, dict):
        raise fail(pos, "a workout must be an object")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail(pos, "a workout needs a 'name'")
    try:
        start = parse_instant(obj.get("start"))
        end = parse_instant(obj.get("end"))
    except BadDate as exc:
        raise fail(pos, f"workout 'start'/'end': {exc}") from None
    if end.epoch < start.epoch:
        raise fail(pos, "workout ends before it starts")
    span_s = end.epoch - start.epoch
    duration = _number(obj.get("duration"))
    if duration is not None and not 0 < duration <= span_s + 60:
        duration = None  # not seconds of this span: the span is what we know
    energy_src = obj.get("activeEnergyBurned")
    if energy_src is None and isinstance(obj.get("activeEnergy"), dict):  # version 1
        energy_src = obj.get("activeEnergy")
    energy = _quantity(energy_src, "activeEnergyBurned", "energy", "kcal", pos, fail)
    distance = _quantity(obj.get("distance"), "distance", "distance", "km", pos, fail)
    avg, mx = _heart(obj)
    sport = sport_of(name)
    return Workout(
        source=SOURCE,
        workout_id=workout_id(start, sport),
        start_ts=to_datetime(start.epoch, start.offset_min),
        end_ts=to_datetime(end.epoch, end.offset_min),
        local_day=day_of(start.day),
        sport=sport,
        duration_min=round((duration if duration is not None else span_s) / 60.0, 3),
        energy_kcal=energy,
        distance_m=distance,
        avg_hr_bpm=avg,
        max_hr_bpm=mx,
        tz_offset_min=start.offset_min,
        source_name=devices(obj.get("source")) or "",
    )


def duration_s(text: str) -> float | None:
    """The CSV ``Duration`` (``01:06:32``, ``1:06:32`` or ``66:32``) in seconds."""
    parts = text.strip().split(":")
    if not text.strip():
        return None
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        return None
    if len(nums) == 3:
        return nums[0] * 3600 + nums[1] * 60 + nums[2]
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return None


def from_csv(row: dict[str, str], start: Instant, end: Instant, pos: str, fail: Fail) -> Workout:
    """A ``Workouts-*.csv`` row (its columns carry their units: ``Distance (km)``)."""
    name = (row.get("Workout Type") or "").strip()
    if not name:
        raise fail(pos, "a workout row needs a 'Workout Type'")
    if end.epoch < start.epoch:
        raise fail(pos, "workout ends before it starts")
    span_s = end.epoch - start.epoch
    duration = duration_s(row.get("Duration") or "")
    if duration is not None and not 0 < duration <= span_s + 60:
        duration = None
    energy = distance = avg = mx = None
    for header, text in row.items():
        if text is None or not text.strip() or "(" not in header:
            continue
        label, _, unit = header.partition("(")
        label, unit = label.strip().lower(), unit.rsplit(")", 1)[0]
        try:
            value = float(text)
        except ValueError:
            raise fail(pos, f"{header!r} is not a number: {text!r}") from None
        if label == "active energy":
            conv = conversion("energy", unit)
            if conv is None:
                raise fail(pos, f"{header!r}: unknown unit {unit!r}")
            energy = value * conv[0]
        elif label == "distance":
            conv = conversion("distance", unit)
            if conv is None:
                raise fail(pos, f"{header!r}: unknown unit {unit!r}")
            distance = value * conv[0]
        elif label in ("avg. heart rate", "avg heart rate", "average heart rate") and unit_key(unit) in ("count/min", "bpm"):
            avg = value
        elif label in ("max. heart rate", "max heart rate", "maximum heart rate") and unit_key(unit) in ("count/min", "bpm"):
            mx = value
    sport = sport_of(name)
    return Workout(
        source=SOURCE,
        workout_id=workout_id(start, sport),
        start_ts=to_datetime(start.epoch, start.offset_min),
        end_ts=to_datetime(end.epoch, end.offset_min),
        local_day=day_of(start.day),
        sport=sport,
        duration_min=round((duration if duration is not None else span_s) / 60.0, 3),
        energy_kcal=energy if energy else None,
        distance_m=distance if distance else None,
        avg_hr_bpm=avg if avg else None,
        max_hr_bpm=mx if mx else None,
        tz_offset_min=start.offset_min,
    )
