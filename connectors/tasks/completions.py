"""What every task source turns a completed task into: a ``Sample`` (no text).

- A completion with a time: metric ``task_completed`` (unit ``count``), ``start_ts = end_ts``
  = the completion instant, ``value`` = the completions at that instant (1, or more when an
  export's precision puts several on the same minute), ``local_day`` and ``tz_offset_min`` in
  the zone the completion happened in.
- A completion with only a date (some exports): metric ``task_completed_day``, one sample per
  local day spanning it (local midnight to the next), ``value`` = the day's date-only
  completions. Mapping counts these for the day, never for a slot (the time is unknown).

Titles, notes and list names are private text: they stay in the raw payload (``raw_tasks``)
and never reach a sample. Every task sample has ``source = "tasks"`` and ``source_name =
"tasks"``, so the merged layer (one source per metric and window) keeps all of them and two
task apps add up; ``detail`` says where a sample came from (``csv``, or
``google_tasks:<task id>`` for Google Tasks, whose ``device`` is ``google_tasks:<list id>``,
so a deleted task or list can be removed).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.errors import ConfigError
from common.records import Sample

SOURCE = "tasks"  # samples.source and raw_tasks
SOURCE_NAME = "tasks"
METRIC = "task_completed"
DAY_METRIC = "task_completed_day"
UNIT = "count"


def person_zone(name: str | None) -> tzinfo:
    """The zone completions without one of their own are read in: the ``timezone`` setting
    (an IANA name), else this machine's zone, else UTC (as ``rhythm.settings.user_zone``)."""
    if name:
        try:
            return ZoneInfo(str(name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"timezone: unknown zone {name!r} (use an IANA name like Europe/Amsterdam)"
            ) from None
    import tzlocal

    try:
        return tzlocal.reload_localzone()
    except Exception:  # noqa: BLE001 - a machine without a readable zone: UTC, not a crash
        return UTC


def offset_min(dt: datetime) -> int:
    off = dt.utcoffset()
    return int(off.total_seconds() // 60) if off is not None else 0


def completion(
    at: datetime,
    *,
    count: float = 1.0,
    detail: str | None = None,
    device: str | None = None,
) -> Sample:
    """A timed completion; ``at`` is aware and in the local zone of the completion."""
    if at.tzinfo is None:
        raise ValueError("completion time must be aware")
    instant = at.astimezone(UTC)
    return Sample(
        source=SOURCE,
        metric=METRIC,
        start_ts=instant,
        end_ts=instant,
        value=float(count),
        unit=UNIT,
        local_day=at.date(),
        source_name=SOURCE_NAME,
        device=device,
        tz_offset_min=offset_min(at),
        detail=detail,
    )


def day_completions(day: date, zone: tzinfo, count: float, *, detail: str | None = None) -> Sample:
    """``count`` completions known only by their local ``day``: one sample spanning the day."""
    start = datetime.combine(day, time(0), tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
    return Sample(
        source=SOURCE,
        metric=DAY_METRIC,
        start_ts=start.astimezone(UTC),
        end_ts=end.astimezone(UTC),
        value=float(count),
        unit=UNIT,
        local_day=day,
        source_name=SOURCE_NAME,
        tz_offset_min=offset_min(start),
        detail=detail,
    )
