"""Health Auto Export timestamps -> (UTC epoch seconds, UTC offset, local day, local time).

JSON dates are ``yyyy-MM-dd HH:mm:ss Z`` (``2024-02-03 00:00:00 +0100``): local wall time
with its offset, so the offset in force where the phone was is kept. The aggregated sleep
``date`` may be a bare ``yyyy-MM-dd``. CSV files write local wall time without an offset
(``2024-02-03 00:00:00``, ``2024-02-03 07:17``); those are placed in a zone (the person's
configured ``timezone``, else this machine's).

The common JSON form is parsed by slicing with cached day numbers and offsets (a year of
files has millions of timestamps and a few hundred distinct days); anything else goes through
``datetime.fromisoformat``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
FIRST_YEAR, LAST_YEAR = 1900, 2100  # outside: refused (storage ignores such days anyway)


class BadDate(ValueError):
    """A timestamp the app would not write; the message says why."""


class Instant(NamedTuple):
    epoch: int  # UTC seconds
    offset_min: int  # local offset from UTC
    day: int  # local calendar day, days since 1970-01-01
    second_of_day: int  # local wall-clock seconds since midnight


_DAYS: dict[str, int] = {}
_OFFSETS: dict[str, int] = {}


def _day(text: str) -> int:
    d = _DAYS.get(text)
    if d is None:
        try:
            parsed = date.fromisoformat(text)
        except ValueError:
            raise BadDate(f"not a date: {text!r}") from None
        if not FIRST_YEAR <= parsed.year <= LAST_YEAR:
            raise BadDate(f"date out of range: {text!r}")
        d = _DAYS[text] = parsed.toordinal() - EPOCH_ORDINAL
    return d


def _offset(text: str) -> int:
    off = _OFFSETS.get(text)
    if off is None:
        if len(text) != 5 or text[0] not in "+-" or not text[1:].isdigit():
            raise BadDate(f"not a UTC offset: {text!r}")
        hh, mm = int(text[1:3]), int(text[3:5])
        if hh > 18 or mm > 59:
            raise BadDate(f"not a UTC offset: {text!r}")
        off = _OFFSETS[text] = (hh * 60 + mm) * (-1 if text[0] == "-" else 1)
    return off


def _clock(text: str, value: str) -> int:
    """``HH:mm:ss`` or ``HH:mm`` -> seconds since midnight."""
    if len(text) == 8 and text[2] == ":" and text[5] == ":" and (text[:2] + text[3:5] + text[6:]).isdigit():
        h, m, s = int(text[:2]), int(text[3:5]), int(text[6:])
    elif len(text) == 5 and text[2] == ":" and (text[:2] + text[3:]).isdigit():
        h, m, s = int(text[:2]), int(text[3:]), 0
    else:
        raise BadDate(f"not a time: {value!r}")
    if h > 23 or m > 59 or s > 60:
        raise BadDate(f"not a time: {value!r}")
    return h * 3600 + m * 60 + min(s, 59)


_fromiso = datetime.fromisoformat


def instant(value: object) -> tuple[int, int, int, int]:
    """``parse_instant`` as a plain tuple (epoch, offset_min, day, second_of_day): the hot path."""
    if type(value) is str and len(value) == 25 and value[19] == " " and value[10] == " ":
        try:
            dt = _fromiso(value[:19] + value[20:])  # validates the wall time (C, fast)
        except ValueError:
            raise BadDate(f"not a date: {value!r} (expected yyyy-MM-dd HH:mm:ss +HHMM)") from None
        day = _DAYS.get(value[:10])
        if day is None:
            day = _day(value[:10])
        off = _OFFSETS.get(value[20:])
        if off is None:
            off = _offset(value[20:])
        sod = dt.hour * 3600 + dt.minute * 60 + dt.second
        return day * 86400 + sod - off * 60, off, day, sod
    return tuple(parse_instant(value))  # type: ignore[return-value]


def parse_instant(value: object) -> Instant:
    """A JSON timestamp with its offset (``2024-02-03 07:05:00 +0100``; ISO 8601 forms too)."""
    if not isinstance(value, str):
        raise BadDate(f"not a date: {value!r}")
    if len(value) == 25 and value[10] == " " and value[19] == " ":
        return Instant(*instant(value))
    try:
        dt = datetime.fromisoformat(value.strip().replace(" +", "+").replace(" -", "-"))
    except ValueError:
        raise BadDate(f"not a date: {value!r} (expected yyyy-MM-dd HH:mm:ss +HHMM)") from None
    if dt.tzinfo is None:
        raise BadDate(f"no UTC offset in {value!r} (expected yyyy-MM-dd HH:mm:ss +HHMM)")
    return from_datetime(dt, value)


def from_datetime(dt: datetime, value: object = None) -> Instant:
    if not FIRST_YEAR <= dt.year <= LAST_YEAR:
        raise BadDate(f"date out of range: {value if value is not None else dt}")
    off = dt.utcoffset()
    off_min = int(off.total_seconds() // 60) if off is not None else 0
    day = dt.date().toordinal() - EPOCH_ORDINAL
    sod = dt.hour * 3600 + dt.minute * 60 + dt.second
    return Instant(int(dt.timestamp()), off_min, day, sod)


def parse_day(value: object) -> int:
    """``yyyy-MM-dd`` (or a full timestamp: its local date) -> days since 1970-01-01."""
    if isinstance(value, str) and len(value) == 10:
        return _day(value)
    return parse_instant(value).day


def resolve_zone(name: str | None) -> tzinfo | None:
    """The zone CSV wall times are in: an IANA name, else None (this machine's zone)."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadDate(f"unknown time zone {name!r}") from None


def parse_local(value: object, zone: tzinfo | None) -> Instant:
    """A CSV wall time (``2024-02-03 00:00:00``, ``2024-02-03 07:17``, ``2024-02-03``) in
    ``zone`` (None: this machine's); a written offset wins."""
    if not isinstance(value, str) or not value.strip():
        raise BadDate(f"not a date: {value!r}")
    text = value.strip()
    if len(text) in (25, 22) and text[-5] in "+-" and text[-6] == " ":  # with an offset after all
        return parse_instant(text[:19] + text[-6:] if len(text) == 25 else text[:16] + ":00" + text[-6:])
    day_text, _, clock = text.partition(" ")
    if "T" in day_text and not clock:
        day_text, _, clock = text.partition("T")
    try:
        d = date.fromisoformat(day_text)
    except ValueError:
        raise BadDate(f"not a date: {value!r} (expected yyyy-MM-dd HH:mm:ss)") from None
    sod = _clock(clock, value) if clock else 0
    naive = datetime(d.year, d.month, d.day) + timedelta(seconds=sod)
    aware = naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()
    return from_datetime(aware, value)


def to_datetime(epoch: int, offset_min: int) -> datetime:
    """An aware datetime in the recorded offset."""
    return datetime.fromtimestamp(epoch, UTC).astimezone(_fixed(offset_min))


_FIXED: dict[int, tzinfo] = {}


def _fixed(offset_min: int) -> tzinfo:
    from datetime import timezone

    tz = _FIXED.get(offset_min)
    if tz is None:
        tz = _FIXED[offset_min] = timezone(timedelta(minutes=offset_min))
    return tz


def day_of(days: int) -> date:
    return date.fromordinal(days + EPOCH_ORDINAL)
