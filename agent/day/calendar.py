"""The day as it is: commitments, waking hours, free windows and the slots the calendar decides.

Pure: plain data in (events with their classified action, past nights), plain data out.
Times are aware datetimes in the person's zone.

- A *commitment* is an event that holds the person's time: not cancelled, not "free"
  (transparent), not all-day, not declined, and not one of Rhythm's own blocks.
- *Waking hours* come from the person's own nights (the wake-up they are up by nine mornings
  in ten and the median bedtime of the last four weeks' night sleeps before mornings like
  this one: free, or taken by a commitment before 10:00), unless settings override them, and are reshaped per day by
  the calendar and the person's own history around overnight commitments (night shifts,
  on-call nights): after one, the person sleeps in the day (when and how long: what they did
  after their past ones, else soon after it ends); before a first one, they may sleep in the
  afternoon (if their data says so); a night with one has no bedtime. These *sleep spans* are
  never free time and the slots they fill are the person's SLEEP.
- Durations are elapsed time (``elapsed_min``: aware instants compared in UTC), so a 13-hour
  shift across a DST change is 13 hours, not the 12 or 14 its wall clock says.
- *Free windows* are the gaps of at least ``MIN_FREE_MIN`` minutes inside waking hours (and
  after ``now``) that no commitment covers.
- A slot is *fixed* when commitments fill at least half of its waking minutes: its action is
  the commitments' dominant action (by minutes).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo

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


def elapsed_min(a: datetime, b: datetime) -> float:
    """Minutes from ``a`` to ``b`` in elapsed time (UTC instants: Python subtracts two datetimes
    of one zone by their wall clocks, which is an hour off across a DST change)."""
    return (b.astimezone(UTC) - a.astimezone(UTC)).total_seconds() / 60.0


def shifted(t: datetime, minutes: float) -> datetime:
    """``t`` plus ``minutes`` of elapsed time, in ``t``'s zone (``t + timedelta`` moves the
    wall clock: an hour off across a DST change)."""
    return (t.astimezone(UTC) + timedelta(minutes=minutes)).astimezone(t.tzinfo)


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
    done: bool = True  # counts as done (mapping.actions.counts_as_done): not a hold


@dataclass(frozen=True)
class Commitment:
    start: datetime
    end: datetime
    title: str
    action: str | None
    source: str

    @property
    def minutes(self) -> float:
        return elapsed_min(self.start, self.end)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def minutes(self) -> float:
        return max(0.0, elapsed_min(self.start, self.end))


@dataclass(frozen=True)
class SleepSpan:
    """A time the person is asleep by their own data (not the night's bedtime): the day sleep
    after a night shift, an afternoon sleep before a first one."""

    start: datetime
    end: datetime
    kind: str  # day_sleep | shift_nap
    reason: str  # a template sentence with numbers, never a title

    @property
    def minutes(self) -> float:
        return max(0.0, elapsed_min(self.start, self.end))


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
    sleeps: list[SleepSpan] = field(default_factory=list)  # asleep by their own data (day sleep, nap)
    asleep: set[int] = field(default_factory=set)  # slots the person sleeps through (fixed: SLEEP)
    after: Commitment | None = None  # an overnight commitment that ended this morning
    tonight: Commitment | None = None  # an overnight commitment tonight: no bedtime

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
    """Typical wake-up and bedtime (the wake-up nine mornings in ten are up by, the median
    bedtime, of the clock times of the given nights' night sleeps, bed times after midnight counted as late evening; day sleeps after a night shift
    are left to ``shift_patterns``), typical sleep need, with overrides winning."""
    recent = sorted(nights, key=lambda n: n.wake)[-HISTORY_NIGHTS:]
    at_night = [n for n in recent if is_night_sleep(n, tz)]
    if len(at_night) >= min(3, len(recent)):  # day sleeps (after a night shift) are no bedtime
        recent = at_night
    wakes = [_minutes_of_day(n.wake.astimezone(tz)) for n in recent]
    beds = [_minutes_of_day(n.bed.astimezone(tz)) for n in recent]
    beds = [b if b >= 12 * 60 else b + 24 * 60 for b in beds]  # 00:30 -> 24:30
    slept = [n.sleep_min for n in recent if n.sleep_min]
    need = float(statistics.median(slept)) if slept else 8 * 60.0
    if recent:
        wake, bed, source = _clock(_reliably_up(wakes)), _clock(statistics.median(beds)), "history"
    else:
        wake, bed, source = DEFAULT_WAKE, DEFAULT_BED, "default"
    if wake_override or bed_override:
        source = "settings"
    return SleepHabits(wake_override or wake, bed_override or bed, need, len(recent), source)


MORNING_BUSY_BEFORE = time(10, 0)
SIMILAR_MIN_NIGHTS = 4


def busy_morning(day: date, tz: tzinfo, events: Iterable[CalendarEvent]) -> bool:
    """Whether a commitment starts between 04:00 and 10:00 of ``day`` (a morning the person
    has to be up for)."""
    lo = datetime.combine(day, time(4, 0), tzinfo=tz)
    hi = datetime.combine(day, MORNING_BUSY_BEFORE, tzinfo=tz)
    return any(lo <= c.start < hi for c in commitments(events, lo, hi + timedelta(hours=12)))


def habits_for(
    day: date,
    nights: Sequence[Night],
    events: Sequence[CalendarEvent],
    tz: tzinfo,
    wake_override: time | None = None,
    bed_override: time | None = None,
) -> SleepHabits:
    """``sleep_habits`` from the nights before mornings like ``day``'s (free or taken by a
    commitment before 10:00, by the calendar), when there are at least four of them: a
    person sleeps in on free mornings and gets up for the busy ones."""
    events = list(events)
    # a sleep soon after an overnight commitment is that shift's day sleep, whatever its clock
    ends = [c.end for c in commitments(events, datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
            if is_overnight(c, tz)]
    nights = [n for n in nights if not any(
        e - timedelta(minutes=30) <= n.bed <= e + timedelta(hours=AFTER_WITHIN_H) for e in ends)] or list(nights)
    busy = busy_morning(day, tz, events)
    similar = [n for n in nights if busy_morning(n.wake.astimezone(tz).date(), tz, events) == busy]
    base = sleep_habits(nights, tz, wake_override, bed_override)
    at_night = [n for n in similar if is_night_sleep(n, tz)]
    if len(at_night) < SIMILAR_MIN_NIGHTS:
        return base
    out = sleep_habits(at_night, tz, wake_override, bed_override)
    return replace(out, need_min=base.need_min, nights=base.nights)


def _reliably_up(wakes: Sequence[int]) -> float:
    """The wake-up a plan may count on: nine mornings in ten the person is up by then (the
    median of fewer than five): a block at the median wake-up finds them asleep every other
    day."""
    if len(wakes) < 5:
        return float(statistics.median(wakes))
    return float(statistics.quantiles(wakes, n=10)[8])


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
        if elapsed_min(cur, s) >= MIN_FREE_MIN:
            out.append(Window(cur, s))
        cur = max(cur, e)
    if elapsed_min(cur, hi) >= MIN_FREE_MIN:
        out.append(Window(cur, hi))
    return out


# -- overnight commitments and the sleep around them ----------------------------------------
# A sleep whose midpoint falls in 21:00-09:30 is a night's sleep; otherwise a day sleep.
NIGHT_MID = (21 * 60, 9 * 60 + 30)
OVERNIGHT_MIN = 240  # an overnight commitment lasts 4 h or more ...
OVERNIGHT_AT = time(3, 0)  # ... and holds 03:00
AFTER_WITHIN_H = 10  # a sleep starting this long after an overnight ends is the sleep after it
BEFORE_WITHIN_H = 8  # a day sleep ending this long before a first overnight is the sleep before it
DEFAULT_AFTER_LAG_MIN = 30  # no history: asleep half an hour after it ends ...
DEFAULT_AFTER_MAX_MIN = 420  # ... for the person's sleep need, at most 7 h
TRANSITION_EARLIER_MIN = 60  # no history: the transition day's night starts an hour early
PATTERN_SHARE = 0.5  # a pattern is the person's when it follows at least half of their overnights


def is_night_sleep(n: Night, tz: tzinfo) -> bool:
    a = n.bed.astimezone(UTC)
    mid = (a + (n.wake.astimezone(UTC) - a) / 2).astimezone(tz)
    m = mid.hour * 60 + mid.minute
    return m >= NIGHT_MID[0] or m < NIGHT_MID[1]


def is_overnight(c: Commitment, tz: tzinfo) -> bool:
    """A commitment of 4 h or more that holds 03:00 (a night shift, an on-call night)."""
    if c.minutes < OVERNIGHT_MIN:
        return False
    s = c.start.astimezone(tz)
    d = s.date() if s.time() < OVERNIGHT_AT else s.date() + timedelta(days=1)
    return c.start <= datetime.combine(d, OVERNIGHT_AT, tzinfo=tz) < c.end


@dataclass(frozen=True)
class ShiftPatterns:
    """What this person does around overnight commitments, from their own history:
    the sleep after one (minutes from its end to falling asleep, minutes asleep) and the day
    sleep before the first of a run (minutes from waking up to its start, minutes asleep)."""

    after_lag_min: float | None = DEFAULT_AFTER_LAG_MIN
    after_min: float | None = None  # None: the person's need, at most DEFAULT_AFTER_MAX_MIN
    after_seen: int = 0
    after_of: int = 0
    # the sleep after the last night of a run (a transition day: often shorter), when seen
    after_last_min: float | None = None
    # the transition day's bedtime (after the last night of a run: an early night), when seen
    transition_bed: time | None = None
    before_lead_min: float | None = None
    before_min: float | None = None
    before_seen: int = 0
    before_of: int = 0

    def sleep_after(self, c: Commitment, need_min: float, last_of_run: bool = False) -> SleepSpan | None:
        if self.after_lag_min is None:
            return None
        dur = self.after_min if self.after_min is not None else min(need_min, DEFAULT_AFTER_MAX_MIN)
        if last_of_run and self.after_last_min is not None:
            dur = self.after_last_min
        start = _round5(shifted(c.end, self.after_lag_min))
        end = _round5(shifted(start, dur))
        if self.after_of:
            why = (f"after {self.after_seen} of your last {self.after_of} night shifts you were asleep "
                   f"{self.after_lag_min:.0f} min after the end, for up to {_hm(dur)}")
        else:
            why = f"after a night shift: sleep soon after it ends ({_hm(dur)}, your usual sleep)"
        return SleepSpan(start, end, "day_sleep", why)

    def sleep_before(self, c: Commitment) -> SleepSpan | None:
        if self.before_lead_min is None or self.before_min is None:
            return None
        end = _round5(shifted(c.start, -self.before_lead_min))
        start = _round5(shifted(end, -self.before_min))
        why = (f"before {self.before_seen} of your last {self.before_of} first night shifts you slept "
               f"{_hm(self.before_min)} in the afternoon")
        return SleepSpan(start, end, "shift_nap", why)


def _upper(values: Sequence[float]) -> float:
    """The upper quartile (the median of one or two values)."""
    if len(values) < 3:
        return float(statistics.median(values))
    return float(statistics.quantiles(values, n=4)[2])


def _lower(values: Sequence[float]) -> float:
    """The lower quartile (the median of one or two values)."""
    if len(values) < 3:
        return float(statistics.median(values))
    return float(statistics.quantiles(values, n=4)[0])


def _round5(t: datetime) -> datetime:
    t = t.replace(second=0, microsecond=0)
    extra = (-t.minute) % 5
    return t + timedelta(minutes=extra) if extra else t


def _hm(minutes: float) -> str:
    m = int(round(minutes))
    return f"{m // 60} h {m % 60:02d}"


def shift_patterns(events: Iterable[CalendarEvent], nights: Sequence[Night], tz: tzinfo) -> ShiftPatterns:
    """The person's sleep around their past overnight commitments (only those their sleep
    records cover). None seen: sleep soon after one ends; no sleep before."""
    held = [c for c in commitments(events, datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
            if is_overnight(c, tz)]
    sleeps = sorted(nights, key=lambda n: n.bed)
    if not held or not sleeps:
        return ShiftPatterns()
    lo, hi = sleeps[0].bed, sleeps[-1].wake
    lags, durs, of = [], [], 0
    last_durs: list[float] = []
    beds: list[float] = []
    leads, bdurs, bof = [], [], 0
    ends = [c.end for c in held]
    starts = [c.start for c in held]
    for c in held:
        if c.end < lo or c.end + timedelta(hours=AFTER_WITHIN_H) > hi:
            continue
        of += 1
        after = [n for n in sleeps if c.end - timedelta(minutes=30) <= n.bed <= c.end + timedelta(hours=AFTER_WITHIN_H)]
        if after:
            n = min(after, key=lambda n: n.bed)
            lags.append(max(0.0, elapsed_min(c.end, n.bed)))
            more = any(timedelta(0) <= st - c.end <= timedelta(hours=20) for st in starts)
            # from the end of the shift to waking up (in bed, not minutes asleep): the time no
            # block may take
            (durs if more else last_durs).append(elapsed_min(c.end, n.wake))
            if not more:  # the transition day's night: an early one
                nxt = [m for m in sleeps if m.bed > n.wake and m.bed <= n.wake + timedelta(hours=16)
                       and is_night_sleep(m, tz)]
                if nxt:
                    b = nxt[0].bed.astimezone(tz)
                    beds.append(b.hour * 60 + b.minute + (24 * 60 if b.hour < 12 else 0))
        first_of_run = not any(timedelta(0) <= c.start - e <= timedelta(hours=18) for e in ends)
        if first_of_run and c.start - timedelta(hours=BEFORE_WITHIN_H) >= lo:
            bof += 1
            before = [n for n in sleeps if c.start - timedelta(hours=BEFORE_WITHIN_H) <= n.wake <= c.start
                      and not is_night_sleep(n, tz)]
            if before:
                n = max(before, key=lambda n: n.wake)
                leads.append(elapsed_min(n.wake, c.start))
                bdurs.append(elapsed_min(n.bed, n.wake))
    out = ShiftPatterns()
    if of:
        if len(lags) >= PATTERN_SHARE * of:
            # a block right after a sleep that runs long is a block over it: the later quartile
            lag = float(statistics.median(lags))
            mid = durs or last_durs
            out = replace(out, after_lag_min=lag, after_min=max(60.0, _upper(mid) - lag),
                          after_last_min=max(60.0, _upper(last_durs) - lag) if last_durs else None,
                          after_seen=len(lags), after_of=of)
        else:  # this person does not sleep after their night shifts
            out = replace(out, after_lag_min=None, after_min=None, after_seen=len(lags), after_of=of)
    if beds:
        out = replace(out, transition_bed=_clock(_lower(beds)))
    if bof and leads and len(leads) >= PATTERN_SHARE * bof:
        # the span no block may take: from the earliest usual start to the latest usual end
        lead = _lower(leads)
        starts_before = [lead_ + d for lead_, d in zip(leads, bdurs, strict=True)]
        out = replace(out, before_lead_min=lead, before_min=max(30.0, _upper(starts_before) - lead),
                      before_seen=len(leads), before_of=bof)
    return out


def frame_day(
    day: date,
    tz: tzinfo,
    events: Iterable[CalendarEvent],
    habits: SleepHabits,
    now: datetime | None = None,
    patterns: ShiftPatterns | None = None,
) -> DayFrame:
    """The day's commitments, waking hours, sleep spans, free windows and fixed slots.

    After an overnight commitment that ended this morning, the day starts when the person
    wakes from the sleep after it (``patterns``: their own, else soon after it ends); with one
    tonight, the day ends when it starts (no bedtime; before the first of a run, the afternoon
    sleep their data shows)."""
    patterns = patterns or ShiftPatterns()
    wake = _at(day, habits.wake, tz)
    bed = _at(day, habits.bed, tz, evening=True)
    lo, _ = slot_window(day, 0, tz)
    _, hi = slot_window(day, 3, tz)
    events = list(events)
    held = commitments(events, lo - timedelta(hours=6), hi)
    overnight = [c for c in held if is_overnight(c, tz)]
    # this morning: an overnight commitment ending between 03:00 and 14:00
    after = max((c for c in overnight if lo - timedelta(hours=3) <= c.end <= lo + timedelta(hours=8)),
                key=lambda c: c.end, default=None)
    # tonight: one starting between 12:00 and 03:00
    tonight = min((c for c in overnight if lo + timedelta(hours=6) <= c.start < hi - timedelta(hours=3)),
                  key=lambda c: c.start, default=None)
    sleeps: list[SleepSpan] = []
    if after is not None:
        span = patterns.sleep_after(after, habits.need_min, last_of_run=tonight is None)
        if span is not None:
            # a commitment during it (an appointment) cuts it short
            cut = min((c.start for c in held if span.start <= c.start < span.end), default=None)
            if cut is not None:
                span = replace(span, end=cut - timedelta(minutes=GET_READY_MIN))
            if span.minutes >= 60:
                sleeps.append(span)
                wake = span.end
            else:
                wake = after.end
        else:
            wake = after.end
    else:
        # Waking hours stretch to cover commitments outside them (an early flight).
        first = min((c.start for c in held if c.start >= lo), default=None)
        if first is not None and first < wake:
            wake = first - timedelta(minutes=GET_READY_MIN)
    if tonight is not None:
        bed = tonight.start
        if after is None:
            span = patterns.sleep_before(tonight)
            if span is not None and span.start >= wake + timedelta(hours=1) and not any(
                    c.end > span.start and c.start < span.end for c in held if c is not tonight):
                sleeps.append(span)
    else:  # ... and a late show
        if after is not None:  # the transition day after the last night of a run: an early night
            early = (_at(day, patterns.transition_bed, tz, evening=True) if patterns.transition_bed is not None
                     else bed - timedelta(minutes=TRANSITION_EARLIER_MIN))
            bed = min(bed, early)
        bed = max([bed, *(c.end for c in held if c.end <= hi + timedelta(hours=3) and not is_overnight(c, tz))])
    if bed < wake:
        bed = wake
    start = max(wake, now) if now is not None else wake
    asleep_as_busy = [Commitment(sp.start, sp.end, "(asleep)", "SLEEP", "sleep") for sp in sleeps]
    free = free_windows(start, bed, [*held, *asleep_as_busy]) if start < bed else []

    waking: dict[int, float] = {}
    busy: dict[int, float] = {}
    fixed: dict[int, str] = {}
    unclassified: set[int] = set()
    asleep: set[int] = set()
    for s in range(len(SLOTS)):
        a, b = slot_window(day, s, tz)
        wa, wb = max(a, wake), min(b, bed)
        waking[s] = max(0.0, elapsed_min(wa, wb))
        occupied = [*held, *asleep_as_busy]
        spans = merge((max(c.start, wa), min(c.end, wb)) for c in occupied if c.end > wa and c.start < wb)
        busy[s] = sum(elapsed_min(st, e) for st, e in spans)
        slept = sum(elapsed_min(st, e) for st, e in merge(
            (max(sp.start, a), min(sp.end, b)) for sp in sleeps if sp.end > a and sp.start < b))
        if s < 3 and slept > 0 and (waking[s] < MIN_FREE_MIN or slept >= FIXED_SHARE * elapsed_min(a, b)):
            fixed[s] = "SLEEP"  # asleep by their own data: the day sleep's block says so
            asleep.add(s)
            continue
        if s == 3 and tonight is not None:
            fixed[s] = tonight.action or UNCLASSIFIED_STAND_IN
            if not tonight.action:
                unclassified.add(s)
            continue
        if waking[s] > 0 and busy[s] >= FIXED_SHARE * waking[s]:
            by_action: dict[str | None, float] = defaultdict(float)
            for c in occupied:
                m = max(0.0, elapsed_min(max(c.start, wa), min(c.end, wb)))
                if m > 0:
                    by_action[c.action] += m
            known = {k: v for k, v in by_action.items() if k}
            if known and max(known.values()) >= by_action.get(None, 0.0):
                fixed[s] = max(sorted(known), key=lambda k: known[k])
                if fixed[s] == "SLEEP":
                    asleep.add(s)
            else:
                fixed[s] = UNCLASSIFIED_STAND_IN
                unclassified.add(s)
    day_held = [c for c in held if c.end > lo]
    return DayFrame(day, tz, wake, bed, day_held, free, waking, busy, fixed, unclassified, habits,
                    sleeps=sleeps, asleep=asleep, after=after, tonight=tonight)
