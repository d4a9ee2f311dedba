"""Time blocks: where an action fits into a slot's free time, and for how long. Pure.

Every block lies inside one free window (so it never overlaps a commitment), starts a short
buffer after a commitment ends, on a five-minute mark, and lasts what the action needs:

| action | minutes (least, usual, most) |
|---|---|
| DEEP_WORK | 60, 90, 120 |
| ADMIN_WORK | 30, 45, 60 |
| LEARN | 45, 60, 90 |
| EXERCISE | 30, 45, 60 |
| MEDITATE | 10, 15, 20 |
| FAMILY_TIME | 45, 90, 120 |
| SOCIALIZE | 60, 120, 180 |
| ME_TIME | 30, 60, 90 |
| BINGE_WATCH | 30, 45, 90 |
| SLEEP (a nap) | 15, 25, 45 |

SLEEP is not one block kind: at night it is a bedtime ("in bed by 22:40", from the person's
sleep need and the next day's first commitment); on a free morning, sleeping in ("sleep in
until 07:45"); in the afternoon, a nap of at most 45 minutes; in the evening, an early night.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo

from agent.day.calendar import DayFrame, SleepHabits, Window, shifted, slot_window

DURATIONS: dict[str, tuple[int, int, int]] = {
    "DEEP_WORK": (60, 90, 120),
    "ADMIN_WORK": (30, 45, 60),
    "LEARN": (45, 60, 90),
    "EXERCISE": (30, 45, 60),
    "MEDITATE": (10, 15, 20),
    "FAMILY_TIME": (45, 90, 120),
    "SOCIALIZE": (60, 120, 180),
    "ME_TIME": (30, 60, 90),
    "BINGE_WATCH": (30, 45, 90),
    "SLEEP": (15, 25, 45),
}
BUFFER_MIN = 10  # between a commitment's end and a block
WAKE_UP_MIN = 30  # between waking up and a first block (up, dressed, breakfast)
EXERCISE_BEFORE_BED_MIN = 90  # no workout in the last 90 minutes before bed (sleep hygiene)
WIND_DOWN_MIN = 30  # no other block in the last half hour before bed (half the nights start earlier)
SLEEP_IN_MAX_MIN = 90
SLEEP_IN_MIN_MIN = 30
LATENCY_MIN = 15  # falling asleep
GET_READY_MIN = 60  # from waking up to the first commitment
EARLIEST_BED = time(20, 30)
EARLY_NIGHT_MIN = 60
NAP_AFTER_WAKE_MIN = 180  # no nap in the first three hours after waking (from the night or a day sleep)
STEP_MIN = 15  # how far a block moves at a time off a time the person keeps ignoring


@dataclass(frozen=True)
class Placement:
    start: datetime
    end: datetime
    kind: str  # block | nap | sleep_in | bedtime | early_night
    window: Window  # the free window it sits in

    @property
    def minutes(self) -> float:
        return (self.end - self.start).total_seconds() / 60.0


def _round_up(t: datetime, step: int = 5) -> datetime:
    extra = (-t.minute) % step
    t = t.replace(second=0, microsecond=0)
    return t + timedelta(minutes=extra) if extra else t


def _usable(frame: DayFrame, w: Window, action: str | None = None) -> tuple[datetime, datetime]:
    """The part of a free window a block may use: a buffer after a commitment ending at its
    start, half an hour after waking up, no workout close to bedtime and no block in the
    half hour before it."""
    start, end = w.start, w.end
    if any(abs((c.end - w.start).total_seconds()) < 60 for c in frame.commitments):
        start = start + timedelta(minutes=BUFFER_MIN)
    up = frame.wake + timedelta(minutes=WAKE_UP_MIN)  # up from the night ...
    if frame.wake - timedelta(minutes=1) <= w.start < up:
        start = max(start, up)
    for sp in frame.sleeps:  # ... or from a day sleep
        if sp.end - timedelta(minutes=1) <= w.start < sp.end + timedelta(minutes=WAKE_UP_MIN):
            start = max(start, sp.end + timedelta(minutes=WAKE_UP_MIN))
    if action == "EXERCISE":
        end = min(end, frame.bed - timedelta(minutes=EXERCISE_BEFORE_BED_MIN))
    elif action is not None and action != "SLEEP" and frame.tonight is None:
        end = min(end, frame.bed - timedelta(minutes=WIND_DOWN_MIN))
    return _round_up(start), end


def fits(frame: DayFrame, slot: int, action: str) -> bool:
    """Whether the slot's free time can hold the action at its shortest."""
    return place(frame, slot, action) is not None


def place(
    frame: DayFrame, slot: int, action: str, night: tuple[datetime, datetime] | None = None,
    lengths: Mapping[str, int] | None = None, ok: Callable[[datetime, datetime], bool] | None = None,
) -> Placement | None:
    """Where ``action`` goes in ``slot`` of the day, or None when its free time cannot hold it.
    ``night``: (bedtime, wake-up) for SLEEP in the night slot (see ``bedtime``). ``lengths``:
    action -> the person's usual minutes of it (``objective.usual_minutes``), the length
    aimed at instead of the table's usual. ``ok(start, end)``: whether a block may sit there
    (a time the person keeps ignoring may not); the earliest start a window allows that ``ok``
    accepts, in ``STEP_MIN`` steps."""
    if action == "SLEEP":
        return _place_sleep(frame, slot, night, ok)
    least, usual, most = DURATIONS[action]
    if lengths and action in lengths:
        usual = lengths[action]
        most = max(most, usual)
    best: Placement | None = None
    best_room = -1.0
    for w in frame.free_in(slot):
        s, e = _usable(frame, w, action)
        while ok is not None and s + timedelta(minutes=least) <= e and not ok(s, s + timedelta(minutes=least)):
            s += timedelta(minutes=STEP_MIN)
        room = (e - s).total_seconds() / 60.0
        if room < least:
            continue
        dur = usual if room >= usual else int(room // 5 * 5)
        dur = max(least, min(dur, most))
        cand = Placement(s, s + timedelta(minutes=dur), "block", w)
        # the roomiest window wins; among equals, the earliest
        if best is None or room > best_room + 1e-9:
            best, best_room = cand, room
    return best


def _place_sleep(
    frame: DayFrame, slot: int, night: tuple[datetime, datetime] | None,
    ok: Callable[[datetime, datetime], bool] | None = None,
) -> Placement | None:
    if slot == 3:  # the night: a bedtime, until the wake-up
        if night is None:
            return None
        bed, wake = night
        return Placement(bed, wake, "bedtime", Window(bed, wake))
    windows = frame.free_in(slot)
    if not windows:
        return None
    if slot == 0:  # the morning: sleeping in, or nothing (a nap right after waking is no plan)
        w = windows[0]
        if abs((w.start - frame.wake).total_seconds()) >= 60:
            return None  # the start of the day is past or taken
        ends_at_commitment = w.end < slot_window(frame.day, 0, frame.tz)[1]
        room = (w.end - w.start).total_seconds() / 60.0 - (GET_READY_MIN if ends_at_commitment else 0)
        dur = int(min(SLEEP_IN_MAX_MIN, room) // 5 * 5)
        if dur >= SLEEP_IN_MIN_MIN:
            return Placement(w.start, w.start + timedelta(minutes=dur), "sleep_in", w)
        return None
    if slot == 2:  # the evening: an early night, if the end of the evening is free
        if frame.tonight is not None or frame.after is not None:
            # a night shift tonight: no early night (its sleep comes after it); the day after
            # the last of a run: tonight's bedtime is already the early one
            return None
        last = windows[-1]
        if abs((last.end - frame.bed).total_seconds()) < 60 and last.minutes >= EARLY_NIGHT_MIN:
            start = _round_up(frame.bed - timedelta(minutes=EARLY_NIGHT_MIN))
            return Placement(start, frame.bed, "early_night", last)
        return None
    least, usual, most = DURATIONS["SLEEP"]
    # a nap: the first window that holds one, and not in the first hours after waking
    woke = max([frame.wake, *(sp.end for sp in frame.sleeps)])
    for w in windows:
        s, e = _usable(frame, w)
        s = max(s, _round_up(woke + timedelta(minutes=NAP_AFTER_WAKE_MIN)))
        while ok is not None and s + timedelta(minutes=least) <= e and not ok(s, s + timedelta(minutes=least)):
            s += timedelta(minutes=STEP_MIN)
        room = (e - s).total_seconds() / 60.0
        if room >= least:
            dur = max(least, min(usual, int(room // 5 * 5), most))
            return Placement(s, s + timedelta(minutes=dur), "nap", w)
    return None


def bedtime(
    frame: DayFrame, next_first_start: datetime | None, habits: SleepHabits, next_wake: datetime,
    recent_beds: Sequence[datetime] = (), suggested: Sequence[datetime] = (),
) -> tuple[datetime, str]:
    """When to be in bed tonight, and why: the usual bedtime, earlier when tomorrow's first
    commitment leaves less than the person's sleep need (plus falling asleep and getting
    ready); never before 20:30 nor before tonight's last commitment ends.

    A suggestion the person never follows is not repeated word for word: when their last
    nights (``recent_beds``, the onsets) were all more than ``MEET_GAP_MIN`` later than it,
    the bedtime meets them where they are, ``MEET_MIN`` before their real one, as long as
    that still leaves their sleep need before tomorrow (``meet_where_they_are``; ``suggested``:
    Rhythm's recent bedtimes, so that nights that kept one do not walk it earlier)."""
    must_wake = next_wake
    reason = f"your usual bedtime {habits.bed:%H:%M}"
    usual = datetime.combine(frame.day + timedelta(days=1 if habits.bed.hour < 12 else 0), habits.bed, tzinfo=frame.tz)
    if frame.after is not None and frame.tonight is None and frame.bed < usual:
        reason = f"an early night after your last night shift (ended {frame.after.end:%H:%M})"
    if next_first_start is not None and shifted(next_first_start, -GET_READY_MIN) < next_wake:
        must_wake = shifted(next_first_start, -GET_READY_MIN)
    latest = shifted(must_wake, -(habits.need_min + LATENCY_MIN))  # elapsed: a DST night is 23 or 25 h
    bed = frame.bed
    if latest < bed:
        bed = latest
        reason = (f"your {habits.need_min // 60:.0f} h {habits.need_min % 60:02.0f} of sleep before "
                  f"tomorrow's {next_first_start:%H:%M} start" if next_first_start is not None
                  else reason)
    floor = datetime.combine(frame.day, EARLIEST_BED, tzinfo=frame.tz)
    last_end = max((c.end for c in frame.commitments if c.start < frame.bed), default=None)
    bed = max(bed, floor, last_end or floor)
    met = meet_where_they_are(bed, latest, recent_beds, frame.tz, suggested) if frame.after is None else None
    if met is not None:
        bed, real = met
        reason = (f"you have gone to bed around {real:%H:%M} lately: {MEET_MIN} min earlier than that, "
                  f"within your {habits.need_min // 60:.0f} h {habits.need_min % 60:02.0f} of sleep")
    return _round_down(bed), reason


RECENT_NIGHTS = 5  # the nights that say where the person is
MEET_GAP_MIN = 30  # each of them this much later than the suggestion: it is not followed
MEET_MIN = 20  # the bedtime offered then: this much before their real one (15-30 min)


def meet_where_they_are(
    bed: datetime, latest: datetime, recent_beds: Sequence[datetime], tz: tzinfo,
    suggested: Sequence[datetime] = (),
) -> tuple[datetime, datetime] | None:
    """(a bedtime ``MEET_MIN`` before the person's real one, their real one) when none of
    their last ``RECENT_NIGHTS`` onsets (at least 3) kept ``bed`` (asleep less than
    ``MEET_GAP_MIN`` after it, other than by keeping a later bedtime of Rhythm's), and that
    bedtime still leaves their sleep need (not after ``latest``); else None.

    Their real bedtime is theirs, not Rhythm's: a night that kept one of Rhythm's recent
    bedtimes (``suggested``: asleep no more than ``MEET_GAP_MIN`` after it) says they did not
    keep ``bed``, but not when they go to bed of their own accord. So the real one is the
    median of their own nights among ``recent_beds`` (the last ``RECENT_NIGHTS`` of them),
    and when every night kept Rhythm's, the latest kept suggestion stands: a bedtime they keep
    is not walked earlier night after night."""
    # night sleeps only (a day sleep after a night shift says nothing about a bedtime)
    nights = sorted(t for t in recent_beds if not 4 <= t.astimezone(tz).hour < 18)
    recent = nights[-RECENT_NIGHTS:]
    if len(recent) < 3:
        return None
    evening = bed.date() if bed.hour >= 12 else bed.date() - timedelta(days=1)

    def tonight(t: datetime) -> datetime:
        local = t.astimezone(tz)
        d = evening + timedelta(days=1) if local.hour < 12 else evening
        return datetime.combine(d, local.time().replace(second=0, microsecond=0), tzinfo=tz)

    def kept(t: datetime) -> datetime | None:
        """The suggestion of Rhythm's this onset kept (asleep no more than the gap after it)."""
        return next((tonight(s) for s in suggested
                     if s - timedelta(hours=2) <= t <= s + timedelta(minutes=MEET_GAP_MIN)), None)

    def follows_bed(t: datetime) -> bool:
        k = kept(t)  # a night that kept a bedtime later than tonight's usual did not keep the usual
        return tonight(t) < bed + timedelta(minutes=MEET_GAP_MIN) and (k is None or k <= bed)

    if any(follows_bed(t) for t in recent):
        return None  # followed at least once lately: keep the suggestion
    own = [tonight(t) for t in nights if kept(t) is None][-RECENT_NIGHTS:]
    if own:
        real = sorted(own)[len(own) // 2]
    else:
        last = kept(recent[-1])  # every night kept one of Rhythm's: the latest stands
        assert last is not None
        real = last + timedelta(minutes=MEET_MIN)
    target = _round_down(real - timedelta(minutes=MEET_MIN))
    if target > latest or target <= bed:
        return None  # their sleep need does not allow it
    return target, real


def _round_down(t: datetime, step: int = 5) -> datetime:
    t = t.replace(second=0, microsecond=0)
    return t - timedelta(minutes=t.minute % step)


def prefer_time(frame: DayFrame, slot: int, p: Placement, action: str, at: time) -> Placement:
    """A block moved as close to the clock time ``at`` as the slot's free time allows (the
    person moved such a block there in their calendar: a time preference), keeping its length;
    the placement unchanged when no free window of the slot holds it nearer."""
    dur = p.end - p.start
    want = datetime.combine(p.start.astimezone(frame.tz).date(), at, tzinfo=frame.tz)
    best, gap = p, abs((p.start - want).total_seconds())
    for w in frame.free_in(slot):
        s, e = _usable(frame, w, action)
        if e - s < dur:
            continue
        start = _round_up(min(max(want, s), e - dur))
        if start + dur > e:
            start = _round_down(e - dur)
        if start < s:
            continue
        g = abs((start - want).total_seconds())
        if g < gap - 1e-9:
            best, gap = Placement(start, start + dur, p.kind, w), g
    return best
