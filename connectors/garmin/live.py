"""Garmin Connect live sync (optional extra `rhythm[garmin]`, unofficial and fragile).

The Garmin account data export (`rhythm import garmin EXPORT.zip`) stays the dependable
route; this module only keeps the last few days current. It talks to the daily JSON
endpoints of connectors.md A2 part 3 through any client with
`get_json(path, params) -> dict | list | None` (None = empty body = no data):

| stream      | endpoint                                              | records                      |
|-------------|-------------------------------------------------------|------------------------------|
| sleep       | /sleep-service/sleep/dailySleepData?date=D            | SleepSession night:D, spo2, skin_temp_deviation |
| hrv         | /hrv-service/hrv/D                                    | hrv_rmssd (last-night avg)   |
| summary     | /usersummary-service/usersummary/daily/?calendarDate=D| steps, energy, distance, RHR, floors, intensity, stress |
| stress      | /wellness-service/wellness/dailyStress/D              | stress and body_battery series |
| heart_rate  | /wellness-service/wellness/dailyHeartRate/?date=D     | heart_rate series            |

`garminconnect` is imported lazily (only `GarminConnectClient`, `login`, `open_client`);
without it those raise a RhythmError telling the user to `pip install 'rhythm[garmin]'`.
Logins are rare: the library's tokens are kept in RHYTHM_HOME/tokens/garmin/ (0600) and
reused; Garmin rate-limits logins hard (connectors.md A2).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from common.errors import ApiError, AuthError, RateLimited, RhythmError
from common.records import RawRecord, Sample, Skipped, SleepSession
from connectors.checkpoint import Checkpoint
from connectors.http import RetryPolicy, with_retries
from connectors.screen import READ_ERRORS, screen

SOURCE = "garmin"
SOURCE_NAME = "garmin_connect"
STREAM = "daily"
DEFAULT_API_BASE = "https://connectapi.garmin.com"
INSTALL_HINT = "garmin: live sync needs the optional extra: pip install 'rhythm[garmin]'"

ENDPOINTS: dict[str, Callable[[date], tuple[str, dict[str, str] | None]]] = {
    "sleep": lambda d: ("/sleep-service/sleep/dailySleepData", {"date": d.isoformat()}),
    "hrv": lambda d: (f"/hrv-service/hrv/{d.isoformat()}", None),
    "summary": lambda d: ("/usersummary-service/usersummary/daily/", {"calendarDate": d.isoformat()}),
    "stress": lambda d: (f"/wellness-service/wellness/dailyStress/{d.isoformat()}", None),
    "heart_rate": lambda d: ("/wellness-service/wellness/dailyHeartRate/", {"date": d.isoformat()}),
}


class JsonClient(Protocol):
    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


# -- helpers ------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
UNREADABLE = "unreadable record"


def _ms(v: Any) -> datetime | None:
    """Epoch milliseconds -> aware UTC (OverflowError/ValueError past year 9999 or for NaN:
    the day's body is then left out and counted, see `map_day`)."""
    n = _num(v)
    return None if n is None else _EPOCH + timedelta(milliseconds=n)


def _gmt(v: Any) -> datetime | None:
    """'2023-07-20T06:00:00.0' (GMT without a zone), '...Z', or epoch ms -> aware UTC."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return _ms(v)
    if not isinstance(v, str) or not v:
        return None
    try:
        dt = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _offset(local: Any, gmt: Any) -> int | None:
    """Minutes east of UTC from Garmin's pair of '...Local' (wall clock as if UTC) and GMT."""
    lo, gm = _gmt(local), _gmt(gmt)
    if lo is None or gm is None:
        return None
    return int(round((lo - gm).total_seconds() / 900.0) * 15)


def _empty(body: Any) -> bool:
    return body is None or body == {} or body == [] or body == ""


def _raw(kind: str, day: date, body: Any, fetched_at: datetime) -> RawRecord:
    return RawRecord(
        source=SOURCE,
        kind=f"connect_{kind}",
        natural_key=day.isoformat(),
        payload=json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
        fetched_at=fetched_at,
    )


def _sample(
    metric: str, unit: str, value: float, start: datetime, end: datetime, day: date,
    offset: int | None, detail: str | None = None,
) -> Sample:
    return Sample(
        source=SOURCE, metric=metric, start_ts=start, end_ts=end, value=value, unit=unit,
        local_day=day, source_name=SOURCE_NAME, tz_offset_min=offset, detail=detail,
    )


# -- mapping: one endpoint body of one day -> records ---------------------------------------
def map_sleep(body: Mapping[str, Any], day: date) -> Iterator[Any]:
    dto = body.get("dailySleepDTO") if isinstance(body, dict) else None
    if not isinstance(dto, dict) or dto.get("id") is None:
        return  # a no-data night comes back as a DTO full of nulls
    start, end = _ms(dto.get("sleepStartTimestampGMT")), _ms(dto.get("sleepEndTimestampGMT"))
    if start is None or end is None or end <= start:
        return
    off = _offset(dto.get("sleepStartTimestampLocal"), dto.get("sleepStartTimestampGMT"))
    stages = [_num(dto.get(k)) for k in ("deepSleepSeconds", "lightSleepSeconds", "remSleepSeconds")]
    known = [s / 60.0 for s in stages if s is not None]
    scores = dto.get("sleepScores") or {}
    overall = scores.get("overall") if isinstance(scores, dict) else None
    awake = _num(dto.get("awakeSleepSeconds"))
    yield SleepSession(
        source=SOURCE,
        session_id=f"night:{day.isoformat()}",  # same key as the account-export reader
        start_ts=start,
        end_ts=end,
        local_day=day,  # calendarDate is the wake-up day
        sleep_min=sum(known) if known else None,
        in_bed_min=(end - start).total_seconds() / 60.0,
        awake_min=None if awake is None else awake / 60.0,
        light_min=None if stages[1] is None else stages[1] / 60.0,
        deep_min=None if stages[0] is None else stages[0] / 60.0,
        rem_min=None if stages[2] is None else stages[2] / 60.0,
        score=_num(overall.get("value")) if isinstance(overall, dict) else None,
        respiratory_rate_brpm=_num(dto.get("averageRespirationValue")),
        resting_hr_bpm=_num(body.get("restingHeartRate")),
        tz_offset_min=off,
        source_name=SOURCE_NAME,
    )
    spo2 = _num(dto.get("averageSpO2Value"))
    if spo2 is not None and spo2 > 0:
        yield _sample("spo2", "pct", spo2, start, end, day, off, detail="sleep average")
    skin = _num(body.get("avgSkinTempDeviationC"))
    if skin is not None:
        yield _sample(
            "skin_temp_deviation", "degC", skin, start, end, day, off, detail="sleep average"
        )


def map_hrv(body: Mapping[str, Any], day: date) -> Iterator[Any]:
    summary = body.get("hrvSummary") if isinstance(body, dict) else None
    readings = [r for r in body.get("hrvReadings") or [] if isinstance(r, dict)] if isinstance(body, dict) else []
    value = _num(summary.get("lastNightAvg")) if isinstance(summary, dict) else None
    times = [t for t in (_gmt(r.get("readingTimeGMT")) for r in readings) if t is not None]
    if value is None or not times:
        return  # no nightly value, or no readings to place it in time
    first = readings[0]
    off = _offset(first.get("readingTimeLocal"), first.get("readingTimeGMT"))
    detail = {
        k: summary.get(k) for k in ("weeklyAvg", "lastNight5MinHigh", "status", "baseline")
        if summary.get(k) is not None
    }
    yield _sample(
        "hrv_rmssd", "ms", value, min(times), max(times), day, off,
        detail=json.dumps({"hrv": "lastNightAvg", **detail}, sort_keys=True),
    )


def map_summary(body: Mapping[str, Any], day: date) -> Iterator[Any]:
    if not isinstance(body, dict):
        return
    start, end = _gmt(body.get("wellnessStartTimeGmt")), _gmt(body.get("wellnessEndTimeGmt"))
    if start is None or end is None or end < start:
        return
    off = _offset(body.get("wellnessStartTimeLocal"), body.get("wellnessStartTimeGmt"))
    fields = (
        ("steps", "count", "totalSteps"),
        ("active_energy", "kcal", "activeKilocalories"),
        ("basal_energy", "kcal", "bmrKilocalories"),
        ("distance", "m", "totalDistanceMeters"),
        ("resting_heart_rate", "bpm", "restingHeartRate"),
        ("floors", "count", "floorsAscended"),
    )
    for metric, unit, key in fields:
        value = _num(body.get(key))
        if value is not None:
            yield _sample(metric, unit, value, start, end, day, off)
    moderate, vigorous = _num(body.get("moderateIntensityMinutes")), _num(body.get("vigorousIntensityMinutes"))
    if moderate is not None or vigorous is not None:
        yield _sample(
            "intensity_minutes", "min", (moderate or 0.0) + (vigorous or 0.0), start, end, day, off,
            detail=json.dumps({"moderate": moderate, "vigorous": vigorous}),
        )
    stress = _num(body.get("averageStressLevel"))
    if stress is not None and stress >= 0:  # -1/-2: not enough data
        yield _sample("stress", "score", stress, start, end, day, off, detail="daily average")


def map_stress(body: Mapping[str, Any], day: date) -> Iterator[Any]:
    if not isinstance(body, dict):
        return
    off = _offset(body.get("startTimestampLocal"), body.get("startTimestampGMT"))
    for row in body.get("stressValuesArray") or []:
        if isinstance(row, list) and len(row) >= 2:
            ts, level = _ms(row[0]), _num(row[1])
            if ts is not None and level is not None and level >= 0:  # -1 off wrist, -2 moving
                yield _sample("stress", "score", level, ts, ts, day, off)
    for row in body.get("bodyBatteryValuesArray") or []:
        if isinstance(row, list) and len(row) >= 3:
            ts, level = _ms(row[0]), _num(row[2])
            if ts is not None and level is not None:
                yield _sample(
                    "body_battery", "score", level, ts, ts, day, off,
                    detail=str(row[1]) if row[1] is not None else None,
                )


def map_heart_rate(body: Mapping[str, Any], day: date) -> Iterator[Any]:
    if not isinstance(body, dict):
        return
    off = _offset(body.get("startTimestampLocal"), body.get("startTimestampGMT"))
    for row in body.get("heartRateValues") or []:
        if isinstance(row, list) and len(row) >= 2:
            ts, bpm = _ms(row[0]), _num(row[1])
            if ts is not None and bpm is not None:
                yield _sample("heart_rate", "bpm", bpm, ts, ts, day, off)


MAPPERS: dict[str, Callable[[Mapping[str, Any], date], Iterator[Any]]] = {
    "sleep": map_sleep,
    "hrv": map_hrv,
    "summary": map_summary,
    "stress": map_stress,
    "heart_rate": map_heart_rate,
}


def map_day(kind: str, body: Any, day: date, fetched_at: datetime) -> Iterator[Any]:
    """Raw payload plus normalised records; an empty body is "no data" (nothing at all).

    A body that cannot be mapped (a field of an unexpected type, an epoch past year 9999)
    keeps its raw row and is counted as skipped: the next sync would get it again, so it
    must not stop the sync."""
    if _empty(body):
        return
    try:
        raw = _raw(kind, day, body, fetched_at)
        records = list(MAPPERS[kind](body, day))
    except READ_ERRORS:
        yield Skipped(SOURCE, UNREADABLE)
        return
    yield raw
    yield from records


# -- fetching -----------------------------------------------------------------------------
def days_to_fetch(cursor: str | None, today: date, first_days: int, lag_days: int = 2) -> list[date]:
    """First sync: the last `first_days` days; later: from the cursor minus `lag_days`."""
    if cursor:
        try:
            start = date.fromisoformat(cursor) - timedelta(days=lag_days)
        except ValueError:
            start = today - timedelta(days=first_days - 1)
    else:
        start = today - timedelta(days=max(first_days, 1) - 1)
    start = min(start, today)
    return [start + timedelta(days=i) for i in range((today - start).days + 1)]


def fetch(
    since: list[date], client: JsonClient, *, now: datetime | None = None,
    kinds: tuple[str, ...] = tuple(ENDPOINTS),
) -> Iterator[Any]:
    """Each day in `since` (the days to fetch), each endpoint; then the `daily` Checkpoint."""
    fetched_at = now or datetime.now(UTC)

    def records() -> Iterator[Any]:
        for day in since:
            for kind in kinds:
                path, params = ENDPOINTS[kind](day)
                yield from map_day(kind, client.get_json(path, params), day, fetched_at)
        if since:
            yield Checkpoint(SOURCE, STREAM, max(since).isoformat())

    # out-of-range times and impossible values: left out and counted (connectors/screen.py)
    yield from screen(records(), SOURCE, refuse=False)


# -- the garminconnect adapter (optional dependency) ---------------------------------------
def _garminconnect() -> Any:
    try:
        import garminconnect
    except ImportError:
        raise RhythmError(INSTALL_HINT) from None
    return garminconnect


@contextlib.contextmanager
def _private_files(token_dir: Path) -> Iterator[None]:
    """While garminconnect may write its token files: the folder is 0700 and the process
    umask 077, so every file it creates is 0600 from its first byte (nothing is chmod-ed
    after it was written); files of an older version are made 0600 before they are
    rewritten."""
    token_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(token_dir, 0o700)
    for p in token_dir.iterdir():
        if p.is_file() and not p.is_symlink():
            os.chmod(p, 0o600)
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


class GarminConnectClient:
    """`get_json` on top of a logged-in `garminconnect.Garmin`, with bounded retries."""

    def __init__(
        self, garmin: Any, *, policy: RetryPolicy | None = None, api_base: str | None = None,
        token_dir: Path | None = None,
    ):
        self.garmin = garmin
        self.token_dir = token_dir  # where a refreshed token may be written back
        self.policy = policy or RetryPolicy()
        inner = getattr(garmin, "client", None)
        if api_base and api_base.rstrip("/") != DEFAULT_API_BASE and inner is not None:
            # garminconnect 0.3 builds URLs from this attribute; best effort for self-hosters.
            inner._connectapi = api_base.rstrip("/")

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        gc = _garminconnect()

        def classify(exc: BaseException) -> tuple[str, float | None] | None:
            if isinstance(exc, gc.GarminConnectTooManyRequestsError):
                return ("rate", None)
            if isinstance(exc, gc.GarminConnectAuthenticationError):
                return None
            if isinstance(exc, gc.GarminConnectConnectionError):
                text = str(exc)
                return None if "client error" in text or "API Error 4" in text else ("server", None)
            return None

        kwargs = {"params": dict(params)} if params else {}
        private = _private_files(self.token_dir) if self.token_dir is not None else contextlib.nullcontext()
        try:
            with private:
                body = with_retries(
                    lambda: self.garmin.connectapi(path, **kwargs), name="garmin",
                    policy=self.policy, classify=classify,
                )
        except gc.GarminConnectAuthenticationError:
            raise AuthError("garmin: the stored login was refused; run `rhythm auth garmin`") from None
        except gc.GarminConnectTooManyRequestsError:
            raise RateLimited("garmin: rate limited by Garmin; try again later") from None
        except gc.GarminConnectConnectionError as exc:
            raise ApiError(f"garmin: GET {path} failed ({str(exc).splitlines()[0][:120]})") from None
        return None if _empty(body) else body


def login(token_dir: Path, email: str, password: str, prompt_mfa: Callable[[], str] | None = None) -> None:
    """One interactive login; the tokens it yields are stored for every later sync."""
    gc = _garminconnect()
    garmin = gc.Garmin(email=email, password=password, prompt_mfa=prompt_mfa)
    try:
        with _private_files(token_dir):
            garmin.login(tokenstore=str(token_dir))
            garmin.client.dump(str(token_dir))
    except gc.GarminConnectTooManyRequestsError:
        raise RateLimited("garmin: Garmin is rate limiting logins; wait an hour and try again") from None
    except (gc.GarminConnectAuthenticationError, gc.GarminConnectConnectionError) as exc:
        raise AuthError(f"garmin: login failed ({type(exc).__name__})") from None


def open_client(token_dir: Path, *, api_base: str | None = None, policy: RetryPolicy | None = None) -> GarminConnectClient:
    """Reuse the stored tokens (no password); refreshed tokens are written back."""
    gc = _garminconnect()
    if not token_dir.exists() or not any(token_dir.iterdir()):
        raise AuthError("garmin: not logged in yet; run `rhythm auth garmin`")
    garmin = gc.Garmin()
    try:
        with _private_files(token_dir):
            garmin.login(tokenstore=str(token_dir))
    except gc.GarminConnectTooManyRequestsError:
        raise RateLimited("garmin: rate limited by Garmin; try again later") from None
    except (gc.GarminConnectAuthenticationError, gc.GarminConnectConnectionError):
        raise AuthError("garmin: the stored login no longer works; run `rhythm auth garmin`") from None
    return GarminConnectClient(garmin, policy=policy, api_base=api_base, token_dir=token_dir)
