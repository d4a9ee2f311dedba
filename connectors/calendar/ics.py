"""Calendar ``.ics`` files -> ``Event`` rows, one per occurrence (icalendar +
recurring-ical-events + x-wr-timezone).

- ``calendar_id``: ``X-WR-CALNAME`` when present, else the file name without ``.ics``.
- ``event_id``: the ``UID`` for a one-off event; ``UID/<RECURRENCE-ID>`` for an occurrence of
  a series (RECURRENCE-ID in UTC ISO form, or the date for all-day series). A moved instance
  keeps its RECURRENCE-ID, so it replaces the slot it came from; re-imports never duplicate.
- Expansion: one-off events and finite series (``COUNT``/``UNTIL``) are imported whole;
  open-ended series are expanded only inside the window ``[window_start, window_end)``
  (default: now - ``window_past_days`` (730) .. now + ``window_future_days`` (60)).
- ``EXDATE`` occurrences do not exist; ``STATUS:CANCELLED`` occurrences are kept with
  ``status="cancelled"`` so a re-import marks a previously imported instance as cancelled.
- ``X-WR-TIMEZONE`` (Google) is applied to UTC and floating times first (x-wr-timezone).
- All-day (``VALUE=DATE``) events start at local midnight in the calendar's zone
  (``X-WR-TIMEZONE``), or UTC when the calendar names none; ``DTEND`` is exclusive.
  Remaining floating times are read in the same zone. ``local_day`` is the start date in the
  event's own zone.
- ``attendees_count``: ATTENDEE lines minus rooms/resources (``CUTYPE=ROOM|RESOURCE``);
  ``None`` when the event lists none (an .ics cannot tell "alone" from "not exported").
  ``self_response`` is unknown in .ics (``None``). Title, description and location are
  stored as written (untrusted text).
- Raw: one ``vevent`` row per VEVENT as written (key ``<calendar_id>/<UID>[/<RECURRENCE-ID>]``)
  and one ``vcalendar`` row for the calendar's own properties.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import icalendar
import recurring_ical_events
import x_wr_timezone

from common.errors import SourceFormatError
from common.records import Event, RawRecord

SOURCE = "calendar"
Progress = Callable[[float, float | None], None]
DEFAULT_PAST_DAYS = 730
DEFAULT_FUTURE_DAYS = 60

# Properties whose errors make an event unusable.
_CRITICAL = {None, "DTSTART", "DTEND", "DURATION", "RRULE", "RDATE", "EXDATE", "RECURRENCE-ID", "UID"}


def read_export(
    path: str | Path,
    progress: Progress | None = None,
    window_past_days: int = DEFAULT_PAST_DAYS,
    window_future_days: int = DEFAULT_FUTURE_DAYS,
    window_start: date | datetime | str | None = None,
    window_end: date | datetime | str | None = None,
    now: datetime | None = None,
    **_opts: Any,
) -> Iterator[Any]:
    """Yield raw and ``Event`` records for one ``.ics`` file or every ``*.ics`` in a folder."""
    path = Path(path).expanduser()
    now = now or datetime.now(UTC)
    start = _as_datetime(window_start) if window_start is not None else now - timedelta(days=window_past_days)
    end = _as_datetime(window_end) if window_end is not None else now + timedelta(days=window_future_days)
    if end <= start:
        raise SourceFormatError(str(path), f"empty window: {start.isoformat()} .. {end.isoformat()}")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".ics")
        if not files:
            raise SourceFormatError(str(path), "no .ics files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise SourceFormatError(str(path), "no such file or folder")
    total = sum(p.stat().st_size for p in files)
    done = 0
    fetched_at = datetime.now(UTC)
    for p in files:
        yield from read_ics(p.read_bytes(), str(p), start, end, fetched_at)
        done += p.stat().st_size
        if progress:
            progress(done, total)


def _as_datetime(v: date | datetime | str) -> datetime:
    if isinstance(v, str):
        v = datetime.fromisoformat(v) if "T" in v or " " in v else date.fromisoformat(v)
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    return datetime.combine(v, time(0), tzinfo=UTC)


# -- one file --------------------------------------------------------------------------------
def read_ics(
    data: bytes, name: str, window_start: datetime, window_end: datetime, fetched_at: datetime
) -> Iterator[Any]:
    text = data.decode("utf-8", errors="replace")
    cal = _parse(data, text, name)
    cal_name = _text(cal.get("X-WR-CALNAME"))
    calendar_id = cal_name or Path(name).name.rsplit(".", 1)[0]
    cal_tz = _zone(_text(cal.get("X-WR-TIMEZONE")))
    written = cal
    try:
        cal = x_wr_timezone.to_standard(cal)
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceFormatError(name, f"cannot apply X-WR-TIMEZONE: {exc}") from None

    yield RawRecord(
        source=SOURCE,
        kind="vcalendar",
        natural_key=calendar_id,
        payload=json.dumps(
            {"file": Path(name).name, **{k: _text(v) for k, v in written.items()}},
            ensure_ascii=False,
        ),
        fetched_at=fetched_at,
    )
    for comp in written.walk("VEVENT"):
        uid = _uid(comp)
        rid = comp.get("RECURRENCE-ID")
        key = f"{calendar_id}/{uid}" + (f"/{_rid_key(rid.dt)}" if rid is not None else "")
        yield RawRecord(
            source=SOURCE,
            kind="vevent",
            natural_key=key,
            payload=json.dumps(
                {"calendar_id": calendar_id, "uid": uid, "ical": comp.to_ical().decode("utf-8", "replace")},
                ensure_ascii=False,
            ),
            fetched_at=fetched_at,
        )

    vevents = list(cal.walk("VEVENT"))
    series_uids = {
        _uid(c)
        for c in vevents
        if any(c.get(k) is not None for k in ("RRULE", "RDATE", "RECURRENCE-ID"))
    }
    # Split series: open-ended ones are bounded by the window, the rest imported whole.
    open_uids = {
        _uid(c)
        for c in vevents
        if c.get("RECURRENCE-ID") is None and _open_ended(c)
    }
    bounded = _subcalendar(cal, [c for c in vevents if _uid(c) not in open_uids])
    unbounded = _subcalendar(cal, [c for c in vevents if _uid(c) in open_uids])
    seen: set[str] = set()
    try:
        occurrences = list(recurring_ical_events.of(bounded).all())
        if open_uids:
            occurrences += list(recurring_ical_events.of(unbounded).between(window_start, window_end))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SourceFormatError(name, f"cannot expand recurring events: {type(exc).__name__}: {exc}") from None
    for occ in occurrences:
        ev = _event(occ, calendar_id, cal_tz, name, series_uids)
        if ev is not None and ev.event_id not in seen:
            seen.add(ev.event_id)
            yield ev


def _parse(data: bytes, text: str, name: str) -> icalendar.Calendar:
    if not text.lstrip("\ufeff \r\n\t").upper().startswith("BEGIN:VCALENDAR"):
        raise SourceFormatError(name, "not an iCalendar file (no BEGIN:VCALENDAR)", "line 1")
    try:
        cal = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        msg = str(exc)
        line = _locate(text, msg)
        if "no components" in msg.lower() or not text.rstrip().upper().endswith("END:VCALENDAR"):
            n = text.count("\n") + 1
            raise SourceFormatError(
                name, "truncated iCalendar file (no END:VCALENDAR)", f"line {n} (end of file)"
            ) from None
        raise SourceFormatError(name, f"malformed iCalendar: {msg}", line) from None
    for comp in cal.walk():
        if comp.name not in ("VEVENT", "VCALENDAR"):
            continue
        for prop, msg in getattr(comp, "errors", []) or []:
            if prop in _CRITICAL:
                raise SourceFormatError(
                    name, f"malformed {comp.name} {prop or 'line'}: {msg}", _locate(text, msg, prop)
                )
    return cal


def _locate(text: str, msg: str, prop: str | None = None) -> str | None:
    """Best-effort 'line N' of the offending line, from a quoted fragment in the message."""
    fragments = [part for i, part in enumerate(msg.split("'")) if i % 2 == 1 and part.strip()]
    lines = text.splitlines()
    for n, line in enumerate(lines, start=1):
        if prop is not None and line.upper().startswith(prop) and ":" in line:
            value = line.split(":", 1)[1].strip()
            if value and value in msg:
                return f"line {n}"
        elif prop is None and any(frag in line for frag in fragments):
            return f"line {n}"
    return None


def _subcalendar(cal: icalendar.Calendar, events: list) -> icalendar.Calendar:
    sub = icalendar.Calendar()
    for k, v in cal.items():
        sub.add(k, v)
    for tz in cal.walk("VTIMEZONE"):
        sub.add_component(tz)
    for ev in events:
        sub.add_component(ev)
    return sub


def _open_ended(comp: Any) -> bool:
    rules = comp.get("RRULE")
    if rules is None:
        return False
    for rule in rules if isinstance(rules, list) else [rules]:
        if "COUNT" not in rule and "UNTIL" not in rule:
            return True
    return False


# -- one occurrence ------------------------------------------------------------------------
def _event(
    occ: Any, calendar_id: str, cal_tz: tzinfo | None, name: str, series_uids: set[str]
) -> Event | None:
    dtstart = occ.get("DTSTART")
    if dtstart is None:
        raise SourceFormatError(name, f"VEVENT {_uid(occ)} has no DTSTART")
    uid = _uid(occ)
    in_series = uid in series_uids
    rid = occ.get("RECURRENCE-ID") if in_series else None
    event_id = uid + (f"/{_rid_key(rid.dt)}" if rid is not None else "")
    start_v = dtstart.dt
    end_prop = occ.get("DTEND")
    end_v = end_prop.dt if end_prop is not None else None
    all_day = isinstance(start_v, date) and not isinstance(start_v, datetime)
    zone = cal_tz or UTC
    if all_day:
        start = datetime.combine(start_v, time(0), tzinfo=zone)
        if isinstance(end_v, date) and not isinstance(end_v, datetime) and end_v > start_v:
            end = datetime.combine(end_v, time(0), tzinfo=zone)
        else:
            end = datetime.combine(start_v + timedelta(days=1), time(0), tzinfo=zone)
        day = start_v
        tz_name = _tz_name(zone) if cal_tz else None
    else:
        start = start_v if start_v.tzinfo else start_v.replace(tzinfo=zone)
        if isinstance(end_v, datetime):
            end = end_v if end_v.tzinfo else end_v.replace(tzinfo=zone)
        elif occ.get("DURATION") is not None:
            end = start + occ["DURATION"].dt
        else:
            end = start
        day = start.date()
        tz_name = _tz_name(start.tzinfo) if start_v.tzinfo else (_tz_name(zone) if cal_tz else None)
    if end < start:
        end = start
    status = (_text(occ.get("STATUS")) or "confirmed").lower()
    transp = _text(occ.get("TRANSP"))
    updated = occ.get("LAST-MODIFIED") or occ.get("DTSTAMP")
    updated_at = updated.dt if updated is not None and isinstance(updated.dt, datetime) else None
    if updated_at is not None and updated_at.tzinfo is None:
        updated_at = updated_at.replace(tzinfo=UTC)
    return Event(
        source=SOURCE,
        calendar_id=calendar_id,
        event_id=event_id,
        start_ts=start,
        end_ts=end,
        all_day=all_day,
        local_day=day,
        title=_text(occ.get("SUMMARY")),
        description=_text(occ.get("DESCRIPTION")),
        location=_text(occ.get("LOCATION")),
        status=status,
        attendees_count=_attendees(occ),
        self_response=None,
        event_type=None,
        transparency=transp.lower() if transp else None,
        timezone=tz_name,
        recurring_event_id=uid if in_series else None,
        updated_at=updated_at,
    )


def _attendees(occ: Any) -> int | None:
    att = occ.get("ATTENDEE")
    if att is None:
        return None
    items = att if isinstance(att, list) else [att]
    return sum(
        1 for a in items if str(getattr(a, "params", {}).get("CUTYPE", "")).upper() not in ("ROOM", "RESOURCE")
    )


def _uid(comp: Any) -> str:
    uid = _text(comp.get("UID"))
    if uid:
        return uid
    basis = f"{_text(comp.get('SUMMARY'))}|{comp.get('DTSTART').to_ical() if comp.get('DTSTART') else ''}"
    return "nouid:" + hashlib.sha1(basis.encode()).hexdigest()[:16]


def _rid_key(v: date | datetime) -> str:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            return v.strftime("%Y-%m-%dT%H:%M:%S")
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return v.isoformat()


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        v = v[0] if v else None
        if v is None:
            return None
    s = str(v)
    return s if s.strip() else None


def _zone(name: str | None) -> tzinfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _tz_name(tz: tzinfo | None) -> str | None:
    if tz is None:
        return None
    return getattr(tz, "key", None) or getattr(tz, "zone", None) or str(tz)
