"""Calendar ``.ics`` files -> ``Event`` rows, one per occurrence (icalendar +
recurring-ical-events + x-wr-timezone).

- ``calendar_id``: ``X-WR-CALNAME`` when present, else the file name without ``.ics``.
- ``event_id``: the ``UID`` for a one-off event; ``UID/<RECURRENCE-ID>`` for an occurrence of
  a series (RECURRENCE-ID in UTC ISO form, or the date for all-day series). A moved instance
  keeps its RECURRENCE-ID, so it replaces the slot it came from; re-imports never duplicate.
- Expansion: one-off events are imported whole; every series (``RRULE``/``RDATE``) is
  expanded only inside the window ``[window_start, window_end)`` (default: now -
  ``window_past_days`` (730) .. now + ``window_future_days`` (60)), under two bounds named in
  README "Bounded expansion": at most ``MAX_OCCURRENCES`` occurrences of one series inside
  the window, and at most ``MAX_EXPANSION`` occurrences generated from its DTSTART to the
  window's end (SECONDLY/MINUTELY rules are allowed only as far as that holds). A series
  over either bound fails the import with one line naming its UID.
- ``EXDATE`` occurrences do not exist; ``STATUS:CANCELLED`` occurrences are kept with
  ``status="cancelled"`` so a re-import marks a previously imported instance as cancelled.
- ``X-WR-TIMEZONE`` (Google) is applied to UTC and floating times first (x-wr-timezone).
- All-day (``VALUE=DATE``) events start at local midnight in the calendar's zone
  (``X-WR-TIMEZONE``), or UTC when the calendar names none; ``DTEND`` is exclusive.
  Remaining floating times are read in the same zone. ``local_day`` is the start date in the
  event's own zone.
- ``attendees_count``: ATTENDEE lines minus rooms/resources (``CUTYPE=ROOM|RESOURCE``);
  ``None`` when the event lists none (an .ics cannot tell "alone" from "not exported").
  ``self_response`` is the PARTSTAT of the attendee whose address is in the setting
  ``calendar_owner_emails`` (else unknown, ``None``: an .ics does not say who "self" is). Title, description and location are
  stored as written (untrusted text).
- Raw: one ``vevent`` row per VEVENT as written (key ``<calendar_id>/<UID>[/<RECURRENCE-ID>]``)
  and one ``vcalendar`` row for the calendar's own properties.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import icalendar
import recurring_ical_events
import x_wr_timezone
from dateutil.rrule import rrulestr

from common.errors import SourceFormatError
from common.records import Event, RawRecord, Skipped
from common.timeutil import in_sane_range, out_of_range_detail
from connectors.files import MiB, files_under, input_path, read_file_capped
from connectors.screen import END_BEFORE_START, READ_ERRORS, describe, screen

SOURCE = "calendar"
Progress = Callable[[float, float | None], None]
DEFAULT_PAST_DAYS = 730
DEFAULT_FUTURE_DAYS = 60

# An .ics is parsed whole in memory (~10-20x its size as objects); a 15-year calendar with
# ~20 k events is ~20 MB.
MAX_ICS = 64 * MiB
# icalendar parses a VEVENT in ~0.35-0.7 ms and holds ~5 KB for it: a file of minimal events
# (60 bytes each) would otherwise take minutes and GBs well under MAX_ICS. A busy calendar
# holds a few thousand events a year.
MAX_VEVENTS = 50_000
# Occurrences of one series inside the import window: a daily series over the default
# 790-day window has 790; an hourly one would have ~19 k (no human calendar holds that).
MAX_OCCURRENCES = 10_000
# Occurrences the expander (dateutil) generates and caches from a series' DTSTART to the end
# of the window: ~1 s and ~30 MB at this bound; a daily series from 1900 needs ~75 k.
MAX_EXPANSION = 200_000
# Series whose rules match no day at all (BYMONTH=2;BYMONTHDAY=30): finding that out costs
# the probe ~0.2-0.8 s each (see _may_occur), so a file may hold only this many.
MAX_NEVER = 5

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
    owner_emails: str | None = None,
    **_opts: Any,
) -> Iterator[Any]:
    """Yield raw and ``Event`` records for one ``.ics`` file or every ``*.ics`` in a folder.

    ``owner_emails`` (comma-separated, the setting ``calendar_owner_emails``): whose answer
    to an invitation is the person's own; an event where that ATTENDEE has
    ``PARTSTAT=DECLINED`` gets ``self_response = "declined"`` (and is no commitment)."""
    path = input_path(path)
    owners = frozenset(e.strip().lower().removeprefix("mailto:") for e in (owner_emails or "").split(",") if e.strip())
    now = now or datetime.now(UTC)
    start = _as_datetime(window_start) if window_start is not None else now - timedelta(days=window_past_days)
    end = _as_datetime(window_end) if window_end is not None else now + timedelta(days=window_future_days)
    if end <= start:
        raise SourceFormatError(str(path), f"empty window: {start.isoformat()} .. {end.isoformat()}")
    if path.is_dir():
        files = [p for p in files_under(path) if p.suffix.lower() == ".ics"]
        if not files:
            raise SourceFormatError(str(path), "no .ics files in this folder")
    else:
        files = [path]
    total = sum(p.stat().st_size for p in files)
    done = 0
    fetched_at = datetime.now(UTC)
    for p in files:
        data = read_file_capped(p, MAX_ICS, "an .ics file")
        yield from screen(_guarded(data, str(p), start, end, fetched_at, owners), SOURCE, label=str(p))
        done += p.stat().st_size
        if progress:
            progress(done, total)


def _guarded(
    data: bytes, name: str, start: datetime, end: datetime, fetched_at: datetime, owners: frozenset[str] = frozenset()
) -> Iterator[Any]:
    try:
        yield from read_ics(data, name, start, end, fetched_at, owners)
    except READ_ERRORS as exc:  # last resort behind the checks below: one line
        raise SourceFormatError(name, describe(exc)) from exc


def _as_datetime(v: date | datetime | str) -> datetime:
    if isinstance(v, str):
        v = datetime.fromisoformat(v) if "T" in v or " " in v else date.fromisoformat(v)
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    return datetime.combine(v, time(0), tzinfo=UTC)


# -- one file --------------------------------------------------------------------------------
def read_ics(
    data: bytes,
    name: str,
    window_start: datetime,
    window_end: datetime,
    fetched_at: datetime,
    owners: frozenset[str] = frozenset(),
) -> Iterator[Any]:
    text = data.decode("utf-8", errors="replace")
    events = text.count("BEGIN:VEVENT") + text.count("begin:vevent")
    if events > MAX_VEVENTS:
        raise SourceFormatError(
            name, f"{events:,} events in one file; refused (at most {MAX_VEVENTS:,}: split the calendar)"
        )
    _check_timezones(text, name)
    cal = _parse(data, text, name)
    cal_name = _text(cal.get("X-WR-CALNAME"))
    calendar_id = cal_name or Path(name).name.rsplit(".", 1)[0]
    cal_tz = _zone(_text(cal.get("X-WR-TIMEZONE")))
    written = cal
    for comp in written.walk("VEVENT"):
        _check_dates(comp, name, text)
    try:
        cal = x_wr_timezone.to_standard(cal)
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
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

    vevents = []
    for comp in cal.walk("VEVENT"):
        if _backwards(comp):  # the expander would swap its start and end: left out, counted
            yield Skipped(SOURCE, END_BEFORE_START)
        else:
            vevents.append(comp)
    series_uids = {
        _uid(c)
        for c in vevents
        if any(c.get(k) is not None for k in ("RRULE", "RDATE", "RECURRENCE-ID"))
    }
    # One-off events are imported whole; each series is expanded inside the window alone,
    # after its rules were checked against the bounds (memory stays at one series).
    groups: dict[str, list[Any]] = {}
    for c in vevents:
        groups.setdefault(_uid(c), []).append(c)
    seen: set[str] = set()
    # A one-off is its own only occurrence: read directly (the expander's whole-calendar walk
    # costs time quadratic in the number of events). Of VEVENTs sharing a UID, the one with
    # the highest SEQUENCE wins (the first of equals), as the expander decides.
    one_offs: dict[str, Any] = {}
    for c in vevents:
        uid = _uid(c)
        if uid not in series_uids and (uid not in one_offs or _sequence(c) > _sequence(one_offs[uid])):
            one_offs[uid] = c
    for comp in one_offs.values():
        ev = _event(comp, calendar_id, cal_tz, name, series_uids, owners)
        if ev is not None and ev.event_id not in seen:
            seen.add(ev.event_id)
            yield ev
    never = 0
    for uid in sorted(series_uids):
        comps = groups[uid]
        for comp in comps:
            _check_rules(comp, uid, name, text, window_start, window_end)
        if not any(_may_occur(comp) for comp in comps):
            never += 1  # its rules match no day at all: nothing to expand
            if never > MAX_NEVER:
                raise SourceFormatError(
                    name, f"more than {MAX_NEVER} recurring events whose rules match no day at all "
                    f"(the last: {uid!r}); refused", _line_of(text, uid),
                )
            continue
        occurrences = _expand(_subcalendar(cal, comps), name, window_start, window_end)
        if len(occurrences) > MAX_OCCURRENCES:
            raise SourceFormatError(
                name, f"event {uid!r}: more than {MAX_OCCURRENCES:,} occurrences inside the import window; "
                "refused", _line_of(text, uid),
            )
        for occ in occurrences:
            ev = _event(occ, calendar_id, cal_tz, name, series_uids, owners)
            if ev is not None and ev.event_id not in seen:
                seen.add(ev.event_id)
                yield ev


def _sequence(comp: Any) -> int:
    try:
        return int(comp.get("SEQUENCE", 0))
    except (TypeError, ValueError):
        return 0


def _expand(cal: icalendar.Calendar, name: str, start: datetime, end: datetime) -> list[Any]:
    try:
        return list(recurring_ical_events.of(cal).between(start, end))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        raise SourceFormatError(name, f"cannot expand recurring events: {type(exc).__name__}: {exc}") from None


# -- bounds: dates in range, expansions that finish -------------------------------------------
def _line_of(text: str, uid: str) -> str | None:
    """'line N' of the UID line of `uid` (first one), for error messages."""
    for n, line in enumerate(text.splitlines(), start=1):
        if line.upper().startswith("UID") and line.split(":", 1)[-1].strip() == uid:
            return f"line {n}"
    return None


def _check_timezones(text: str, name: str) -> None:
    """Refuse a VTIMEZONE observance whose RRULE is not a plain yearly rule, before the file
    is parsed: icalendar expands each such rule to year 9999 when it builds the zone, so a
    FREQ=SECONDLY (or a yearly rule with BYHOUR/BYMINUTE/BYSECOND lists) would never
    finish. Real zones (Google, Apple, Outlook: `FREQ=YEARLY;BYMONTH=3;BYDAY=2SU`) pass."""
    in_zone = False
    for n, line in _unfolded(text):
        upper = line.upper()
        if upper.startswith("BEGIN:VTIMEZONE"):
            in_zone = True
        elif upper.startswith("END:VTIMEZONE"):
            in_zone = False
        elif in_zone and (upper.startswith("RRULE:") or upper.startswith("RRULE;")):
            parts = dict(p.split("=", 1) for p in upper.split(":", 1)[-1].split(";") if "=" in p)
            sizes = [len(v.split(",")) for k, v in parts.items() if k.startswith("BY")]
            if (
                parts.get("FREQ") != "YEARLY"
                or any(k in parts for k in ("BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS"))
                or math.prod(sizes) > 64
            ):
                raise SourceFormatError(
                    name, f"a VTIMEZONE with an unusual recurrence ({line.strip()[:80]}); refused (zones "
                    "change at most a few times a year: FREQ=YEARLY)", f"line {n}",
                )


def _unfolded(text: str) -> Iterator[tuple[int, str]]:
    """(line number of its first physical line, content line) with RFC 5545 folding undone."""
    current: str | None = None
    start = 0
    for n, line in enumerate(text.splitlines(), start=1):
        if line[:1] in (" ", "\t") and current is not None:
            current += line[1:]
            continue
        if current is not None:
            yield start, current
        current, start = line, n
    if current is not None:
        yield start, current


def _instants(prop: Any) -> list[date]:
    """The dates/datetimes a DTSTART/DTEND/RDATE/RECURRENCE-ID property holds."""
    out: list[date] = []
    for p in prop if isinstance(prop, list) else [prop]:
        values = getattr(p, "dts", None)
        for v in ([getattr(x, "dt", None) for x in values] if values is not None else [getattr(p, "dt", None)]):
            if isinstance(v, tuple):  # an RDATE period (start, end or duration)
                v = v[0]
            if isinstance(v, date):
                out.append(v)
    return out


def _check_dates(comp: Any, name: str, text: str) -> None:
    """Refuse a VEVENT whose start, end (DTEND, or DTSTART + DURATION), RECURRENCE-ID or
    RDATE lies outside the sane range (before expanding anything: the expander would work
    from year 1 or overflow)."""
    uid = _uid(comp)
    for key in ("DTSTART", "DTEND", "RECURRENCE-ID", "RDATE"):
        prop = comp.get(key)
        if prop is None:
            continue
        for v in _instants(prop):
            if not in_sane_range(v):
                raise SourceFormatError(
                    name, f"event {uid!r}: " + out_of_range_detail(key, v.isoformat()), _line_of(text, uid)
                )
    start, duration = comp.get("DTSTART"), comp.get("DURATION")
    if start is not None and duration is not None and isinstance(getattr(duration, "dt", None), timedelta):
        try:
            end = start.dt + duration.dt
        except OverflowError:
            end = None
        if end is None or not in_sane_range(end):
            raise SourceFormatError(
                name, f"event {uid!r}: " + out_of_range_detail("DTSTART + DURATION", duration.to_ical().decode()),
                _line_of(text, uid),
            )


def _backwards(comp: Any) -> bool:
    """True for a VEVENT that ends before it starts (DTEND < DTSTART, or a negative DURATION)."""
    start, end, duration = comp.get("DTSTART"), comp.get("DTEND"), comp.get("DURATION")
    if start is None:
        return False
    if duration is not None and isinstance(getattr(duration, "dt", None), timedelta):
        return duration.dt < timedelta(0)
    if end is None or not isinstance(end.dt, date) or not isinstance(start.dt, date):
        return False
    return _as_utc(end.dt) < _as_utc(start.dt)


def _rules(comp: Any) -> list[Any]:
    rules = comp.get("RRULE")
    if rules is None:
        return []
    return rules if isinstance(rules, list) else [rules]


def _first(rule: Any, key: str, default: Any = None) -> Any:
    v = rule.get(key)
    if isinstance(v, list):
        return v[0] if v else default
    return default if v is None else v


def _per_day(rule: Any) -> float:
    """At most how many occurrences a day `rule` can give (BYxxx lists expand, never more
    than FREQ allows)."""
    freq = str(_first(rule, "FREQ", "DAILY")).upper()
    interval = max(int(_first(rule, "INTERVAL", 1) or 1), 1)
    hours, minutes, seconds = (len(rule.get(k) or []) for k in ("BYHOUR", "BYMINUTE", "BYSECOND"))
    if freq == "SECONDLY":
        return min(86_400 / interval, (hours or 24) * (minutes or 60) * (seconds or 60))
    if freq == "MINUTELY":
        return min(1_440 / interval, (hours or 24) * (minutes or 60)) * (seconds or 1)
    if freq == "HOURLY":
        return min(24 / interval, hours or 24) * (minutes or 1) * (seconds or 1)
    per_day = (hours or 1) * (minutes or 1) * (seconds or 1)
    return per_day / interval if freq == "DAILY" else per_day


def _as_utc(v: date) -> datetime:
    if isinstance(v, datetime):
        return v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    return datetime.combine(v, time(0), tzinfo=UTC)


def _check_rules(comp: Any, uid: str, name: str, text: str, window_start: datetime, window_end: datetime) -> None:
    """Refuse a rule that would generate more than MAX_EXPANSION occurrences from DTSTART to
    the window's end, or more than MAX_OCCURRENCES inside the window (upper bounds from the
    rule alone, computed before the expander runs)."""
    dtstart = comp.get("DTSTART")
    if dtstart is None:
        return
    first = _as_utc(dtstart.dt)
    for rule in _rules(comp):
        freq = str(_first(rule, "FREQ", "")).upper()
        until = _first(rule, "UNTIL")
        last = min(window_end, _as_utc(until)) if isinstance(until, date) else window_end
        count = _first(rule, "COUNT")
        count = int(count) if isinstance(count, int) and count > 0 else math.inf
        per_day = _per_day(rule)
        span = max((last - first).total_seconds() / 86_400, 0.0) + 1
        generated = min(count, per_day * span)
        inside = max((last - max(first, window_start)).total_seconds() / 86_400, 0.0) + 1
        in_window = min(count, per_day * inside)
        if generated > MAX_EXPANSION:
            raise SourceFormatError(
                name, f"event {uid!r}: its recurrence (FREQ={freq}) would expand to ~{int(generated):,} "
                f"occurrences from DTSTART to the end of the import window; refused (at most {MAX_EXPANSION:,})",
                _line_of(text, uid),
            )
        if in_window > MAX_OCCURRENCES:
            raise SourceFormatError(
                name, f"event {uid!r}: its recurrence (FREQ={freq}) would give ~{int(in_window):,} occurrences "
                f"inside the import window; refused (at most {MAX_OCCURRENCES:,})", _line_of(text, uid),
            )


def _may_occur(comp: Any) -> bool:
    """False only for a series whose every rule matches no day at all (BYMONTH=2 with
    BYMONTHDAY=30...), which the expander would otherwise search up to year 9999 (seconds
    per series). Probed on DTSTART moved by whole 400-year cycles to just before 9999: the
    Gregorian calendar (weekdays included) repeats exactly every 400 years, so the probe
    sees the rule's own pattern, and stops after at most ~400 years."""
    dtstart = comp.get("DTSTART")
    if dtstart is None or comp.get("RDATE") is not None or not _rules(comp):
        return True
    start = dtstart.dt if isinstance(dtstart.dt, datetime) else datetime.combine(dtstart.dt, time(0))
    start = start.replace(tzinfo=None)
    probe = start.replace(year=start.year + 400 * -((start.year - 9_200) // 400))  # in 9200..9599
    for rule in _rules(comp):
        body = {k: v for k, v in rule.items() if k not in ("COUNT", "UNTIL")}
        try:
            text = icalendar.vRecur(body).to_ical().decode()
            if next(iter(rrulestr(text, dtstart=probe, cache=False)), None) is not None:
                return True
        except (ValueError, TypeError, OverflowError):
            return True  # left to the expander, whose errors name the file
    return False


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
    """A calendar of `events` alone, for the expander: their times already carry their zones
    (icalendar resolved each TZID while parsing), so neither the calendar's properties nor
    its VTIMEZONEs are copied (that cost ~10 ms a series on a calendar with many zones)."""
    sub = icalendar.Calendar()
    for ev in events:
        sub.add_component(ev)
    return sub


# -- one occurrence ------------------------------------------------------------------------
def _event(
    occ: Any,
    calendar_id: str,
    cal_tz: tzinfo | None,
    name: str,
    series_uids: set[str],
    owners: frozenset[str] = frozenset(),
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
    for ts, what in ((start, "start"), (end, "end")):
        if not in_sane_range(ts):
            raise SourceFormatError(name, f"event {uid!r}: " + out_of_range_detail(what, ts.isoformat()))
    # an end before the start: left out and counted (connectors/screen.py)
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
        self_response=_self_response(occ, owners),
        event_type=None,
        transparency=transp.lower() if transp else None,
        timezone=tz_name,
        recurring_event_id=uid if in_series else None,
        updated_at=updated_at,
    )


_PARTSTAT = {"ACCEPTED": "accepted", "DECLINED": "declined", "TENTATIVE": "tentative",
             "NEEDS-ACTION": "needsAction", "DELEGATED": "delegated"}


def _self_response(occ: Any, owners: frozenset[str]) -> str | None:
    """The person's own answer (an ATTENDEE whose address is one of ``owners``), if known."""
    if not owners:
        return None
    att = occ.get("ATTENDEE")
    for a in att if isinstance(att, list) else ([att] if att is not None else []):
        if str(a).lower().removeprefix("mailto:") in owners:
            return _PARTSTAT.get(str(getattr(a, "params", {}).get("PARTSTAT", "")).upper())
    return None


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
