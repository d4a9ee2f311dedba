"""The day as it is: commitments, waking hours, free windows and the slots the calendar decides.

Pure: plain data in (events with their classified action, past nights), plain data out.
Times are aware datetimes in the person's zone.

- A *commitment* is an event that holds the person's time: not cancelled, not "free"
  (transparent), not all-day, not declined, and not one of Rhythm's own blocks.
- *Waking hours* come from the person's own nights (the median wake-up and bed time of the
  last four weeks), unless settings override them.
- *Free windows* are the gaps of at least ``MIN_FREE_MIN`` minutes inside waking hours (and
  after ``now``) that no commitment covers.
- A slot is *fixed* when commitments fill at least half of its waking minutes: its action is
  the commitments' dominant action (by minutes).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo

from common.records import SLOTS
from common.rhythm_blocks import RHYTHM_UID_SUFFIX, is_rhythm_event_id  # noqa: F401 - re-exported
from common.timeutil import SLOT_BOUNDS, slot_of

MIN_FREE_MIN = 30
FIXED_SHARE = 0.5
DEFAULT_WAKE = time(7, 0)
DEFAULT_BED = time(23, 0)
HISTORY_NIGHTS = 28
GET_READY_MIN = 30  # up this long before a commitment that starts before the usual wake-up
# A commitment whose action is unknown (a title the classifier does not recognise) still holds
# the time; for planning it counts as this (a small work-like drain), and the plan says so.
UNCLASSIFIED_STAND_IN = "ADMIN_WORK"
# Blocks Rhythm writes into a calendar carry RHYTHM_UID_SUFFIX at the end of their UID (a
# Google event id starts with common.rhythm_blocks.GOOGLE_ID_PREFIX), so a plan exported and
# imported (or pushed and synced) again never becomes a commitment of a later plan.


@dataclass(frozen=True)
class CalendarEvent:
    """One stored event occurrence, as the planner needs it."""

    start: datetime
    end: datetime
    title: str | None
    action: str | None  # the classifier's action, None when the title says nothing
    source: str = "calendar"
    status: str | None = None  # confirmed | tentative | cancelled
    transparency: str | None = None  # opaque | transparent ("free")
    all_day: bool = False
    self_response: str | None = None  # accepted | declined | tentative | needsAction
    rhythm_block: bool = False  # a block Rhythm wrote into the calendar (never a commitment)


@dataclass(frozen=True)
class Commitment:
    start: datetime
    end: datetime
    title: str
    action: str | None
    source: str

    @property
    def minutes(self) -> float:
        return (self.end - self.start).total_seconds() / 60.0


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def minutes(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds() / 60.0)


@dataclass(frozen=True)
class Night:
    """One main sleep: when the person went to bed and woke up (aware), minutes asleep."""

    bed: datetime
    wake: datetime
    sleep_min: float | None = None


@dataclass(frozen=True)
class SleepHabits:
    wake: time  # typical wake-up
    bed: time  # typical bedtime
    need_min: float  # typical minutes asleep
    nights: int  # how many nights these come from (0 = defaults or settings)
    source: str  # "history", "settings" or "default"


@dataclass
class DayFrame:
    """Everything the planner knows about the shape of one day."""

    day: date
    tz: tzinfo
    wake: datetime
    bed: datetime
    commitments: list[Commitment]
    free: list[Window]
    waking_min: dict[int, float]  # slot -> waking minutes in it
    busy_min: dict[int, float]  # slot -> minutes of it held by commitments
    fixed: dict[int, str]  # slot -> the action the calendar decides
    fixed_unclassified: set[int] = field(default_factory=set)  # fixed by commitments of unknown action
    habits: SleepHabits | None = None

    def free_in(self, slot: int) -> list[Window]:
        """The free windows inside a slot (clipped to it)."""
        lo, hi = slot_window(self.day, slot, self.tz)
        out = []
        for w in self.free:
            s, e = max(w.start, lo), min(w.end, hi)
            if (e - s).total_seconds() >= MIN_FREE_MIN * 60:
                out.append(Window(s, e))
        return out

    def commitments_in(self, slot: int) -> list[Commitment]:
        lo, hi = slot_window(self.day, slot, self.tz)
        return [c for c in self.commitments if c.end > lo and c.start < hi]


def slot_window(day: date, slot: int, tz: tzinfo) -> tuple[datetime, datetime]:
    """Aware start and end of a slot (wall-clock hours in ``tz``, DST-safe)."""
    a, b = SLOT_BOUNDS[slot]
    return _wall(day, a, tz), _wall(day, b, tz)


def slot_of_time(t: datetime) -> tuple[date, int]:
    """(day, slot) of an aware local time (the small hours belong to the night before)."""
    return slot_of(t.replace(tzinfo=None))


def _wall(day: date, hours: int, tz: tzinfo) -> datetime:
    d = day + timedelta(days=hours // 24)
    return datetime.combine(d, time(hours % 24), tzinfo=tz)


def is_commitment(ev: CalendarEvent) -> bool:
    if ev.rhythm_block or ev.all_day:
        return False
    if (ev.status or "confirmed").lower() == "cancelled":
        return False
    if (ev.transparency or "opaque").lower() == "transparent":
        return False
    if (ev.self_response or "").lower() == "declined":
        return False
    return ev.end > ev.start


def commitments(events: Iterable[CalendarEvent], lo: datetime, hi: datetime) -> list[Commitment]:
    """The commitments overlapping [lo, hi), in start order."""
    out = [
        Commitment(e.start, e.end, (e.title or "").strip() or "(no title)", e.action, e.source)
        for e in events
        if is_commitment(e) and e.end > lo and e.start < hi
    ]
    out.sort(key=lambda c: (c.start, c.end))
    return out


def sleep_habits(
    nights: Sequence[Night],
    tz: tzinfo,
    wake_override: time | None = None,
    bed_override: time | None = None,
) -> SleepHabits:
    """Typical wake-up and bedtime (medians of the clock times of the given nights, bed times
    after midnight counted as late evening), typical sleep need, with overrides winning."""
    recent = sorted(nights, key=lambda n: n.wake)[-HISTORY_NIGHTS:]
    wakes = [_minutes_of_day(n.wake.astimezone(tz)) for n in recent]
    beds = [_minutes_of_day(n.bed.astimezone(tz)) for n in recent]
    beds = [b if b >= 12 * 60 else b + 24 * 60 for b in beds]  # 00:30 -> 24:30
    slept = [n.sleep_min for n in recent if n.sleep_min]
    need = float(statistics.median(slept)) if slept else 8 * 60.0
    if recent:
        wake, bed, source = _clock(statistics.median(wakes)), _clock(statistics.median(beds)), "history"
    else:
        wake, bed, source = DEFAULT_WAKE, DEFAULT_BED, "default"
    if wake_override or bed_override:
        source = "settings"
    return SleepHabits(wake_override or wake, bed_override or bed, need, len(recent), source)


def _minutes_of_day(t: datetime) -> int:
    return t.hour * 60 + t.minute


def _clock(minutes: float) -> time:
    m = int(round(minutes)) % (24 * 60)
    return time(m // 60, m % 60)


def _at(day: date, t: time, tz: tzinfo, evening: bool = False) -> datetime:
    """``t`` on ``day``; for a bedtime after midnight (``evening``), on the next day."""
    d = day + timedelta(days=1) if evening and t.hour < 12 else day
    return datetime.combine(d, t, tzinfo=tz)


def merge(intervals: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    out: list[list[datetime]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def free_windows(lo: datetime, hi: datetime, busy: Sequence[Commitment]) -> list[Window]:
    """Gaps of at least MIN_FREE_MIN minutes in [lo, hi) between commitments."""
    out = []
    cur = lo
    for s, e in merge((max(c.start, lo), min(c.end, hi)) for c in busy if c.end > lo and c.start < hi):
        if (s - cur).total_seconds() >= MIN_FREE_MIN * 60:
            out.append(Window(cur, s))
        cur = max(cur, e)
    if (hi - cur).total_seconds() >= MIN_FREE_MIN * 60:
        out.append(Window(cur, hi))
    return out


def frame_day(
    day: date,
    tz: tzinfo,
    events: Iterable[CalendarEvent],
    habits: SleepHabits,
    now: datetime | None = None,
) -> DayFrame:
    """The day's commitments, waking hours, free windows and fixed slots."""
    wake = _at(day, habits.wake, tz)
    bed = _at(day, habits.bed, tz, evening=True)
    lo, _ = slot_window(day, 0, tz)
    _, hi = slot_window(day, 3, tz)
    events = list(events)
    held = commitments(events, lo - timedelta(hours=6), hi)
    # Waking hours stretch to cover commitments outside them (an early flight, a late show).
    first = min((c.start for c in held if c.start >= lo), default=None)
    if first is not None and first < wake:
        wake = first - timedelta(minutes=GET_READY_MIN)
    bed = max([bed, *(c.end for c in held)])
    start = max(wake, now) if now is not None else wake
    free = free_windows(start, bed, held) if start < bed else []

    waking: dict[int, float] = {}
    busy: dict[int, float] = {}
    fixed: dict[int, str] = {}
    unclassified: set[int] = set()
    for s in range(len(SLOTS)):
        a, b = slot_window(day, s, tz)
        wa, wb = max(a, wake), min(b, bed)
        waking[s] = max(0.0, (wb - wa).total_seconds() / 60.0)
        spans = merge((max(c.start, wa), min(c.end, wb)) for c in held if c.end > wa and c.start < wb)
        busy[s] = sum((e - st).total_seconds() / 60.0 for st, e in spans)
        if waking[s] > 0 and busy[s] >= FIXED_SHARE * waking[s]:
            by_action: dict[str | None, float] = defaultdict(float)
            for c in held:
                m = max(0.0, (min(c.end, wb) - max(c.start, wa)).total_seconds() / 60.0)
                if m > 0:
                    by_action[c.action] += m
            known = {k: v for k, v in by_action.items() if k}
            if known and max(known.values()) >= by_action.get(None, 0.0):
                fixed[s] = max(sorted(known), key=lambda k: known[k])
            else:
                fixed[s] = UNCLASSIFIED_STAND_IN
                unclassified.add(s)
    day_held = [c for c in held if c.end > lo]
    return DayFrame(day, tz, wake, bed, day_held, free, waking, busy, fixed, unclassified, habits)
