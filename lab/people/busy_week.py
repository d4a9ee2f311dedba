"""A generated busy week (plan tests, benchmarks): a real .ics file and a wearable's records.

Berlin, the week of Monday 17 November 2025, after three weeks of history:
- a stand-up every weekday 09:00-09:15 (RRULE, one occurrence moved), a weekly 1:1 on
  Wednesdays 10:00-10:30, an offsite filling Wednesday 12:00-18:00, choir rehearsal on
  Wednesday evening 19:00-21:00;
- a transparent "focus" hold, a cancelled review, an all-day holiday, a placeholder;
- nights of about 7 h 20, the last two short (Monday and Tuesday nights), with HRV and
  resting heart rate that dip after them, and steps through the day.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from common.records import Sample, SleepSession

TZ = ZoneInfo("Europe/Berlin")
MONDAY = date(2025, 11, 17)
WEDNESDAY = MONDAY + timedelta(days=2)
FIRST = MONDAY - timedelta(days=21)

ICS = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Rhythm tests//busy week//EN
X-WR-TIMEZONE:Europe/Berlin
BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:STANDARD
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
END:DAYLIGHT
END:VTIMEZONE
BEGIN:VEVENT
UID:standup@busy.week
SUMMARY:Team stand-up
DTSTART;TZID=Europe/Berlin:20251027T090000
DTEND;TZID=Europe/Berlin:20251027T091500
RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR
ATTENDEE;CN=A:mailto:a@example.org
ATTENDEE;CN=B:mailto:b@example.org
END:VEVENT
BEGIN:VEVENT
UID:standup@busy.week
RECURRENCE-ID;TZID=Europe/Berlin:20251118T090000
SUMMARY:Team stand-up
DTSTART;TZID=Europe/Berlin:20251118T093000
DTEND;TZID=Europe/Berlin:20251118T094500
END:VEVENT
BEGIN:VEVENT
UID:one-on-one@busy.week
SUMMARY:1:1 with Sam
DTSTART;TZID=Europe/Berlin:20251029T100000
DTEND;TZID=Europe/Berlin:20251029T103000
RRULE:FREQ=WEEKLY;BYDAY=WE
END:VEVENT
BEGIN:VEVENT
UID:offsite@busy.week
SUMMARY:Offsite Q4 planning
DTSTART;TZID=Europe/Berlin:20251119T120000
DTEND;TZID=Europe/Berlin:20251119T180000
END:VEVENT
BEGIN:VEVENT
UID:choir@busy.week
SUMMARY:Choir rehearsal
DTSTART;TZID=Europe/Berlin:20251119T190000
DTEND;TZID=Europe/Berlin:20251119T210000
END:VEVENT
BEGIN:VEVENT
UID:hold@busy.week
SUMMARY:Focus time (hold)
TRANSP:TRANSPARENT
DTSTART;TZID=Europe/Berlin:20251119T080000
DTEND;TZID=Europe/Berlin:20251119T084500
END:VEVENT
BEGIN:VEVENT
UID:review@busy.week
SUMMARY:Design review
STATUS:CANCELLED
DTSTART;TZID=Europe/Berlin:20251119T103000
DTEND;TZID=Europe/Berlin:20251119T113000
END:VEVENT
BEGIN:VEVENT
UID:holiday@busy.week
SUMMARY:Buß- und Bettag
DTSTART;VALUE=DATE:20251119
DTEND;VALUE=DATE:20251120
END:VEVENT
BEGIN:VEVENT
UID:placeholder@busy.week
SUMMARY:TBD
DTSTART;TZID=Europe/Berlin:20251120T160000
DTEND;TZID=Europe/Berlin:20251120T170000
END:VEVENT
END:VCALENDAR
"""


def write_ics(folder: Path) -> Path:
    path = folder / "busy_week.ics"
    path.write_text(ICS.replace("\n", "\r\n"))
    return path


def _at(d: date, h: float) -> datetime:
    return datetime.combine(d, time(0), tzinfo=TZ) + timedelta(minutes=round(h * 60))


def wearable_records(last: date = WEDNESDAY):
    """Nights, HRV, resting HR and steps from FIRST up to the morning of ``last``."""
    short = {last - timedelta(days=1), last}  # Monday and Tuesday nights
    d = FIRST
    while d <= last:
        if d in short:
            bed, wake = _at(d, 1.2), _at(d, 6.4)
        else:
            bed, wake = _at(d - timedelta(days=1), 23.2), _at(d, 7.0)
        off = int(wake.utcoffset().total_seconds() // 60)
        asleep = (wake - bed).total_seconds() / 60 - 20
        yield SleepSession("whoop", f"n{d}", bed.astimezone(UTC), wake.astimezone(UTC), d, sleep_min=asleep,
                           in_bed_min=asleep + 20, tz_offset_min=off)
        dip = 16.0 if d in short else 0.0
        yield Sample("whoop", "hrv_rmssd", wake, wake, 54.0 - dip + (d.day % 3), "ms", d, tz_offset_min=off)
        yield Sample("whoop", "resting_heart_rate", wake, wake, 55.0 + dip / 4, "bpm", d, tz_offset_min=off)
        if d < last:
            for h in range(8, 21, 2):
                t = _at(d, h)
                yield Sample("whoop", "steps", t, t + timedelta(hours=1), 700.0 + 30 * h, "count", d,
                             tz_offset_min=off)
        d += timedelta(days=1)
