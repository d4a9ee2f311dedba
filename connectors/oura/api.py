"""Oura API v2: daily sleep, sleep periods, readiness, heart rate, activity, workouts, stress.

`fetch(plan, client)` yields records and, after the last page of each stream, a
`Checkpoint` with the stream's new cursor. No database code (STYLE rule 2).

- Collections answer `{data: [...], next_token}`; the token goes back as `next_token` with
  the same other parameters, until it is null.
- Every stream but heart rate is filtered by `start_date`/`end_date`; heart rate by
  `start_datetime`/`end_datetime`, fetched in windows of at most 30 days.
- Oura's date filters are uneven (community reports, see README): `sleep` treats
  `start_date` as exclusive, the daily collections read a date-only `end_date` as midnight
  and drop that day. The plan therefore asks for one day more on each side; what comes back
  twice is upserted on its natural key.
- Units: durations in seconds (-> minutes), energy in kcal, distance in metres, heart rate
  in bpm, HRV (RMSSD) in ms, breathing in breaths per minute, temperature deviations in C.
- Local time: sleep periods, workouts and daily activity carry the ring's local offset
  (`2024-03-01T23:12:00+01:00`); it is kept as `tz_offset_min`. Heart-rate timestamps are
  UTC: each sample takes the offset of the nearest Oura record of the same sync that has
  one (within 36 h), else the person's `timezone` setting (offset left NULL), else UTC.
- Cursors: the latest `day` seen per date stream, the latest sample time for heart rate;
  the sync starts each stream at its cursor minus the lag window (`oura_lag_days`).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, Protocol

from common.errors import ApiError, ConfigError
from common.records import Deletion, RawRecord, Sample, SleepSession, Workout
from common.timeutil import offset_minutes
from connectors.checkpoint import Checkpoint

SOURCE = "oura"
SOURCE_NAME = "oura_api"
PREFIX = "/v2/usercollection"

# Fetch order: the streams that carry local offsets before heart rate, which borrows them.
STREAMS = (
    "daily_sleep",
    "sleep",
    "daily_readiness",
    "daily_activity",
    "daily_stress",
    "workout",
    "heartrate",
)
DAILY_STREAMS = ("daily_sleep", "daily_readiness", "daily_activity", "daily_stress")
HEARTRATE_WINDOW = timedelta(days=30)  # Oura refuses longer heart-rate ranges (community)
OFFSET_REACH = timedelta(hours=36)  # how far a heart-rate sample may borrow an offset
NOT_SLEEP = frozenset({"deleted", "rest"})  # sleep types that are not (or no longer) sleep
NAP_TYPES = frozenset({"sleep", "late_nap"})  # confirmed short sleeps; long_sleep is the night


class JsonClient(Protocol):
    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


# -- plan: what to ask for --------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    """One stream's range: dates for the daily streams, instants for heart rate."""

    start: date | datetime
    end: date | datetime


def plan(
    cursors: Mapping[str, str | None],
    now: datetime,
    *,
    history_days: int,
    lag_days: int,
) -> dict[str, Window]:
    """Each stream's window: the whole history (`history_days`) without a cursor, else the
    cursor minus `lag_days` (never later than yesterday), up to today."""
    if history_days < 1:
        raise ConfigError("oura_history_days must be at least 1")
    if lag_days < 1:
        raise ConfigError("oura_lag_days must be at least 1 (Oura re-scores yesterday)")
    now = now.astimezone(UTC)
    today = now.date()
    out: dict[str, Window] = {}
    for stream in STREAMS:
        cursor = cursors.get(stream)
        if stream == "heartrate":
            last = parse_ts(cursor)
            first = now - timedelta(days=history_days) if last is None else min(last, now) - timedelta(days=lag_days)
            start = datetime(first.year, first.month, first.day, tzinfo=UTC)  # whole UTC days
            out[stream] = Window(start, now)
            continue
        last_day = parse_day(cursor)
        if last_day is None:
            first_day = today - timedelta(days=history_days)
        else:
            first_day = min(last_day, today) - timedelta(days=lag_days)
        # One day more on each side: `sleep` reads start_date as exclusive, the daily
        # collections read a date-only end_date as midnight; any zone's today is <= UTC + 1.
        out[stream] = Window(first_day - timedelta(days=1), today + timedelta(days=2))
    return out


# -- helpers ------------------------------------------------------------------------------
def parse_ts(value: Any) -> datetime | None:
    """An aware datetime (its own offset kept), or None. A time without an offset is UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


def parse_day(value: Any) -> date | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def _offset(value: Any) -> int | None:
    """The UTC offset written in a localized timestamp, in minutes (None if it has none)."""
    if not isinstance(value, str):
        return None
    dt = parse_ts(value)
    if dt is None:
        return None
    text = value.strip()
    if not (text.endswith(("Z", "z")) or "+" in text[10:] or "-" in text[10:]):
        return None  # no offset written: unknown, not UTC
    return offset_minutes(dt)


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _minutes(seconds: Any) -> float | None:
    v = _num(seconds)
    return None if v is None else v / 60.0


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _raw(kind: str, key: Any, rec: Mapping[str, Any], fetched_at: datetime) -> RawRecord:
    return RawRecord(source=SOURCE, kind=kind, natural_key=str(key), payload=_json(rec), fetched_at=fetched_at)


def _required(stream: str, rec: Mapping[str, Any], *keys: str) -> None:
    missing = [k for k in keys if rec.get(k) in (None, "")]
    if missing:
        raise ApiError(f"oura: a {stream} record came without {', '.join(missing)}")


def _day(stream: str, rec: Mapping[str, Any]) -> date:
    _required(stream, rec, "day")
    d = parse_day(rec["day"])
    if d is None:
        raise ApiError(f"oura: a {stream} record has an unreadable day {str(rec['day'])[:40]!r}")
    return d


def _sample(
    metric: str, unit: str, value: float, start: datetime, end: datetime, day: date,
    offset: int | None, detail: Any = None,
) -> Sample:
    return Sample(
        source=SOURCE,
        metric=metric,
        start_ts=start.astimezone(UTC),
        end_ts=end.astimezone(UTC),
        value=value,
        unit=unit,
        local_day=day,
        source_name=SOURCE_NAME,
        tz_offset_min=offset,
        detail=None if detail is None else (detail if isinstance(detail, str) else _json(detail)),
    )


def _day_span(rec: Mapping[str, Any], day: date) -> tuple[datetime, datetime, int | None]:
    """Where a daily document sits in time: from its own `timestamp` (Oura's day starts at
    04:00 local; daily_activity says `...T04:00:00-08:00`) for 24 hours, else the day's UTC
    midnight with no offset. The start is part of the row's natural key, so it only comes
    from the document itself: a later sync of the same document lands on the same row."""
    ts = parse_ts(rec.get("timestamp"))
    if ts is not None:
        return ts, ts + timedelta(days=1), _offset(rec.get("timestamp"))
    base = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return base, base + timedelta(days=1), None


# -- mapping: one API document -> records -------------------------------------------------
def map_daily_sleep(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    day = _day("daily_sleep", rec)
    yield _raw("daily_sleep", day.isoformat(), rec, fetched_at)
    score = _num(rec.get("score"))
    if score is None:
        return
    start, end, off = _day_span(rec, day)
    yield _sample("sleep_score", "score", score, start, end, day, off,
                  {"id": rec.get("id"), "contributors": rec.get("contributors")})


def map_daily_readiness(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    day = _day("daily_readiness", rec)
    yield _raw("daily_readiness", day.isoformat(), rec, fetched_at)
    start, end, off = _day_span(rec, day)
    score = _num(rec.get("score"))
    if score is not None:
        yield _sample("readiness", "score", score, start, end, day, off,
                      {"id": rec.get("id"), "contributors": rec.get("contributors")})
    temp = _num(rec.get("temperature_deviation"))
    if temp is not None:
        yield _sample("skin_temp_deviation", "degC", temp, start, end, day, off,
                      {"trend_deviation": _num(rec.get("temperature_trend_deviation"))})


ACTIVITY_METRICS = (
    ("steps", "count", "steps"),
    ("active_energy", "kcal", "active_calories"),
    ("total_energy", "kcal", "total_calories"),
    ("activity_score", "score", "score"),
)


def map_daily_activity(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    day = _day("daily_activity", rec)
    yield _raw("daily_activity", day.isoformat(), rec, fetched_at)
    start, end, off = _day_span(rec, day)
    for metric, unit, key in ACTIVITY_METRICS:
        v = _num(rec.get(key))
        if v is not None:
            yield _sample(metric, unit, v, start, end, day, off)
    medium, high = _minutes(rec.get("medium_activity_time")), _minutes(rec.get("high_activity_time"))
    if medium is not None or high is not None:
        yield _sample("intensity_minutes", "min", (medium or 0.0) + (high or 0.0), start, end, day, off,
                      {"medium": medium, "high": high})


def map_daily_stress(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    day = _day("daily_stress", rec)
    yield _raw("daily_stress", day.isoformat(), rec, fetched_at)
    start, end, off = _day_span(rec, day)
    detail = {"day_summary": rec.get("day_summary")}
    for metric, key in (("high_stress_time", "stress_high"), ("high_recovery_time", "recovery_high")):
        v = _minutes(rec.get(key))
        if v is not None:
            yield _sample(metric, "min", v, start, end, day, off, detail)


def map_sleep(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    """One sleep period: a SleepSession with its stages, average HRV (RMSSD) and lowest
    heart rate; a period the person deleted or rejected (`deleted`, `rest`) is raw only and
    removes the session an earlier sync stored."""
    _required("sleep", rec, "id", "bedtime_start", "bedtime_end")
    sid = str(rec["id"])
    yield _raw("sleep", sid, rec, fetched_at)
    if rec.get("type") in NOT_SLEEP:
        yield Deletion("sleep_sessions", {"source": SOURCE, "session_id": sid})
        return
    start, end = parse_ts(rec.get("bedtime_start")), parse_ts(rec.get("bedtime_end"))
    if start is None or end is None:
        raise ApiError(f"oura: sleep {sid[:40]} has unreadable bedtimes")
    off = _offset(rec.get("bedtime_end"))
    if off is None:
        off = _offset(rec.get("bedtime_start"))
    deep, light, rem = (_minutes(rec.get(k)) for k in ("deep_sleep_duration", "light_sleep_duration", "rem_sleep_duration"))
    asleep = _minutes(rec.get("total_sleep_duration"))
    if asleep is None and None not in (deep, light, rem):
        asleep = deep + light + rem  # type: ignore[operator]  # the stages are the sleep
    yield SleepSession(
        source=SOURCE,
        session_id=sid,
        start_ts=start.astimezone(UTC),
        end_ts=end.astimezone(UTC),
        local_day=end.date() if off is not None else _day("sleep", rec),  # the wake-up day
        sleep_min=asleep,
        in_bed_min=_minutes(rec.get("time_in_bed")),
        awake_min=_minutes(rec.get("awake_time")),
        light_min=light,
        deep_min=deep,
        rem_min=rem,
        efficiency_pct=_num(rec.get("efficiency")),
        score=None,  # Oura scores the day (daily_sleep -> sleep_score), not the period
        is_nap=rec.get("type") in NAP_TYPES,
        respiratory_rate_brpm=_num(rec.get("average_breath")),
        hrv_rmssd_ms=_num(rec.get("average_hrv")),
        resting_hr_bpm=_num(rec.get("lowest_heart_rate")),
        tz_offset_min=off,
        source_name=SOURCE_NAME,
    )


def map_workout(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    _required("workout", rec, "id", "start_datetime", "end_datetime")
    wid = str(rec["id"])
    yield _raw("workout", wid, rec, fetched_at)
    start, end = parse_ts(rec.get("start_datetime")), parse_ts(rec.get("end_datetime"))
    if start is None or end is None:
        raise ApiError(f"oura: workout {wid[:40]} has unreadable times")
    off = _offset(rec.get("start_datetime"))
    yield Workout(
        source=SOURCE,
        workout_id=wid,
        start_ts=start.astimezone(UTC),
        end_ts=end.astimezone(UTC),
        local_day=start.date() if off is not None else _day("workout", rec),
        sport=str(rec.get("activity") or "unknown"),
        duration_min=(end - start).total_seconds() / 60.0,
        energy_kcal=_num(rec.get("calories")),
        distance_m=_num(rec.get("distance")),
        tz_offset_min=off,
        source_name=SOURCE_NAME,
    )


class Offsets:
    """Local offsets Oura wrote on its records, by instant: heart rate borrows the nearest."""

    def __init__(self, fallback: tzinfo | None = None):
        self.fallback = fallback
        self._points: list[tuple[float, int]] = []
        self._hours: dict[int, int | None] = {}  # hour since the epoch -> its offset
        self._sorted = True

    def note(self, value: Any) -> None:
        ts, off = parse_ts(value), _offset(value)
        if ts is not None and off is not None:
            self._points.append((ts.timestamp(), off))
            self._sorted = False
            self._hours.clear()

    def _nearest(self, t: float) -> int | None:
        if not self._sorted:
            self._points.sort()
            self._sorted = True
        i = bisect.bisect_left(self._points, (t, -10**6))
        near = [self._points[j] for j in (i - 1, i) if 0 <= j < len(self._points)]
        near = [p for p in near if abs(p[0] - t) <= OFFSET_REACH.total_seconds()]
        return min(near, key=lambda p: abs(p[0] - t))[1] if near else None

    def at(self, ts: datetime) -> tuple[int | None, date]:
        """(tz_offset_min, local day) of an instant: the offset noted nearest to its hour
        (within reach), else the fallback zone (offset None: the zone decides), else UTC."""
        hour = int(ts.timestamp() // 3600)
        if hour not in self._hours:  # 12 heart-rate samples an hour share one look-up
            self._hours[hour] = self._nearest(hour * 3600 + 1800)
        off = self._hours[hour]
        if off is not None:
            return off, (ts + timedelta(minutes=off)).astimezone(UTC).date()
        return None, ts.astimezone(self.fallback or UTC).date()


def map_heartrate_day(
    day: date, rows: list[Mapping[str, Any]], offsets: Offsets, fetched_at: datetime
) -> Iterator[Any]:
    """The 5-minute samples of one UTC day: one raw document (the day's rows, in time
    order) and a `heart_rate` sample each (the ring's context, e.g. `rest`, in `detail`)."""
    rows = sorted(rows, key=lambda r: str(r.get("timestamp")))
    yield _raw("heartrate", day.isoformat(), {"day": day.isoformat(), "data": rows}, fetched_at)
    for r in rows:
        ts, bpm = parse_ts(r.get("timestamp")), _num(r.get("bpm"))
        if ts is None or bpm is None:
            continue
        off, local = offsets.at(ts)
        yield _sample("heart_rate", "bpm", bpm, ts, ts, local, off, str(r.get("source") or "") or None)


# -- fetching -----------------------------------------------------------------------------
def pages(client: JsonClient, stream: str, params: Mapping[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Every page of one listing: the same parameters on each request, plus `next_token`."""
    path = f"{PREFIX}/{stream}"
    token: str | None = None
    seen: set[str] = set()
    while True:
        query = dict(params)
        if token:
            query["next_token"] = token
        body = client.get_json(path, query)
        if body is None:
            return
        if not isinstance(body, dict) or not isinstance(body.get("data", []), list):
            raise ApiError(f"oura: GET {path} returned an unexpected shape")
        yield [r for r in body.get("data") or [] if isinstance(r, dict)]
        token = body.get("next_token") or None
        if not token:
            return
        if token in seen:
            raise ApiError(f"oura: GET {path} repeated a page token; stopping")
        seen.add(token)


MAPPERS = {
    "daily_sleep": map_daily_sleep,
    "daily_readiness": map_daily_readiness,
    "daily_activity": map_daily_activity,
    "daily_stress": map_daily_stress,
    "sleep": map_sleep,
    "workout": map_workout,
}
# Fields of each stream that carry a local offset (for heart rate to borrow).
OFFSET_FIELDS = {
    "sleep": ("bedtime_start", "bedtime_end"),
    "workout": ("start_datetime", "end_datetime"),
    "daily_activity": ("timestamp",),
}


def fetch_dated(
    stream: str, window: Window, client: JsonClient, *, fetched_at: datetime, offsets: Offsets
) -> Iterator[Any]:
    """One date-filtered stream: its records page by page, then its Checkpoint."""
    params = {"start_date": window.start.isoformat(), "end_date": window.end.isoformat()}
    latest: date | None = None
    for page in pages(client, stream, params):
        for rec in page:
            yield from MAPPERS[stream](rec, fetched_at)
            for f in OFFSET_FIELDS.get(stream, ()):
                offsets.note(rec.get(f))
            d = parse_day(rec.get("day"))
            if d is not None and (latest is None or d > latest):
                latest = d
    yield Checkpoint(SOURCE, stream, None if latest is None else latest.isoformat())


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="seconds")


def fetch_heartrate(
    window: Window, client: JsonClient, *, fetched_at: datetime, offsets: Offsets
) -> Iterator[Any]:
    """Heart rate in windows of at most 30 days from a UTC midnight: each UTC day comes
    whole from one window (so its raw document is complete), the last one up to now."""
    start, end = window.start, window.end
    assert isinstance(start, datetime) and isinstance(end, datetime)
    latest: datetime | None = None
    lo = start
    while lo < end:
        hi = min(lo + HEARTRATE_WINDOW, end)
        final = hi >= end
        by_day: dict[date, list[dict[str, Any]]] = {}
        params = {"start_datetime": _iso(lo), "end_datetime": _iso(hi)}
        for page in pages(client, "heartrate", params):
            for r in page:
                ts = parse_ts(r.get("timestamp"))
                if ts is None or ts < lo or ts > hi or (ts == hi and not final):
                    continue  # outside, or the next window's first instant (bounds are inclusive)
                by_day.setdefault(ts.astimezone(UTC).date(), []).append(r)
                if latest is None or ts > latest:
                    latest = ts
        for day in sorted(by_day):
            yield from map_heartrate_day(day, by_day[day], offsets, fetched_at)
        lo = hi
    yield Checkpoint(SOURCE, "heartrate", None if latest is None else _iso(latest))


def fetch(
    windows: Mapping[str, Window],
    client: JsonClient,
    *,
    now: datetime | None = None,
    zone: tzinfo | None = None,
    streams: tuple[str, ...] = STREAMS,
) -> Iterator[Any]:
    """Every stream in STREAMS order (heart rate last: it borrows the others' offsets)."""
    fetched_at = now or datetime.now(UTC)
    offsets = Offsets(zone)
    for stream in [s for s in STREAMS if s in streams]:
        if stream == "heartrate":
            yield from fetch_heartrate(windows[stream], client, fetched_at=fetched_at, offsets=offsets)
        else:
            yield from fetch_dated(stream, windows[stream], client, fetched_at=fetched_at, offsets=offsets)
