"""Local day and slot arithmetic shared by connectors, storage and mapping."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

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
