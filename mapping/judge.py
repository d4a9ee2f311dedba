"""Answers without typing: what the stored data says happened to a recommended block. Pure.

Once a block's time has passed, ``judge(blocks, seen, now)`` reads it against what was
stored (plain rows, no database) and returns a :class:`Judgement` per block the data can tell,
and nothing for a block it cannot:

| block | accepted when | ignored when |
|---|---|---|
| EXERCISE | a workout overlaps the block or starts/ends within 60 min of it (confidence falls with the distance); else a steps episode (>= 2500 steps) in the block | the person's devices record workouts (one in the last 28 days), data arrived after the block, and none is near it |
| SLEEP bedtime / early night | the main sleep's onset within 30 min of the suggested time (or earlier) | the onset 60 min or more later (confidence rising with the distance) |
| SLEEP nap | a nap (or any sleep) overlapping the block | no sleep in it and the person was walking about: steps at 4 a minute or more over the block; or their device records naps (one in the last 28 days), its data reached past the block, and none is in it (confidence 0.6 each) |
| SLEEP sleep in | the night's sleep ends 30 min or more into the block | the person was up before the block began |
| FAMILY_TIME, SOCIALIZE, LEARN, MEDITATE | an event of theirs of that class in or within 60 min of the block | the person puts that class in their calendar (events of theirs in the 28 days before), the calendar was read (imported or synced) after the block, and no such event is near it (confidence 0.5 from 4+ such events, a share of it by their count from 1-3: doubtful, offered for review) |
| DEEP_WORK, ADMIN_WORK | a completed task in the block, or an event of theirs of the block's own kind over half of it (a focus hold for deep work) (lower confidence) | never from data alone |

Never a rejection of the person: when the block's time went to another action of theirs
(an event of theirs of another class over half the block), the block gets no judgement: doing something else useful instead is not an "ignore".

A block pushed to Google Calendar or exported to an .ics file (``Pushed``) adds what the person
did to it, read back by the next sync or `rhythm import ics` of their calendar: deleted (the
event is gone, and the calendar was read after the push) is an
ignore (source ``calendar``); moved by 15 min or more is an accept at the other time, with the
new time kept as a time preference (``moved``), and the data are read at the new time; kept
and done is the data's accept. Only Rhythm's own events (by their marker) are ever read as
Rhythm's: ``Seen.rhythm_events`` holds those; ``Seen.events`` only the person's.

Titles never appear in the evidence (imported text is untrusted): classes and times only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from mapping.actions import overlap_min

NEAR_MIN = 60  # a workout / event this close to a block counts as the block's
STEPS_EPISODE = 2500  # steps inside an EXERCISE block that read as a walk or run
BED_CLOSE_MIN = 30  # onset within this of the suggested bedtime: accepted
BED_FAR_MIN = 60  # onset this much later or more: ignored
SLEEP_IN_MIN = 30
AWAKE_STEPS_PER_MIN = 4.0  # steps over a nap block at this rate or more: the person was up and about
MOVED_MIN = 15  # a pushed block moved by at least this much: the person chose another time
DEVICE_WORKOUTS_DAYS = 28
CALENDAR_ACTIONS = ("FAMILY_TIME", "SOCIALIZE", "LEARN", "MEDITATE")
KEEPS_SURE = 4  # events of a class in the last 28 days: the person keeps that class in their calendar
ABSENT_CONFIDENCE = 0.5  # no event where one would be, from one who keeps them: an ignore, but doubtful
# (the person may not log it); from one who put fewer in their calendar, a share of it by their count
WORK_ACTIONS = ("DEEP_WORK", "ADMIN_WORK")


@dataclass(frozen=True)
class Block:
    """A stored recommendation with times (storage ``recommendations``)."""

    id: int
    action: str
    kind: str | None  # block | nap | sleep_in | bedtime | early_night
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Span:
    """Something that happened: a workout (``what`` = sport), a sleep (``what`` = "nap" or
    "main"), an event of the person's (``what`` = its class, or None), a steps count
    (``value``), a completed task (start = end)."""

    start: datetime
    end: datetime
    what: str | None = None
    value: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class Pushed:
    """A block as Rhythm last put it into a Google calendar."""

    recommendation_id: int
    event_id: str
    start: datetime
    end: datetime
    pushed_at: datetime
    read_at: datetime | None = None  # the calendar holding it last read back (None: Seen.calendar_synced_at)


@dataclass
class Seen:
    """What was stored around the blocks (every time aware)."""

    workouts: Sequence[Span] = ()
    sleeps: Sequence[Span] = ()
    events: Sequence[Span] = ()  # the person's own events (never Rhythm's), classified
    steps: Sequence[Span] = ()
    tasks: Sequence[Span] = ()
    data_until: datetime | None = None  # the latest wearable record stored
    pushed: dict[int, Pushed] = field(default_factory=dict)  # recommendation id -> pushed
    rhythm_events: dict[str, Span] = field(default_factory=dict)  # Rhythm's events now stored, by id
    calendar_synced_at: datetime | None = None  # the last successful Google sync
    calendar_read_at: datetime | None = None  # the person's calendar last imported or synced


@dataclass(frozen=True)
class Judgement:
    recommendation_id: int
    response: str  # accept | ignore
    source: str  # implicit | calendar
    evidence: tuple[str, ...]
    confidence: float
    moved: tuple[datetime, datetime] | None = None


def judge(blocks: Sequence[Block], seen: Seen, now: datetime, tz: tzinfo | None = None) -> list[Judgement]:
    """The judgements of the blocks whose time has passed (see the module doc)."""
    out = []
    for b in blocks:
        if b.end > now:
            continue
        j = judge_block(b, seen, tz)
        if j is not None:
            out.append(j)
    return out


def judge_block(b: Block, seen: Seen, tz: tzinfo | None = None) -> Judgement | None:
    moved: tuple[datetime, datetime] | None = None
    calendar: Judgement | None = None
    p = seen.pushed.get(b.id)
    read = None if p is None else (p.read_at or seen.calendar_synced_at)
    if p is not None and read is not None and read > p.pushed_at:
        ev = seen.rhythm_events.get(p.event_id)
        if ev is None:
            calendar = Judgement(b.id, "ignore", "calendar",
                                 (f"you deleted the {_hm(p.start, tz)} block from your calendar",), 0.9)
        elif abs((ev.start - p.start).total_seconds()) >= MOVED_MIN * 60:
            moved = (ev.start, ev.end)
            calendar = Judgement(b.id, "accept", "calendar",
                                 (f"you moved the block to {_hm(ev.start, tz)}-{_hm(ev.end, tz)}",), 0.75, moved)
    target = b if moved is None else Block(b.id, b.action, b.kind, moved[0], moved[1])
    data = _from_data(target, seen, tz)
    if data is None:
        return calendar
    if moved is not None:
        if data.response == "accept":
            return Judgement(b.id, "accept", "calendar", (*calendar.evidence, *data.evidence),  # type: ignore[union-attr]
                             max(data.confidence, calendar.confidence), moved)  # type: ignore[union-attr]
        return calendar
    if calendar is not None and data.response == "ignore":
        return calendar
    if calendar is not None and data.response == "accept":
        return data  # deleted from the calendar, but done anyway
    return data


# -- from the data --------------------------------------------------------------------------------
def _from_data(b: Block, seen: Seen, tz: tzinfo | None) -> Judgement | None:
    if b.action == "EXERCISE":
        return _exercise(b, seen, tz)
    if b.action == "SLEEP":
        return _sleep(b, seen, tz)
    if b.action in CALENDAR_ACTIONS:
        return _calendar_action(b, seen, tz)
    if b.action in WORK_ACTIONS:
        return _work(b, seen, tz)
    return None  # ME_TIME, BINGE_WATCH: nothing stored tells


def _gap_min(s: Span, b: Block) -> float:
    """Minutes between a span and a block (0 when they overlap)."""
    if s.end >= b.start and s.start <= b.end:
        return 0.0
    if s.end < b.start:
        return (b.start - s.end).total_seconds() / 60.0
    return (s.start - b.end).total_seconds() / 60.0


def _overlap_min(s: Span, b: Block) -> float:
    return overlap_min(s.start, s.end, b.start, b.end)


def _elsewhere(b: Block, seen: Seen, tz: tzinfo | None) -> str | None:
    """Another action of the person's over half the block (doing something else instead)."""
    minutes = (b.end - b.start).total_seconds() / 60.0
    for e in seen.events:
        if e.what and e.what != b.action and e.what != "NONE" and _overlap_min(e, b) >= 0.5 * minutes:
            return f"a {e.what} event {_hm(e.start, tz)}-{_hm(e.end, tz)} instead"
    return None


def _exercise(b: Block, seen: Seen, tz: tzinfo | None) -> Judgement | None:
    near = [(w, _gap_min(w, b)) for w in seen.workouts if _gap_min(w, b) <= NEAR_MIN]
    if near:
        w, gap = min(near, key=lambda x: x[1])
        conf = 0.95 if gap == 0 else round(0.9 - 0.3 * gap / NEAR_MIN, 2)
        src = f"{w.source} " if w.source else ""
        return Judgement(b.id, "accept", "implicit",
                         (f"{src}workout {_hm(w.start, tz)}-{_hm(w.end, tz)}" + (f" ({w.what})" if w.what else ""),),
                         conf)
    steps = sum(s.value or 0.0 for s in seen.steps if _overlap_min(s, b) > 0 or (s.start >= b.start and s.end <= b.end))
    if steps >= STEPS_EPISODE:
        return Judgement(b.id, "accept", "implicit", (f"{steps:.0f} steps {_hm(b.start, tz)}-{_hm(b.end, tz)}",), 0.6)
    if seen.data_until is None or seen.data_until < b.end + timedelta(hours=1):
        return None  # the devices have not reported past the block yet
    device_logs = any(b.start - timedelta(days=DEVICE_WORKOUTS_DAYS) <= w.start for w in seen.workouts)
    if not device_logs:
        return None  # no workouts recorded lately: the device may not log them
    if _elsewhere(b, seen, tz):
        return None
    return Judgement(b.id, "ignore", "implicit",
                     (f"no workout within {NEAR_MIN} min of {_hm(b.start, tz)}-{_hm(b.end, tz)}",), 0.7)


def _sleep(b: Block, seen: Seen, tz: tzinfo | None) -> Judgement | None:
    if b.kind in ("bedtime", "early_night"):
        bed = b.start  # both run from the suggested bedtime to the morning (an early night: brought forward)
        mains = [s for s in seen.sleeps if s.what != "nap"
                 and bed - timedelta(hours=4) <= s.start <= bed + timedelta(hours=6)]
        if not mains:
            return None
        onset = min(mains, key=lambda s: abs((s.start - bed).total_seconds())).start
        late = (onset - bed).total_seconds() / 60.0
        what = f"asleep at {_hm(onset, tz)}, suggested {_hm(bed, tz)}"
        if late <= BED_CLOSE_MIN:
            conf = 0.9 if late >= -BED_FAR_MIN else 0.7
            return Judgement(b.id, "accept", "implicit", (what,), conf)
        if late >= BED_FAR_MIN:
            return Judgement(b.id, "ignore", "implicit", (f"{what} ({late:.0f} min later)",),
                             round(min(0.95, 0.6 + 0.35 * (late - BED_FAR_MIN) / 60.0), 2))
        return None  # 30-60 min late: doubtful, left to the person
    if b.kind == "nap":
        naps = [s for s in seen.sleeps if _gap_min(s, b) <= 30 and s.start > b.start - timedelta(hours=2)]
        if naps:
            s = naps[0]
            return Judgement(b.id, "accept", "implicit", (f"nap {_hm(s.start, tz)}-{_hm(s.end, tz)}",), 0.85)
        minutes = (b.end - b.start).total_seconds() / 60.0
        steps = _steps_in(b, seen)
        if minutes > 0 and steps / minutes >= AWAKE_STEPS_PER_MIN:
            return Judgement(b.id, "ignore", "implicit",
                             (f"no sleep and {steps:.0f} steps {_hm(b.start, tz)}-{_hm(b.end, tz)}",), 0.6)
        logs_naps = any(s.what == "nap" and b.start - timedelta(days=DEVICE_WORKOUTS_DAYS) <= s.start < b.start
                        for s in seen.sleeps)
        if logs_naps and seen.data_until is not None and seen.data_until >= b.end + timedelta(hours=1):
            return Judgement(b.id, "ignore", "implicit",
                             (f"no nap {_hm(b.start, tz)}-{_hm(b.end, tz)}, and your device records naps",), 0.6)
        return None
    if b.kind == "sleep_in":
        nights = [s for s in seen.sleeps if s.what != "nap" and s.start < b.start and s.end > b.start - timedelta(hours=3)]
        if not nights:
            return None
        woke = max(s.end for s in nights)
        into = (woke - b.start).total_seconds() / 60.0
        if into >= SLEEP_IN_MIN:
            return Judgement(b.id, "accept", "implicit", (f"slept until {_hm(woke, tz)}",), 0.85)
        if into <= 0:
            return Judgement(b.id, "ignore", "implicit", (f"up at {_hm(woke, tz)}",), 0.7)
        return None
    return None


def _calendar_action(b: Block, seen: Seen, tz: tzinfo | None) -> Judgement | None:
    near = [(e, _gap_min(e, b)) for e in seen.events if e.what == b.action and _gap_min(e, b) <= NEAR_MIN]
    if not near:
        if seen.calendar_read_at is None or seen.calendar_read_at < b.end:
            return None  # the calendar was not read since: a missing event says nothing yet
        kept = sum(1 for e in seen.events if e.what == b.action
                   and b.start - timedelta(days=DEVICE_WORKOUTS_DAYS) <= e.start < b.start)
        if kept == 0 or _elsewhere(b, seen, tz):
            return None  # they do not log it; or they did something else of theirs instead
        return Judgement(b.id, "ignore", "implicit",
                         (f"no {b.action} event of yours near {_hm(b.start, tz)}-{_hm(b.end, tz)}, "
                          f"though you put them in your calendar ({kept} in {DEVICE_WORKOUTS_DAYS} days)",),
                         ABSENT_CONFIDENCE * min(kept, KEEPS_SURE) / KEEPS_SURE)
    e, gap = min(near, key=lambda x: x[1])
    return Judgement(b.id, "accept", "implicit",
                     (f"{b.action} event {_hm(e.start, tz)}-{_hm(e.end, tz)}",), 0.85 if gap == 0 else 0.7)


def _work(b: Block, seen: Seen, tz: tzinfo | None) -> Judgement | None:
    # an event of theirs of the block's own kind over half of it (a focus hold for deep work);
    # a meeting beside a deep-work block is the meeting, not the block
    minutes = (b.end - b.start).total_seconds() / 60.0
    focus = [e for e in seen.events if e.what == b.action and _overlap_min(e, b) >= 0.5 * minutes]
    if focus:
        e = focus[0]
        return Judgement(b.id, "accept", "implicit", (f"{e.what} event {_hm(e.start, tz)}-{_hm(e.end, tz)}",), 0.6)
    done = [t for t in seen.tasks if b.start <= t.start <= b.end + timedelta(minutes=30)]
    if done:
        n = len(done)
        return Judgement(b.id, "accept", "implicit",
                         (f"{n} task{'s' if n > 1 else ''} completed {_hm(b.start, tz)}-{_hm(b.end, tz)}",),
                         0.5 if n == 1 else 0.6)
    return None


def _steps_in(b: Block, seen: Seen) -> float:
    """Steps during the block: each steps record's count prorated to its overlap with the block
    (a watch's hourly count over a 30-minute block counts half)."""
    total = 0.0
    for s in seen.steps:
        span = (s.end - s.start).total_seconds() / 60.0
        over = _overlap_min(s, b)
        if over > 0:
            total += (s.value or 0.0) * (over / span if span > 0 else 1.0)
    return total


def _hm(t: datetime, tz: tzinfo | None) -> str:
    return f"{(t.astimezone(tz) if tz else t):%H:%M}"
