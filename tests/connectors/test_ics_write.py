"""connectors.calendar.ics_write: Rhythm's blocks as .ics, read back by the project's importer.

Blocks are generated (zones with and without DST, days across DST changes, any text in the
titles and descriptions): what the importer reads back is what was written, and every block
is marked as Rhythm's.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import icalendar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.rhythm_blocks import RHYTHM_UID_SUFFIX, CalendarBlock, block_key, is_rhythm_event_id
from connectors.calendar.ics import read_ics
from connectors.calendar.ics_write import ical_zone, sequence, to_ics

ZONES = ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham",
         "America/Sao_Paulo", "UTC"]
SLOTS = ("morning", "afternoon", "evening", "night")
WINDOW = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
# Any text but blank (the importer reads blank text as no text) and backslashes: icalendar's
# writer takes a literal backslash-N for an escaped newline. Rhythm's texts are its own
# sentences, never blank and without backslashes.
TEXT = st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\\", include_characters="\n"),
               min_size=1, max_size=60).filter(str.strip)


def block(day: date, slot: str, start: datetime, minutes: int, summary: str = "Deep work (Rhythm)",
          description: str = "why", busy: bool = False, planned: datetime | None = None, rec: int = 1) -> CalendarBlock:
    return CalendarBlock(key=block_key(day, slot), day=day, slot=slot, start=start, end=start + timedelta(minutes=minutes),
                         summary=summary, description=description, planned_at=planned or datetime(2025, 11, 19, 5, 50, tzinfo=UTC),
                         busy=busy, action="DEEP_WORK", kind="block", recommendation_id=rec)


@st.composite
def day_blocks(draw):
    zone = draw(st.sampled_from(ZONES))
    tz = ZoneInfo(zone)
    day = draw(st.dates(min_value=date(2021, 1, 1), max_value=date(2031, 12, 31)))
    # DST days on purpose now and then
    if draw(st.booleans()):
        day = draw(st.sampled_from([date(2025, 3, 30), date(2025, 10, 26), date(2025, 3, 9), date(2025, 11, 2),
                                    date(2025, 4, 6), date(2025, 9, 28)]))
    slots = draw(st.lists(st.sampled_from(SLOTS), min_size=1, max_size=4, unique=True))
    out = []
    for i, slot in enumerate(slots):
        hour = {"morning": 7, "afternoon": 13, "evening": 18, "night": 22}[slot]
        start = datetime.combine(day, time(hour), tzinfo=tz) + timedelta(minutes=5 * draw(st.integers(0, 40)))
        out.append(block(day, slot, start, draw(st.integers(10, 600)), draw(TEXT), draw(TEXT), draw(st.booleans()),
                         rec=i + 1))
    return zone, out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day_blocks())
def test_the_importer_reads_back_what_was_written(case):
    zone, blocks = case
    data = to_ics(blocks, ZoneInfo(zone))
    events = [r for r in read_ics(data, "rhythm-plan.ics", *WINDOW, datetime.now(UTC)) if type(r).__name__ == "Event"]
    by_uid = {e.event_id: e for e in events}
    assert set(by_uid) == {b.uid for b in blocks}  # one event per block, nothing else
    for b in blocks:
        e = by_uid[b.uid]
        assert e.start_ts == b.start and e.end_ts == b.end  # the same instants, whatever the zone
        assert e.title == b.summary and e.description == b.description
        assert e.transparency == ("opaque" if b.busy else "transparent")
        assert e.calendar_id == "Rhythm" and not e.all_day
        assert is_rhythm_event_id(e.event_id) and e.event_id.endswith(RHYTHM_UID_SUFFIX)
        if zone != "UTC":
            assert e.timezone == zone and e.local_day == b.start.date()


@settings(max_examples=30, deadline=None)
@given(day_blocks())
def test_every_event_is_marked_and_zoned(case):
    zone, blocks = case
    cal = icalendar.Calendar.from_ical(to_ics(blocks, ZoneInfo(zone)))
    vevents = list(cal.walk("VEVENT"))
    assert len(vevents) == len(blocks)
    for ev in vevents:
        assert str(ev["X-RHYTHM-BLOCK"]) == "1"
        assert "Rhythm" in [str(c) for c in ev["CATEGORIES"].cats]
        assert str(ev["UID"]).startswith("rhythm-") and str(ev["UID"]).endswith("@rhythm.local")
        start = ev["DTSTART"].dt
        if zone == "UTC":
            assert start.utcoffset() == timedelta(0) and not cal.walk("VTIMEZONE")
        else:
            assert ev["DTSTART"].params["TZID"] == zone
    tzids = {str(t["TZID"]) for t in cal.walk("VTIMEZONE")}
    assert tzids == (set() if zone == "UTC" else {zone})


def test_uids_are_stable_and_the_same_plan_gives_the_same_bytes():
    tz = ZoneInfo("Europe/Berlin")
    day = date(2025, 11, 19)
    plan = [block(day, "morning", datetime(2025, 11, 19, 9, 15, tzinfo=tz), 90),
            block(day, "evening", datetime(2025, 11, 19, 21, 10, tzinfo=tz), 45, "Time for yourself (Rhythm)")]
    assert to_ics(plan, tz) == to_ics(list(reversed(plan)), tz)
    uids = [str(e["UID"]) for e in icalendar.Calendar.from_ical(to_ics(plan, tz)).walk("VEVENT")]
    assert uids == ["rhythm-2025-11-19-morning@rhythm.local", "rhythm-2025-11-19-evening@rhythm.local"]
    # a later plan moves the morning block: same UID, a higher SEQUENCE, the new times
    later = datetime(2025, 11, 19, 8, 0, tzinfo=UTC)
    moved = [block(day, "morning", datetime(2025, 11, 19, 10, 0, tzinfo=tz), 60, planned=later)]
    ev = icalendar.Calendar.from_ical(to_ics(moved, tz)).walk("VEVENT")[0]
    assert str(ev["UID"]) == uids[0]
    assert int(ev["SEQUENCE"]) == sequence(later) > sequence(plan[0].planned_at)
    assert ev["DTSTART"].dt == datetime(2025, 11, 19, 10, 0, tzinfo=tz)
    assert ev["LAST-MODIFIED"].dt == later


def test_zones_without_a_name_are_written_in_utc():
    from datetime import timezone

    assert ical_zone(timezone(timedelta(hours=2))) is None and ical_zone(UTC) is None
    assert ical_zone("Etc/UTC") is None and ical_zone("Nowhere/Atlantis") is None
    assert ical_zone(ZoneInfo("Europe/Berlin")).key == "Europe/Berlin"
    fixed = timezone(timedelta(hours=2))
    b = block(date(2025, 6, 1), "morning", datetime(2025, 6, 1, 9, 0, tzinfo=fixed), 30)
    text = to_ics([b], fixed).decode()
    assert "DTSTART:20250601T070000Z" in text and "VTIMEZONE" not in text


def test_an_empty_plan_is_an_empty_calendar():
    cal = icalendar.Calendar.from_ical(to_ics([], ZoneInfo("Europe/Berlin")))
    assert not cal.walk("VEVENT") and str(cal["X-WR-CALNAME"]) == "Rhythm"
