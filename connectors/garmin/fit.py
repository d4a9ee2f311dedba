"""Decode one Garmin FIT file into records (fitdecode).

What becomes a normalised row:

- ``session``            -> ``Workout`` (id ``fit:<serial>:<time_created>``, plus ``:<n>`` when
  a file holds several sessions)
- ``record.heart_rate``  -> ``heart_rate`` samples (instants)
- ``hrv``                -> ``rr_interval`` samples (ms, beat to beat; see ``_rr_samples``)
- ``monitoring``         -> ``steps`` (per-interval deltas, see ``_monitoring_samples``) and
  ``heart_rate`` samples; ``timestamp_16`` rolled forward from the last full timestamp
- ``stress_level``       -> ``stress``; ``monitoring_hr_data`` -> ``resting_heart_rate``
- ``respiration_rate``   -> ``respiratory_rate``; ``spo2_data`` -> ``spo2``
- ``sleep_level``        -> ``sleep_stage`` samples plus one ``SleepSession`` (``night:<day>``)
- ``hrv_status_summary`` / ``hrv_value`` -> ``hrv_rmssd``
- ``weight_scale``       -> ``weight``

Everything is also landed raw (STYLE rule 4), nothing is dropped:

- ``fit_file``    one row per file: name, size, sha256, ``file_id`` fields, message counts;
- ``fit_series``  one row per (file, high-volume message kind) with the fields as columns
  (``record``, ``monitoring``, ``hrv``, ...);
- ``fit_message`` one row per other data message, including undocumented ``unknown_NNN``
  ones, keyed ``<sha256[:32]>:<message index>``.

Timestamps: FIT seconds since 1989-12-31 UTC become aware UTC datetimes. The UTC offset
(``tz_offset_min``) comes from ``activity.local_timestamp`` or
``monitoring_info.local_timestamp`` (local wall time minus UTC time, rounded to 15 min); when
neither is present it is ``None`` and ``local_day`` is the UTC date.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import fitdecode

from common.errors import SourceFormatError
from common.records import RawRecord, Sample, SleepSession, Workout
from common.timeutil import in_sane_range, out_of_range_detail

SOURCE = "garmin"
FIT_EPOCH = datetime(1989, 12, 31, tzinfo=UTC)
FIT_EPOCH_UNIX_S = 631_065_600

# Message kinds with many rows per file: landed raw as one columnar row per kind.
SERIES_KINDS = frozenset(
    {
        "record",
        "monitoring",
        "hrv",
        "stress_level",
        "sleep_level",
        "hrv_value",
        "respiration_rate",
        "spo2_data",
    }
)

# Data messages decoded per file at most: a 100-hour activity recorded every second with
# beat-to-beat HRV is ~440 k (86 k records and ~20 k hrv messages a day); decoded, a message
# costs ~0.5-1 KB and ~35-70 us, so a hostile file stops at ~0.5 GB and ~30 s.
MAX_MESSAGES = 500_000
# Fields whose raw (unscaled) value is kept besides the decoded one.
_RAW_KEYS = frozenset({"timestamp_16", "steps", "cycles"})

# FIT activity_type values whose `cycles` field counts steps (FIT profile subfield `steps`).
_STEP_ACTIVITIES = {"walking", "running", 1, 6}


# -- small helpers ------------------------------------------------------------------------
def fit_seconds(ts: datetime) -> int:
    """Seconds since the FIT epoch for an aware datetime."""
    return int((ts - FIT_EPOCH).total_seconds())


def from_fit_seconds(seconds: int) -> datetime:
    return FIT_EPOCH + timedelta(seconds=seconds)


def roll_timestamp_16(last_full_s: int, timestamp_16: int) -> int:
    """Full FIT timestamp (seconds) from a 16-bit ``timestamp_16`` and the last full one.

    ``timestamp_16`` holds the low 16 bits of the FIT timestamp; the message happened at or
    after the last full timestamp, so the difference of the low bits modulo 2**16 is the
    time elapsed (this handles the wrap at 65536 s, about 18 h).
    """
    return last_full_s + ((timestamp_16 - (last_full_s & 0xFFFF)) & 0xFFFF)


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, date | time):
        return v.isoformat()
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and v != v:  # NaN
        return None
    return v


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _offset_min(local: Any, utc: Any) -> int | None:
    """Offset in minutes between a FIT local_date_time (decoded as if UTC) and a UTC time."""
    if not isinstance(local, datetime) or not isinstance(utc, datetime):
        return None
    minutes = (local - utc).total_seconds() / 60
    rounded = int(round(minutes / 15.0) * 15)
    return rounded if -16 * 60 <= rounded <= 16 * 60 else None


def local_day(ts: datetime, offset_min: int | None) -> date:
    if offset_min is None:
        return ts.astimezone(UTC).date()
    return ts.astimezone(timezone(timedelta(minutes=offset_min))).date()


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    return None


@dataclass
class _Msg:
    index: int
    name: str
    num: int
    fields: dict[str, Any]
    raw: dict[str, Any]  # raw (unscaled) values of _RAW_KEYS, for timestamp_16 and steps


def _decode(data: bytes, name: str) -> list[_Msg]:
    """All data messages of a FIT file (chained files included), or SourceFormatError."""
    msgs: list[_Msg] = []
    try:
        with fitdecode.FitReader(
            io.BytesIO(data),
            check_crc=fitdecode.CrcCheck.RAISE,
            error_handling=fitdecode.ErrorHandling.RAISE,
        ) as reader:
            for frame in reader:
                if frame.frame_type != fitdecode.FIT_FRAME_DATA:
                    continue
                if len(msgs) >= MAX_MESSAGES:
                    raise SourceFormatError(
                        name, f"more than {MAX_MESSAGES:,} data messages; refused (a damaged or hostile file?)",
                        f"message {len(msgs)}",
                    )
                fields: dict[str, Any] = {}
                raw: dict[str, Any] = {}
                for fd in frame.fields:
                    key = fd.name if fd.name not in fields else f"{fd.name}#{fd.def_num}"
                    value = fd.value
                    if isinstance(value, datetime) and not in_sane_range(value):
                        raise SourceFormatError(
                            name, f"{frame.name} field {key}: " + out_of_range_detail("time", value.isoformat()),
                            f"message {len(msgs)}",
                        )
                    fields[key] = value
                    if key in _RAW_KEYS:
                        raw[key] = fd.raw_value
                msgs.append(_Msg(len(msgs), frame.name, frame.global_mesg_num, fields, raw))
    except fitdecode.FitEOFError as exc:
        raise SourceFormatError(
            name,
            f"truncated or corrupt FIT file: unexpected end of data ({exc})",
            f"byte {exc.offset}",
        ) from None
    except fitdecode.FitCRCError as exc:
        raise SourceFormatError(
            name, f"corrupt FIT file: CRC mismatch ({exc})", f"byte {max(len(data) - 2, 0)}"
        ) from None
    except fitdecode.FitHeaderError as exc:
        raise SourceFormatError(name, f"not a FIT file: {exc}", "byte 0") from None
    except fitdecode.FitParseError as exc:
        raise SourceFormatError(
            name, f"corrupt FIT file: {exc}", f"byte {getattr(exc, 'offset', '?')}"
        ) from None
    except fitdecode.FitError as exc:
        raise SourceFormatError(name, f"corrupt FIT file: {exc}") from None
    except (EOFError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise SourceFormatError(name, f"corrupt FIT file: {type(exc).__name__}: {exc}") from None
    if not msgs:
        raise SourceFormatError(name, "FIT file holds no data messages", "byte 0")
    return msgs


# -- the reader ---------------------------------------------------------------------------
def read_fit(data: bytes, name: str, fetched_at: datetime | None = None) -> Iterator[Any]:
    """Yield raw and normalised records for one FIT file given as bytes."""
    fetched_at = fetched_at or datetime.now(UTC)
    msgs = _decode(data, name)
    sha = hashlib.sha256(data).hexdigest()
    key = sha[:32]

    file_id = next((m for m in msgs if m.name == "file_id"), None)
    fid = file_id.fields if file_id else {}
    product = fid.get("garmin_product") or fid.get("product") or fid.get("manufacturer")
    source_name = str(product) if product is not None else "garmin"
    serial = fid.get("serial_number")
    created = fid.get("time_created")
    file_tag = (
        f"{serial}:{fit_seconds(created)}"
        if serial is not None and isinstance(created, datetime)
        else key
    )

    offset = None
    for m in msgs:
        if m.name in ("activity", "monitoring_info"):
            offset = _offset_min(m.fields.get("local_timestamp"), m.fields.get("timestamp"))
            if offset is not None:
                break

    counts = Counter(m.name for m in msgs)
    yield RawRecord(
        source=SOURCE,
        kind="fit_file",
        natural_key=key,
        payload=_dumps(
            {
                "name": name.rsplit("/", 1)[-1],
                "path": name,
                "size_bytes": len(data),
                "sha256": sha,
                "file_id": {k: _jsonable(v) for k, v in fid.items()},
                "tz_offset_min": offset,
                "message_counts": dict(sorted(counts.items())),
            }
        ),
        fetched_at=fetched_at,
    )
    yield from _raw_messages(msgs, key, fetched_at)

    ctx = _Ctx(source_name=source_name, offset=offset, file_tag=file_tag)
    yield from _workouts(msgs, ctx)
    yield from _record_samples(msgs, ctx)
    yield from _rr_samples(msgs, ctx)
    yield from _monitoring_samples(msgs, ctx)
    yield from _wellness_samples(msgs, ctx)
    yield from _sleep(msgs, ctx)


def _raw_messages(msgs: list[_Msg], key: str, fetched_at: datetime) -> Iterator[RawRecord]:
    series: dict[str, list[_Msg]] = {}
    for m in msgs:
        if m.name in SERIES_KINDS:
            series.setdefault(m.name, []).append(m)
            continue
        yield RawRecord(
            source=SOURCE,
            kind="fit_message",
            natural_key=f"{key}:{m.index}",
            payload=_dumps(
                {
                    "message": m.name,
                    "global_mesg_num": m.num,
                    "index": m.index,
                    "fields": {k: _jsonable(v) for k, v in m.fields.items()},
                }
            ),
            fetched_at=fetched_at,
        )
    for kind, rows in series.items():
        columns: list[str] = []
        for m in rows:
            for k in m.fields:
                if k not in columns:
                    columns.append(k)
        yield RawRecord(
            source=SOURCE,
            kind="fit_series",
            natural_key=f"{key}:{kind}",
            payload=_dumps(
                {
                    "message": kind,
                    "global_mesg_num": rows[0].num,
                    "columns": ["index", *columns],
                    "rows": [[m.index, *(_jsonable(m.fields.get(c)) for c in columns)] for m in rows],
                }
            ),
            fetched_at=fetched_at,
        )


@dataclass
class _Ctx:
    source_name: str
    offset: int | None
    file_tag: str

    def sample(
        self, metric: str, unit: str, start: datetime, value: float, end: datetime | None = None,
        detail: str | None = None,
    ) -> Sample:
        return Sample(
            source=SOURCE,
            metric=metric,
            start_ts=start,
            end_ts=end or start,
            value=float(value),
            unit=unit,
            local_day=local_day(start, self.offset),
            source_name=self.source_name,
            device=self.source_name,
            tz_offset_min=self.offset,
            detail=detail,
        )


def _workouts(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Workout]:
    sessions = [m for m in msgs if m.name == "session"]
    for n, s in enumerate(sessions):
        f = s.fields
        start = f.get("start_time") or f.get("timestamp")
        if not isinstance(start, datetime):
            continue
        elapsed = _num(f.get("total_elapsed_time"))
        end = f.get("timestamp")
        if elapsed is not None:
            end = start + timedelta(seconds=elapsed)
        if not isinstance(end, datetime):
            end = start
        timer = _num(f.get("total_timer_time"))
        sport = f.get("sport")
        sub = f.get("sub_sport")
        sport_name = str(sport) if sport is not None else "unknown"
        if sub not in (None, "generic", 0):
            sport_name = f"{sport_name}/{sub}"
        wid = f"fit:{ctx.file_tag}" + (f":{n}" if len(sessions) > 1 else "")
        yield Workout(
            source=SOURCE,
            workout_id=wid,
            start_ts=start,
            end_ts=end,
            local_day=local_day(start, ctx.offset),
            sport=sport_name,
            duration_min=None if timer is None else timer / 60.0,
            energy_kcal=_num(f.get("total_calories")),
            distance_m=_num(f.get("total_distance")),
            avg_hr_bpm=_num(f.get("avg_heart_rate")),
            max_hr_bpm=_num(f.get("max_heart_rate")),
            strain=None,
            tz_offset_min=ctx.offset,
            source_name=ctx.source_name,
        )


def _record_samples(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Sample]:
    seen: set[datetime] = set()
    for m in msgs:
        if m.name != "record":
            continue
        ts = m.fields.get("timestamp")
        hr = _num(m.fields.get("heart_rate"))
        if isinstance(ts, datetime) and hr is not None and ts not in seen:
            seen.add(ts)
            yield ctx.sample("heart_rate", "bpm", ts, hr)


def _rr_samples(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Sample]:
    """Beat-to-beat intervals from ``hrv`` messages.

    ``hrv`` messages carry no timestamp: up to five R-R intervals (seconds) each, in order.
    The beats are laid end to end from the first timer start (``event`` timer/start), else
    the session start, else the first record; each sample spans its own beat.
    """
    if not any(m.name == "hrv" for m in msgs):
        return
    anchor = None
    for m in msgs:
        if m.name == "event" and m.fields.get("event") == "timer" and m.fields.get(
            "event_type"
        ) == "start" and isinstance(m.fields.get("timestamp"), datetime):
            anchor = m.fields["timestamp"]
            break
    if anchor is None:
        for m in msgs:
            if m.name in ("session", "record"):
                t = m.fields.get("start_time") or m.fields.get("timestamp")
                if isinstance(t, datetime):
                    anchor = t
                    break
    if anchor is None:
        return
    elapsed_us = 0
    for m in msgs:
        if m.name != "hrv":
            continue
        values = m.fields.get("time")
        if not isinstance(values, tuple | list):
            values = (values,)
        for v in values:
            rr = _num(v)
            if rr is None or rr <= 0:
                continue
            rr_us = int(round(rr * 1_000_000))
            start = anchor + timedelta(microseconds=elapsed_us)
            elapsed_us += rr_us
            yield ctx.sample(
                "rr_interval", "ms", start, rr * 1000.0,
                end=anchor + timedelta(microseconds=elapsed_us),
            )


def _monitoring_samples(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Sample]:
    """Steps and heart rate from ``monitoring`` messages.

    Timestamps: a full ``timestamp`` (in ``monitoring``, ``monitoring_info`` or any other
    message) resets the reference; ``timestamp_16`` is rolled forward from it.

    Steps: the device reports the cumulative count per activity type since local midnight
    (``cycles`` for walking/running = steps). We store per-interval deltas: a ``steps``
    sample from the previous report of the same activity type to this one, valued at the
    increase. The baseline is 0 at the first report of a local day when the file starts at
    local midnight (``monitoring_info``), otherwise the first report of each type only sets the
    baseline (its earlier steps belong to the previous file of that day). A decrease means
    a new day (baseline 0). Daily totals = sum of the deltas per local day. Summary
    ``monitoring`` messages (with ``duration_min``: the previous day's totals) are kept raw
    only, so nothing is counted twice.
    """
    last_full: int | None = None
    file_start: datetime | None = None
    starts_at_midnight = False
    prev: dict[Any, tuple[datetime, float]] = {}  # activity type -> (ts, cumulative)
    for m in msgs:
        ts_full = m.fields.get("timestamp")
        if isinstance(ts_full, datetime):
            last_full = fit_seconds(ts_full)
        if m.name == "monitoring_info" and isinstance(ts_full, datetime):
            file_start = ts_full
            loc = m.fields.get("local_timestamp")
            starts_at_midnight = isinstance(loc, datetime) and loc.time() == time(0, 0)
        if m.name != "monitoring":
            continue
        if isinstance(ts_full, datetime):
            ts = ts_full
        elif m.raw.get("timestamp_16") is not None and last_full is not None:
            last_full = roll_timestamp_16(last_full, int(m.raw["timestamp_16"]))
            ts = from_fit_seconds(last_full)
        else:
            continue
        hr = _num(m.fields.get("heart_rate"))
        if hr is not None and hr > 0:
            yield ctx.sample("heart_rate", "bpm", ts, hr)
        if "duration_min" in m.fields or "duration" in m.fields:
            continue  # a period summary (e.g. the day's total), kept raw only
        atype = m.fields.get("activity_type")
        steps = m.raw.get("steps", m.raw.get("cycles"))
        if atype not in _STEP_ACTIVITIES or steps is None:
            continue
        steps = float(steps)
        before = prev.get(atype)
        if before is None:
            same_day_as_start = file_start is not None and local_day(
                ts, ctx.offset
            ) == local_day(file_start, ctx.offset)
            if starts_at_midnight or not same_day_as_start:
                base_ts = _local_midnight(ts, ctx.offset)
                if file_start is not None and file_start > base_ts:
                    base_ts = file_start
                before = (base_ts, 0.0)
            else:
                prev[atype] = (ts, steps)
                continue
        elif local_day(ts, ctx.offset) != local_day(before[0], ctx.offset) or steps < before[1]:
            before = (max(before[0], _local_midnight(ts, ctx.offset)), 0.0)
        delta = steps - before[1]
        prev[atype] = (ts, steps)
        if delta > 0:
            yield ctx.sample(
                "steps", "count", before[0], delta, end=ts, detail=f"activity_type={atype}"
            )


def _local_midnight(ts: datetime, offset: int | None) -> datetime:
    tz = UTC if offset is None else timezone(timedelta(minutes=offset))
    loc = ts.astimezone(tz)
    return datetime(loc.year, loc.month, loc.day, tzinfo=tz).astimezone(UTC)


def _wellness_samples(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Sample]:
    for m in msgs:
        f = m.fields
        ts = f.get("timestamp")
        if m.name == "stress_level":
            t = f.get("stress_level_time") or ts
            v = _num(f.get("stress_level_value"))
            if isinstance(t, datetime) and v is not None and v >= 0:  # negative = no reading
                yield ctx.sample("stress", "score", t, v)
        elif not isinstance(ts, datetime):
            continue
        elif m.name == "monitoring_hr_data":
            v = _num(f.get("resting_heart_rate"))
            if v:
                yield ctx.sample("resting_heart_rate", "bpm", ts, v)
        elif m.name == "respiration_rate":
            v = _num(f.get("respiration_rate"))
            if v is not None and v > 0:
                yield ctx.sample("respiratory_rate", "brpm", ts, v)
        elif m.name == "spo2_data":
            v = _num(f.get("reading_spo2"))
            if v is not None and 0 < v <= 100:
                yield ctx.sample("spo2", "pct", ts, v)
        elif m.name == "hrv_status_summary":
            v = _num(f.get("last_night_average"))
            if v:
                extras = {
                    k: _jsonable(f.get(k))
                    for k in ("status", "weekly_average", "last_night_5_min_high")
                }
                yield ctx.sample("hrv_rmssd", "ms", ts, v, detail=_dumps({"kind": "last_night_average", **extras}))
        elif m.name == "hrv_value":
            v = _num(f.get("value"))
            if v:
                yield ctx.sample("hrv_rmssd", "ms", ts, v, detail="5min")
        elif m.name == "weight_scale":
            v = _num(f.get("weight"))
            if v:
                yield ctx.sample("weight", "kg", ts, v)


def _sleep(msgs: list[_Msg], ctx: _Ctx) -> Iterator[Any]:
    """``sleep_level`` messages mark the start of each stage; a stage lasts until the next."""
    levels = [
        (m.fields["timestamp"], str(m.fields.get("sleep_level")))
        for m in msgs
        if m.name == "sleep_level" and isinstance(m.fields.get("timestamp"), datetime)
    ]
    if len(levels) < 2:
        return
    levels.sort(key=lambda x: x[0])
    totals: dict[str, float] = {}
    for (t0, stage), (t1, _) in zip(levels, levels[1:], strict=False):
        minutes = (t1 - t0).total_seconds() / 60.0
        if minutes <= 0:
            continue
        totals[stage] = totals.get(stage, 0.0) + minutes
        yield ctx.sample("sleep_stage", "min", t0, minutes, end=t1, detail=stage)
    start, end = levels[0][0], levels[-1][0]
    day = local_day(end, ctx.offset)
    asleep = [totals[s] for s in ("light", "deep", "rem") if s in totals]
    yield SleepSession(
        source=SOURCE,
        session_id=f"night:{day.isoformat()}",
        start_ts=start,
        end_ts=end,
        local_day=day,
        sleep_min=sum(asleep) if asleep else None,
        in_bed_min=(end - start).total_seconds() / 60.0,
        awake_min=totals.get("awake"),
        light_min=totals.get("light"),
        deep_min=totals.get("deep"),
        rem_min=totals.get("rem"),
        tz_offset_min=ctx.offset,
        source_name=ctx.source_name,
    )
