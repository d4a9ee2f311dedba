"""WHOOP Developer API v2: cycles, sleep, recovery, workouts and the profile.

`fetch(since, client)` yields records and, after the last page of each stream, a
`Checkpoint` with the stream's new cursor. No database code (STYLE rule 2).

- Pagination: `{records, next_token}`; the token goes back as `nextToken`, with the same
  `start`/`end`/`limit=25` on every page (connectors.md A1).
- Units: durations arrive in milliseconds (-> minutes), energy in kilojoules (-> kcal by
  /4.184), `timezone_offset` (`-04:00`) is kept as `tz_offset_min`.
- `score` exists only when `score_state == "SCORED"`. `PENDING_SCORE` records land raw and
  as rows whose scores are `None`; the next sync's lag window fetches them again and the
  upsert fills the scores in.
- Cursor per stream: the latest `start` seen, but never past the start of a record that is
  not final yet (`PENDING_SCORE`, or a cycle still open with `end: null`), so a pending
  record is always inside the next window. The sync subtracts the lag window on top.
- Recovery has no time of its own: its samples are stamped at the wake-up (end) of its sleep,
  taken from the sleeps of the same run or fetched by id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from common.errors import ApiError
from common.records import RawRecord, Sample, Skipped, SleepSession, Workout
from common.timeutil import in_sane_range, tz_from_minutes
from connectors.checkpoint import Checkpoint
from connectors.screen import OUT_OF_RANGE, READ_ERRORS, screen

SOURCE = "whoop"
SOURCE_NAME = "whoop_api"
PAGE_LIMIT = 25
KJ_PER_KCAL = 4.184

STREAMS = ("cycle", "sleep", "recovery", "workout", "profile")
COLLECTIONS = {
    "cycle": "/v2/cycle",
    "sleep": "/v2/activity/sleep",
    "recovery": "/v2/recovery",
    "workout": "/v2/activity/workout",
}
PROFILE_PATH = "/v2/user/profile/basic"
SCOPES = (
    "offline",
    "read:profile",
    "read:cycles",
    "read:recovery",
    "read:sleep",
    "read:workout",
    "read:body_measurement",
)


class JsonClient(Protocol):
    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


# -- helpers ------------------------------------------------------------------------------
def iso_z(ts: datetime) -> str:
    """WHOOP's own timestamp style: 2026-05-24T08:30:00.000Z."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    try:
        return dt.astimezone(UTC)
    except OverflowError:  # year 1 at +14:00: kept in its own offset, refused by the range check
        return dt


MAX_OFFSET_MIN = 18 * 60  # ISO 8601's widest offset; real zones span -12:00 .. +14:00
UNREADABLE = "unreadable record"


def parse_offset(value: Any) -> int | None:
    """'+hh:mm' / '-hh:mm' / 'Z' -> minutes east of UTC (None: absent or impossible)."""
    if not isinstance(value, str) or not value:
        return None
    if value in ("Z", "z"):
        return 0
    sign = -1 if value[0] == "-" else 1
    body = value.lstrip("+-")
    try:
        hh, _, mm = body.partition(":")
        minutes = int(hh) * 60 + int(mm or 0)
    except ValueError:
        return None
    if minutes > MAX_OFFSET_MIN or int(mm or 0) > 59:
        return None
    return sign * minutes


def _local_day(ts: datetime, offset_min: int | None) -> date:
    return ts.astimezone(tz_from_minutes(offset_min or 0)).date()


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _min(milli: Any) -> float | None:
    v = _num(milli)
    return None if v is None else v / 60_000.0


def _kcal(kj: Any) -> float | None:
    v = _num(kj)
    return None if v is None else v / KJ_PER_KCAL


def _score(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The score object only when SCORED (WHOOP omits it otherwise)."""
    score = rec.get("score")
    if rec.get("score_state") != "SCORED" or not isinstance(score, dict):
        return {}
    return score


def _raw(kind: str, key: Any, rec: Mapping[str, Any], fetched_at: datetime) -> RawRecord:
    return RawRecord(
        source=SOURCE,
        kind=kind,
        natural_key=str(key),
        payload=json.dumps(rec, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
        fetched_at=fetched_at,
    )


def _is_final(stream: str, rec: Mapping[str, Any]) -> bool:
    if rec.get("score_state") == "PENDING_SCORE":
        return False
    return not (stream == "cycle" and not rec.get("end"))


# -- mapping: one API record -> records ---------------------------------------------------
def map_cycle(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    yield _raw("cycle", rec["id"], rec, fetched_at)
    start, end = parse_ts(rec.get("start")), parse_ts(rec.get("end"))
    if start is None or end is None:
        return  # the open cycle: raw only until it ends (its strain is still growing)
    off = parse_offset(rec.get("timezone_offset"))
    local_start = start.astimezone(tz_from_minutes(off or 0))
    # A cycle starts when the person falls asleep; an evening start belongs to the next day.
    day = local_start.date() + timedelta(days=1) if local_start.hour >= 12 else local_start.date()
    score = _score(rec)
    detail = {
        "cycle_id": rec.get("id"),
        "score_state": rec.get("score_state"),
        "energy_kcal": _kcal(score.get("kilojoule")),
        "avg_hr_bpm": _num(score.get("average_heart_rate")),
        "max_hr_bpm": _num(score.get("max_heart_rate")),
    }
    yield Sample(
        source=SOURCE,
        metric="strain",
        start_ts=start,
        end_ts=end,
        value=_num(score.get("strain")),  # type: ignore[arg-type]  # None while pending
        unit="score",
        local_day=day,
        source_name=SOURCE_NAME,
        tz_offset_min=off,
        detail=json.dumps(detail, sort_keys=True),
    )


def map_sleep(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    yield _raw("sleep", rec["id"], rec, fetched_at)
    start, end = parse_ts(rec.get("start")), parse_ts(rec.get("end"))
    if start is None or end is None:
        return
    off = parse_offset(rec.get("timezone_offset"))
    score = _score(rec)
    stages = score.get("stage_summary") or {}
    in_bed = _min(stages.get("total_in_bed_time_milli"))
    awake = _min(stages.get("total_awake_time_milli"))
    no_data = _min(stages.get("total_no_data_time_milli"))
    asleep = None
    if in_bed is not None and awake is not None:
        asleep = in_bed - awake - (no_data or 0.0)
    yield SleepSession(
        source=SOURCE,
        session_id=str(rec["id"]),
        start_ts=start,
        end_ts=end,
        local_day=_local_day(end, off),
        sleep_min=asleep,
        in_bed_min=in_bed,
        awake_min=awake,
        light_min=_min(stages.get("total_light_sleep_time_milli")),
        deep_min=_min(stages.get("total_slow_wave_sleep_time_milli")),
        rem_min=_min(stages.get("total_rem_sleep_time_milli")),
        efficiency_pct=_num(score.get("sleep_efficiency_percentage")),
        score=_num(score.get("sleep_performance_percentage")),
        is_nap=bool(rec.get("nap")),
        respiratory_rate_brpm=_num(score.get("respiratory_rate")),
        tz_offset_min=off,
        source_name=SOURCE_NAME,
    )


RECOVERY_METRICS = (
    ("resting_heart_rate", "bpm", "resting_heart_rate"),
    ("hrv_rmssd", "ms", "hrv_rmssd_milli"),
    ("spo2", "pct", "spo2_percentage"),
    ("skin_temp", "degC", "skin_temp_celsius"),
)


def map_recovery(
    rec: Mapping[str, Any], sleep: Mapping[str, Any] | None, fetched_at: datetime
) -> Iterator[Any]:
    """`sleep` is the recovery's sleep record (for its wake-up time); None: raw only."""
    yield _raw("recovery", rec["cycle_id"], rec, fetched_at)
    woke = parse_ts(sleep.get("end")) if sleep else None
    if woke is None:
        return
    off = parse_offset(sleep.get("timezone_offset")) if sleep else None
    day = _local_day(woke, off)
    score = _score(rec)
    detail = json.dumps(
        {
            "cycle_id": rec.get("cycle_id"),
            "sleep_id": rec.get("sleep_id"),
            "score_state": rec.get("score_state"),
            "user_calibrating": score.get("user_calibrating"),
        },
        sort_keys=True,
    )

    def sample(metric: str, unit: str, value: float | None) -> Sample:
        return Sample(
            source=SOURCE,
            metric=metric,
            start_ts=woke,
            end_ts=woke,
            value=value,  # type: ignore[arg-type]  # None while PENDING_SCORE
            unit=unit,
            local_day=day,
            source_name=SOURCE_NAME,
            tz_offset_min=off,
            detail=detail,
        )

    # One recovery row per cycle always (None until scored), the vitals once they exist.
    yield sample("recovery", "pct", _num(score.get("recovery_score")))
    for metric, unit, key in RECOVERY_METRICS:
        value = _num(score.get(key))
        if value is not None:
            yield sample(metric, unit, value)


def map_workout(rec: Mapping[str, Any], fetched_at: datetime) -> Iterator[Any]:
    yield _raw("workout", rec["id"], rec, fetched_at)
    start, end = parse_ts(rec.get("start")), parse_ts(rec.get("end"))
    if start is None or end is None:
        return
    off = parse_offset(rec.get("timezone_offset"))
    score = _score(rec)
    yield Workout(
        source=SOURCE,
        workout_id=str(rec["id"]),
        start_ts=start,
        end_ts=end,
        local_day=_local_day(start, off),
        sport=str(rec.get("sport_name") or rec.get("sport_id") or "unknown"),
        duration_min=(end - start).total_seconds() / 60.0,
        energy_kcal=_kcal(score.get("kilojoule")),
        distance_m=_num(score.get("distance_meter")),
        avg_hr_bpm=_num(score.get("average_heart_rate")),
        max_hr_bpm=_num(score.get("max_heart_rate")),
        strain=_num(score.get("strain")),
        tz_offset_min=off,
        source_name=SOURCE_NAME,
    )


MAPPERS = {"cycle": map_cycle, "sleep": map_sleep, "workout": map_workout}


# -- fetching -----------------------------------------------------------------------------
def pages(
    client: JsonClient, path: str, start: datetime | None, end: datetime | None = None
) -> Iterator[list[dict[str, Any]]]:
    """Every page of one collection; the same start/end/limit on each request."""
    base: dict[str, Any] = {"limit": PAGE_LIMIT}
    if start is not None:
        base["start"] = iso_z(start)
    if end is not None:
        base["end"] = iso_z(end)
    token: str | None = None
    seen: set[str] = set()
    while True:
        params = dict(base)
        if token:
            params["nextToken"] = token
        body = client.get_json(path, params)
        if body is None:
            return
        if not isinstance(body, dict) or not isinstance(body.get("records", []), list):
            raise ApiError(f"whoop: GET {path} returned an unexpected shape")
        yield body.get("records") or []
        token = body.get("next_token") or None
        if not token:
            return
        if token in seen:
            raise ApiError(f"whoop: GET {path} repeated a page token; stopping")
        seen.add(token)


def _cursor(stream: str, records: list[Mapping[str, Any]]) -> str | None:
    starts = [(parse_ts(r.get("start")), _is_final(stream, r)) for r in records]
    if stream == "recovery":  # recoveries have no start: use created_at
        starts = [(parse_ts(r.get("created_at")), _is_final(stream, r)) for r in records]
    # a record dated outside the sane range is left out of the rows (screen), and must not
    # carry the cursor to year 9999 either: every later sync would start there
    known = [(s, fin) for s, fin in starts if s is not None and in_sane_range(s)]
    if not known:
        return None
    latest = max(s for s, _ in known)
    pending = [s for s, fin in known if not fin]
    return iso_z(min([latest, *pending]))


def fetch_stream(
    stream: str,
    since: datetime | None,
    client: JsonClient,
    *,
    fetched_at: datetime,
    until: datetime | None = None,
    sleeps: dict[str, Mapping[str, Any]] | None = None,
) -> Iterator[Any]:
    """One stream: records page by page, then its Checkpoint."""
    if stream == "profile":
        body = client.get_json(PROFILE_PATH)
        if isinstance(body, dict) and body.get("user_id") is not None:
            yield _raw("profile", body["user_id"], body, fetched_at)
        yield Checkpoint(SOURCE, "profile", None)
        return
    sleeps = {} if sleeps is None else sleeps
    seen: list[Mapping[str, Any]] = []
    for page in pages(client, COLLECTIONS[stream], since, until):
        for rec in page:
            if not isinstance(rec, dict):
                continue
            seen.append({k: rec.get(k) for k in ("start", "created_at", "end", "score_state")})
            if stream == "recovery":
                sleep = _sleep_for(client, rec, sleeps)
                yield from _mapped(map_recovery, rec, sleep, fetched_at)
                continue
            if stream == "sleep":
                sleeps[str(rec.get("id"))] = rec
            yield from _mapped(MAPPERS[stream], rec, fetched_at)
    yield Checkpoint(SOURCE, stream, _cursor(stream, seen))


def _mapped(mapper: Any, *args: Any) -> Iterator[Any]:
    """One API record's rows; a record that cannot be mapped (no id, a field of the wrong
    type...) is left out and counted: WHOOP would send it again on every sync."""
    rec = args[0]
    for key in ("start", "end"):
        ts = parse_ts(rec.get(key))
        if ts is not None and not in_sane_range(ts):
            yield Skipped(SOURCE, OUT_OF_RANGE)
            return
    try:
        out = list(mapper(*args))
    except READ_ERRORS:
        yield Skipped(SOURCE, UNREADABLE)
        return
    yield from out


def _sleep_for(
    client: JsonClient, rec: Mapping[str, Any], sleeps: dict[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    sleep_id = rec.get("sleep_id")
    if not sleep_id:
        return None
    key = str(sleep_id)
    if key not in sleeps:
        body = client.get_json(f"{COLLECTIONS['sleep']}/{key}")
        sleeps[key] = body if isinstance(body, dict) else {}
    return sleeps[key] or None


def fetch(
    since: Mapping[str, datetime | None],
    client: JsonClient,
    *,
    streams: tuple[str, ...] = STREAMS,
    now: datetime | None = None,
) -> Iterator[Any]:
    """All streams in order (sleep before recovery, so recoveries find their sleeps).

    `since[stream]` is where each collection starts (the sync has already taken the lag
    window off the stored cursor); None fetches the whole history.
    """
    fetched_at = now or datetime.now(UTC)
    sleeps: dict[str, Mapping[str, Any]] = {}
    order = [s for s in ("cycle", "sleep", "recovery", "workout", "profile") if s in streams]

    def records() -> Iterator[Any]:
        for stream in order:
            yield from fetch_stream(
                stream, since.get(stream), client, fetched_at=fetched_at, sleeps=sleeps
            )

    # out-of-range times and impossible values: left out and counted (connectors/screen.py)
    yield from screen(records(), SOURCE, refuse=False)
