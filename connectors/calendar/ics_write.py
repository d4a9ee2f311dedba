"""Rhythm's blocks as an iCalendar file (the writer behind ``rhythm plan export --ics``).

``to_ics(blocks, zone)`` returns the bytes of one VCALENDAR with a VEVENT per block:

- ``UID`` ``rhythm-<day>-<slot>@rhythm.local``: stable, so importing a newer export into a
  calendar app updates the block instead of adding a second one; ``SEQUENCE`` grows with the
  plan's time (seconds since 2020), ``LAST-MODIFIED`` and ``DTSTAMP`` are the plan's time, so
  exporting the same plan twice gives the same bytes;
- marked as Rhythm's: the UID suffix, ``X-RHYTHM-BLOCK:1``, ``CATEGORIES:Rhythm`` (and
  ``X-RHYTHM-KEY``, ``X-RHYTHM-ACTION``, ``X-RHYTHM-KIND``, ``X-RHYTHM-RECOMMENDATION``);
- ``TRANSP:TRANSPARENT`` (free) unless the block is busy (``OPAQUE``);
- ``DTSTART``/``DTEND`` with ``TZID`` of the person's zone and a generated ``VTIMEZONE``
  (covering only the years the blocks fall in), or in UTC when the zone has no IANA name.

Pure: no clock, no database, no network.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import icalendar

from common.rhythm_blocks import ICS_CATEGORY, ICS_MARK, CalendarBlock

PRODID = "-//Rhythm//plan export//EN"
CALENDAR_NAME = "Rhythm"
_EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
_UTC_NAMES = {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Zulu", "Etc/Zulu", "GMT", "Etc/GMT", "Universal", "Etc/Universal"}


def ical_zone(zone: tzinfo | str | None) -> ZoneInfo | None:
    """The IANA zone events are written in, or None for UTC (no name, or UTC itself)."""
    name = zone if isinstance(zone, str) else getattr(zone, "key", None)
    if not name or name in _UTC_NAMES:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def sequence(planned_at: datetime) -> int:
    """SEQUENCE of a block: whole seconds from 2020 to the plan (a later plan, a higher one)."""
    return max(0, int((planned_at.astimezone(UTC) - _EPOCH).total_seconds()))


def to_ics(blocks: Iterable[CalendarBlock], zone: tzinfo | str | None) -> bytes:
    """One VCALENDAR with Rhythm's blocks, in start order."""
    tz = ical_zone(zone)
    items = sorted(blocks, key=lambda b: (b.start, b.key))
    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("calscale", "GREGORIAN")
    cal.add("method", "PUBLISH")
    cal.add("x-wr-calname", CALENDAR_NAME)
    if tz is not None:
        cal.add("x-wr-timezone", tz.key)
    for b in items:
        cal.add_component(_vevent(b, tz))
    if tz is not None and items:
        first = min(b.start.astimezone(tz).date() for b in items)
        last = max(b.end.astimezone(tz).date() for b in items)
        cal.add_missing_timezones(first_date=date(first.year, 1, 1), last_date=date(last.year + 2, 1, 1))
    return cal.to_ical()


def _vevent(b: CalendarBlock, tz: ZoneInfo | None) -> icalendar.Event:
    def when(t: datetime) -> datetime:
        return t.astimezone(tz) if tz is not None else t.astimezone(UTC)

    stamp = b.planned_at.astimezone(UTC).replace(microsecond=0)
    ev = icalendar.Event()
    ev.add("uid", b.uid)
    ev.add("dtstamp", stamp)
    ev.add("last-modified", stamp)
    ev.add("sequence", sequence(b.planned_at))
    ev.add("dtstart", when(b.start))
    ev.add("dtend", when(b.end))
    ev.add("summary", b.summary)
    ev.add("description", b.description)
    ev.add("transp", "OPAQUE" if b.busy else "TRANSPARENT")
    ev.add("categories", [ICS_CATEGORY])
    ev.add(ICS_MARK, "1")
    ev.add("x-rhythm-key", b.key)
    if b.action:
        ev.add("x-rhythm-action", b.action)
    if b.kind:
        ev.add("x-rhythm-kind", b.kind)
    if b.recommendation_id is not None:
        ev.add("x-rhythm-recommendation", str(b.recommendation_id))
    return ev
