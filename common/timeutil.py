"""Local day and slot arithmetic shared by connectors, storage and mapping."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

# Slots of product.md: morning 06-12, afternoon 12-18, evening 18-23, night 23-06.
# The night belongs to the day it started on, so 00:00-06:00 is the previous day's night.
SLOT_BOUNDS = ((6, 12), (12, 18), (18, 23), (23, 30))


def offset_minutes(ts: datetime) -> int | None:
    off = ts.utcoffset()
    return None if off is None else int(off.total_seconds() // 60)


def tz_from_minutes(minutes: int) -> timezone:
    return timezone(timedelta(minutes=minutes))


def slot_of(local_dt: datetime) -> tuple[date, int]:
    """(day, slot index) of a local wall-clock time."""
    h = local_dt.hour
    if h < 6:
        return local_dt.date() - timedelta(days=1), 3
    if h < 12:
        return local_dt.date(), 0
    if h < 18:
        return local_dt.date(), 1
    if h < 23:
        return local_dt.date(), 2
    return local_dt.date(), 3


def slot_window(day: date, slot: int, tz: timezone) -> tuple[datetime, datetime]:
    """Aware start and end of a slot of a local day."""
    start_h, end_h = SLOT_BOUNDS[slot]
    base = datetime(day.year, day.month, day.day, tzinfo=tz)
    return base + timedelta(hours=start_h), base + timedelta(hours=end_h)


# -- the sane range of instants (issue 22) ----------------------------------------------------
# Every connector refuses a timestamp outside this range: nothing a wearable or a calendar
# records falls before 1900 or after 2100, and Python's date arithmetic (a local day minus a
# few days, an offset of +14 h) stays far from its limits (years 1 and 9999) inside it.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
EARLIEST_DAY = EARLIEST.date()
LATEST_DAY = LATEST.date()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# the same bounds in microseconds since 1970-01-01 UTC (for Arrow / numpy columns)
EARLIEST_US = (EARLIEST - _EPOCH) // timedelta(microseconds=1)
LATEST_US = (LATEST - _EPOCH) // timedelta(microseconds=1)
SANE_RANGE = f"{EARLIEST_DAY.isoformat()} .. {LATEST_DAY.isoformat()}"


def in_sane_range(ts: datetime | date) -> bool:
    """True if `ts` lies in 1900-01-01 .. 2100-12-31 (an aware instant, compared in UTC; a
    naive datetime is read as UTC; a date is compared as a calendar day)."""
    if isinstance(ts, datetime):
        if ts.tzinfo is None or ts.utcoffset() is None:
            ts = ts.replace(tzinfo=UTC)
        return EARLIEST <= ts <= LATEST
    return EARLIEST_DAY <= ts <= LATEST_DAY


def out_of_range_detail(what: str, value: object) -> str:
    """The message every connector uses for a timestamp outside the sane range."""
    return f"{what} {value} is outside the accepted range {SANE_RANGE}"
