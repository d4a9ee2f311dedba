"""Garmin Connect account data export ("Export Your Data", GDPR zip): the wellness JSON files.

Files read (layout in shared/specs/connectors.md A2):

- ``DI_CONNECT/DI-Connect-Wellness/*_sleepData.json``  -> ``SleepSession`` per night
  (``night:<calendarDate>``; calendarDate is the wake-up day) + naps (``nap:<start>``) + a
  ``spo2`` sample for the night average.
- ``DI_CONNECT/DI-Connect-Wellness/*_healthStatusData.json`` -> nightly ``hrv_rmssd``,
  ``heart_rate`` (overnight average), ``spo2``, ``skin_temp_deviation``, ``respiratory_rate``.
  Rows without a value (onboarding) are skipped, never stored as 0.
- ``DI_CONNECT/DI-Connect-Aggregator/UDSFile_*.json`` -> daily ``steps``, ``active_energy``,
  ``basal_energy``, ``distance``, ``resting_heart_rate``, ``intensity_minutes``, ``floors``,
  ``stress`` (allDayStress TOTAL), ``body_battery`` (HIGHEST of the day).

Every JSON object is also landed raw (kinds ``sleep_data``, ``health_status``, ``uds``),
keyed by its calendar date.

Time: export timestamps ending in ``GMT`` are naive ISO strings in UTC. Day-level values
span ``wellnessStartTimeGmt``..``wellnessEndTimeGmt`` when given (offset = Local - Gmt);
otherwise they are stamped 00:00 UTC of ``calendarDate`` .. +1 day with
``tz_offset_min = None``. ``local_day`` is always the file's ``calendarDate``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from common.errors import SourceFormatError
from common.records import RawRecord, Sample, SleepSession
from common.timeutil import in_sane_range, out_of_range_detail
from connectors.screen import READ_ERRORS, describe

SOURCE = "garmin"
SOURCE_NAME = "garmin_connect"  # the same as the live sync, so both paths dedupe to one row

HEALTH_STATUS_METRICS = {
    "HRV": ("hrv_rmssd", "ms"),
    "HR": ("heart_rate", "bpm"),
    "SPO2": ("spo2", "pct"),
    "SKIN_TEMP_C": ("skin_temp_deviation", "degC"),
    "RESPIRATION": ("respiratory_rate", "brpm"),
}


def kind_of(name: str) -> str | None:
    """Which wellness file this is, from its file name (None: not one we read)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    if not base.lower().endswith(".json"):
        return None
    if base.endswith("_sleepData.json"):
        return "sleep_data"
    if base.endswith("_healthStatusData.json"):
        return "health_status"
    if base.startswith("UDSFile_"):
        return "uds"
    return None


class _Bad(ValueError):
    """A field of one JSON object that cannot be read (named in the error)."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}")


def read_json(data: bytes, name: str, kind: str, fetched_at: datetime) -> Iterator[Any]:
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise SourceFormatError(name, f"not UTF-8 JSON: {exc.reason}", f"byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise SourceFormatError(
            name, f"invalid JSON: {exc.msg}", f"line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise SourceFormatError(name, "JSON nested too deeply to read") from None
    rows = doc if isinstance(doc, list) else [doc]
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SourceFormatError(name, f"expected a JSON object, got {type(row).__name__}", f"item {i}")
        try:
            yield from _row(row, kind, fetched_at)
        except _Bad as exc:
            raise SourceFormatError(name, str(exc), f"item {i}") from None
        except READ_ERRORS as exc:  # a field of an unexpected type or shape: one line
            raise SourceFormatError(name, describe(exc), f"item {i}") from exc


def _row(row: dict[str, Any], kind: str, fetched_at: datetime) -> Iterator[Any]:
    day = _date(row.get("calendarDate"))
    if day is None:
        raise _Bad("calendarDate", "missing or not a date")
    if not in_sane_range(day):
        raise _Bad("calendarDate", out_of_range_detail("day", day.isoformat()))
    yield RawRecord(
        source=SOURCE,
        kind=kind,
        natural_key=_raw_key(kind, row, day),
        payload=json.dumps(row, separators=(",", ":"), ensure_ascii=False),
        fetched_at=fetched_at,
    )
    if kind == "sleep_data":
        yield from _sleep(row, day)
    elif kind == "health_status":
        yield from _health_status(row, day)
    elif kind == "uds":
        yield from _uds(row, day)


def _list(row: dict[str, Any], key: str) -> list[Any]:
    """`row[key]` as a list ([] when absent or null); any other type is an error."""
    v = row.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(key, f"expected a list, got {type(v).__name__}")
    return v


def _dict(row: dict[str, Any], key: str) -> dict[str, Any]:
    """`row[key]` as an object ({} when absent or null); any other type is an error."""
    v = row.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Bad(key, f"expected an object, got {type(v).__name__}")
    return v


def _raw_key(kind: str, row: dict[str, Any], day: date) -> str:
    if kind == "sleep_data" and row.get("sleepStartTimestampGMT"):
        return f"{day.isoformat()}:{row['sleepStartTimestampGMT']}"
    return day.isoformat()


# -- parsing helpers ------------------------------------------------------------------------
def _date(v: Any) -> date | None:
    if not isinstance(v, str):
        return None
    try:
        return date.fromisoformat(v[:10])
    except ValueError:
        return None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _gmt(v: Any, field: str = "timestamp") -> datetime | None:
    """'2024-03-01T22:41:00.0' (GMT, no zone) or epoch milliseconds -> aware UTC; an instant
    outside the sane range (common.timeutil) is an error naming `field`."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        try:
            dt = _EPOCH + timedelta(milliseconds=v)
        except (OverflowError, ValueError):  # far past year 9999, NaN, infinite
            raise _Bad(field, out_of_range_detail("epoch milliseconds", repr(v))) from None
    elif isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    else:
        return None
    if not in_sane_range(dt):
        raise _Bad(field, out_of_range_detail("time", repr(v)))
    return dt


def _naive(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        return datetime.fromisoformat(v.strip()).replace(tzinfo=None)
    except ValueError:
        return None


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _min(seconds: Any) -> float | None:
    s = _num(seconds)
    return None if s is None else s / 60.0


def _day_span(row: dict[str, Any], day: date) -> tuple[datetime, datetime, int | None]:
    start = _gmt(row.get("wellnessStartTimeGmt"), "wellnessStartTimeGmt")
    end = _gmt(row.get("wellnessEndTimeGmt"), "wellnessEndTimeGmt")
    if start is not None and end is not None and end >= start:
        local = _naive(row.get("wellnessStartTimeLocal"))
        offset = None
        if local is not None:
            offset = int(round((local - start.replace(tzinfo=None)).total_seconds() / 900) * 15)
        return start, end, offset
    base = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return base, base + timedelta(days=1), None


def _sample(
    metric: str, unit: str, value: float, start: datetime, end: datetime, day: date,
    offset: int | None, detail: str | None = None,
) -> Sample:
    return Sample(
        source=SOURCE,
        metric=metric,
        start_ts=start,
        end_ts=end,
        value=value,
        unit=unit,
        local_day=day,
        source_name=SOURCE_NAME,
        device=None,
        tz_offset_min=offset,
        detail=detail,
    )


# -- the three file kinds -------------------------------------------------------------------
def _sleep(row: dict[str, Any], day: date) -> Iterator[Any]:
    start = _gmt(row.get("sleepStartTimestampGMT"), "sleepStartTimestampGMT")
    end = _gmt(row.get("sleepEndTimestampGMT"), "sleepEndTimestampGMT")
    if start is not None and end is not None and end != start:  # end < start: screened and counted
        stages = [_min(row.get(k)) for k in ("deepSleepSeconds", "lightSleepSeconds", "remSleepSeconds")]
        known = [s for s in stages if s is not None]
        scores = _dict(row, "sleepScores")
        score = _num(scores.get("overallScore"))
        if score is None and isinstance(scores.get("overall"), dict):
            score = _num(scores["overall"].get("value"))
        yield SleepSession(
            source=SOURCE,
            session_id=f"night:{day.isoformat()}",
            start_ts=start,
            end_ts=end,
            local_day=day,
            sleep_min=sum(known) if known else None,
            in_bed_min=(end - start).total_seconds() / 60.0,
            awake_min=_min(row.get("awakeSleepSeconds")),
            light_min=stages[1],
            deep_min=stages[0],
            rem_min=stages[2],
            efficiency_pct=None,
            score=score,
            is_nap=False,
            respiratory_rate_brpm=_num(row.get("averageRespiration")),
            hrv_rmssd_ms=None,
            resting_hr_bpm=None,
            tz_offset_min=None,
            source_name=SOURCE_NAME,
        )
        avg_spo2 = _num(_dict(row, "spo2SleepSummary").get("averageSPO2"))
        if avg_spo2 is not None and avg_spo2 > 0:
            yield _sample("spo2", "pct", avg_spo2, start, end, day, None, detail="sleep average")
    for nap in _list(row, "napList"):
        if not isinstance(nap, dict):
            continue
        ns = _gmt(nap.get("napStartTimestampGMT"), "napList.napStartTimestampGMT")
        ne = _gmt(nap.get("napEndTimestampGMT"), "napList.napEndTimestampGMT")
        if ns is None or ne is None or ne == ns:  # ne < ns: screened and counted
            continue
        nap_min = _min(nap.get("napTimeSec"))
        yield SleepSession(
            source=SOURCE,
            session_id=f"nap:{ns.isoformat()}",
            start_ts=ns,
            end_ts=ne,
            local_day=_nap_day(nap, day),
            sleep_min=nap_min if nap_min is not None else (ne - ns).total_seconds() / 60.0,
            in_bed_min=(ne - ns).total_seconds() / 60.0,
            is_nap=True,
            source_name=SOURCE_NAME,
        )


def _nap_day(nap: dict[str, Any], day: date) -> date:
    d = _date(nap.get("calendarDate")) or day
    if not in_sane_range(d):
        raise _Bad("napList.calendarDate", out_of_range_detail("day", d.isoformat()))
    return d


def _health_status(row: dict[str, Any], day: date) -> Iterator[Sample]:
    base = datetime(day.year, day.month, day.day, tzinfo=UTC)
    for m in _list(row, "metrics"):
        if not isinstance(m, dict):
            continue
        target = HEALTH_STATUS_METRICS.get(str(m.get("type")))
        value = _num(m.get("value"))
        if target is None or value is None:
            continue  # unknown metric type, or an onboarding row without a value
        detail = {
            k: m.get(k)
            for k in ("baselineLowerLimit", "baselineUpperLimit", "status")
            if m.get(k) is not None
        }
        yield _sample(
            target[0], target[1], value, base, base + timedelta(days=1), day, None,
            detail=json.dumps({"health_status": m.get("type"), **detail}, sort_keys=True),
        )


def _uds(row: dict[str, Any], day: date) -> Iterator[Sample]:
    start, end, offset = _day_span(row, day)

    def s(metric: str, unit: str, value: float | None, detail: str | None = None) -> Sample | None:
        if value is None:
            return None
        return _sample(metric, unit, value, start, end, day, offset, detail)

    out = [
        s("steps", "count", _num(row.get("totalSteps"))),
        s("active_energy", "kcal", _num(row.get("activeKilocalories"))),
        s("basal_energy", "kcal", _num(row.get("bmrKilocalories"))),
        s("distance", "m", _num(row.get("totalDistanceMeters"))),
        s("resting_heart_rate", "bpm", _num(row.get("restingHeartRate"))),
        s("floors", "count", _num(row.get("floorsAscended"))),
    ]
    moderate = _num(row.get("moderateIntensityMinutes"))
    vigorous = _num(row.get("vigorousIntensityMinutes"))
    if moderate is not None or vigorous is not None:
        out.append(
            s(
                "intensity_minutes", "min", (moderate or 0.0) + (vigorous or 0.0),
                detail=json.dumps({"moderate": moderate, "vigorous": vigorous}),
            )
        )
    for agg in _list(_dict(row, "allDayStress"), "aggregatorList"):
        if isinstance(agg, dict) and agg.get("type") == "TOTAL":
            level = _num(agg.get("averageStressLevel"))
            if level is not None and level >= 0:  # -1/-2: not enough data
                out.append(s("stress", "score", level, detail="allDayStress TOTAL average"))
    stats = {
        st.get("bodyBatteryStatType"): _num(st.get("statsValue"))
        for st in _list(_dict(row, "bodyBattery"), "bodyBatteryStatList")
        if isinstance(st, dict)
    }
    if stats.get("HIGHEST") is not None:
        out.append(
            s("body_battery", "score", stats["HIGHEST"], detail=json.dumps({"stat": "HIGHEST", **{
                str(k): v for k, v in stats.items()}}, sort_keys=True))
        )
    yield from (x for x in out if x is not None)
