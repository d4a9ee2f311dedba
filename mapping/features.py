"""Per-(day, slot) signals from the stored rows. Pure: no database, no clock.

Two halves, kept apart on purpose:

- ``bundle_from_inputs(inputs, tz, default_off)`` turns the rows storage read for a range
  (``common.rows.StoredInputs``: per-slot sample aggregates, sleep, workouts, events) into a
  ``DataBundle`` with *local* wall-clock times (each row's own UTC offset; events by their
  IANA zone; rows without either use the person's zone). ``input_window`` says which days
  of rows a range needs and ``INPUT_METRICS`` which metrics.
- ``slot_signals(bundle, day, slot, event_labels, model)`` is pure: the signals of one slot,
  named as in rules.toml. A signal whose source is absent is *missing* (left out of the
  dict), never 0 and never guessed.

When a zero is real: counts and minutes of a source that is present for the day (steps when
the day has any steps; calendar minutes when the calendar covers the day, i.e. has an event
within ``calendar_coverage_days``; workout minutes when a wearable recorded anything that
day; mindful minutes once the person has logged mindfulness in the last 28 days; completed
tasks once the person has completed a task in the last ``tasks_coverage_days``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.rhythm_blocks import is_rhythm_event_id
from common.rows import StoredInputs
from mapping.actions import SlotEvidence, counts_as_done
from mapping.rules import Model

EPOCH = datetime(1970, 1, 1)
EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
WORK_ACTIONS = frozenset({"DEEP_WORK", "ADMIN_WORK", "LEARN"})
SOCIAL_ACTIONS = frozenset({"SOCIALIZE", "FAMILY_TIME"})
SLOT_HOURS = ((6, 12), (12, 18), (18, 23), (23, 30))
TASK_METRIC = "task_completed"  # a completed task with its time (connectors/tasks)
TASK_DAY_METRIC = "task_completed_day"  # completed tasks known only by their day (one row a day)
DAY_METRICS = ("hrv_rmssd", "hrv_sdnn", "resting_heart_rate", "recovery", TASK_DAY_METRIC)
SLOT_SUM_METRICS = ("steps", TASK_METRIC)
SLOT_MEAN_METRICS = ("stress", "body_battery")
INTERVAL_METRICS = ("mindful",)


def slot_bounds(day: date, slot: int) -> tuple[datetime, datetime]:
    """Naive local start and end of a slot (the night runs to 06:00 the next day)."""
    base = datetime(day.year, day.month, day.day)
    a, b = SLOT_HOURS[slot]
    return base + timedelta(hours=a), base + timedelta(hours=b)


def overlap_min(s1: datetime, e1: datetime, s2: datetime, e2: datetime) -> float:
    s, e = max(s1, s2), min(e1, e2)
    return max(0.0, (e - s).total_seconds() / 60.0)


def union_min(intervals: list[tuple[datetime, datetime]], lo: datetime, hi: datetime) -> float:
    """Minutes of [lo, hi) covered by the union of intervals (overlaps counted once)."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in clipped:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += (cur_e - cur_s).total_seconds()
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += (cur_e - cur_s).total_seconds()
    return total / 60.0


# --- rows -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SleepRow:
    source: str
    start: datetime  # local, naive
    end: datetime
    local_day: date  # wake-up day
    sleep_min: float | None
    in_bed_min: float | None
    deep_min: float | None
    rem_min: float | None
    efficiency_pct: float | None
    is_nap: bool
    hrv_rmssd_ms: float | None
    resting_hr_bpm: float | None


@dataclass(frozen=True)
class WorkoutRow:
    start: datetime
    end: datetime
    local_day: date
    sport: str
    duration_min: float | None


@dataclass(frozen=True)
class EventRow:
    key: tuple[str, str, str]  # (source, calendar_id, event_id)
    start: datetime  # local, naive
    end: datetime
    local_day: date
    all_day: bool
    title: str | None
    description: str | None
    attendees: int | None
    event_type: str | None
    active: bool  # done: not cancelled, declined, tentative or free, not one of Rhythm's own blocks

    @property
    def minutes(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds() / 60.0)


@dataclass
class DataBundle:
    """Everything the signals need for a range of days, with local times."""

    sleeps: list[SleepRow] = field(default_factory=list)
    workouts: list[WorkoutRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    mindful: list[tuple[datetime, datetime]] = field(default_factory=list)
    slot_values: dict[tuple[date, int, str], float] = field(default_factory=dict)
    day_values: dict[tuple[date, str], float] = field(default_factory=dict)
    steps_days: set[date] = field(default_factory=set)
    wearable_days: set[date] = field(default_factory=set)
    event_days: set[date] = field(default_factory=set)
    mindful_days: set[date] = field(default_factory=set)
    task_days: set[date] = field(default_factory=set)  # days (slot days) with a completed task
    has_rmssd: bool = False

    def __post_init__(self) -> None:
        self.index()

    def index(self) -> None:
        """(Re)build the per-day lookups after the row lists change."""
        self._events_by_day: dict[date, list[EventRow]] = defaultdict(list)
        for ev in self.events:
            if ev.active and not ev.all_day:
                self._events_by_day[ev.start.date()].append(ev)
        self._sleep_by_wake: dict[date, list[SleepRow]] = defaultdict(list)
        for s in self.sleeps:
            self._sleep_by_wake[s.local_day].append(s)
        self._mindful_by_day: dict[date, float] = defaultdict(float)
        for s, e in self.mindful:
            self._mindful_by_day[s.date()] += (e - s).total_seconds() / 60.0
        self.has_rmssd = self.has_rmssd or any(k[1] == "hrv_rmssd" for k in self.day_values) or any(
            s.hrv_rmssd_ms is not None for s in self.sleeps
        )

    def events_between(self, lo: datetime, hi: datetime) -> list[EventRow]:
        """Active timed events overlapping [lo, hi)."""
        out = []
        d = lo.date() - timedelta(days=1)
        while d <= hi.date():
            out.extend(e for e in self._events_by_day.get(d, ()) if e.end > lo and e.start < hi)
            d += timedelta(days=1)
        return out

    def events_starting(self, lo: datetime, hi: datetime) -> list[EventRow]:
        out = []
        d = lo.date()
        while d <= hi.date():
            out.extend(e for e in self._events_by_day.get(d, ()) if lo <= e.start < hi)
            d += timedelta(days=1)
        return out

    def main_sleep(self, day: date) -> list[SleepRow]:
        """The main (not nap) sleep of the source with most sleep that woke up on ``day``."""
        by_src: dict[str, list[SleepRow]] = defaultdict(list)
        for s in self._sleep_by_wake.get(day, ()):
            if not s.is_nap:
                by_src[s.source].append(s)
        if not by_src:
            return []

        def total(rows: list[SleepRow]) -> float:
            return sum((r.sleep_min if r.sleep_min is not None else _dur(r)) for r in rows)

        return max(by_src.values(), key=lambda rows: (total(rows), rows[0].source))

    def days_with_data(self) -> set[date]:
        return self.wearable_days | self.event_days

    def mindful_min_on(self, day: date) -> float:
        return self._mindful_by_day.get(day, 0.0)


def _dur(r: SleepRow | WorkoutRow) -> float:
    return max(0.0, (r.end - r.start).total_seconds() / 60.0)


# --- loading (the only I/O) -----------------------------------------------------------------


def _offset_of(tz: tzinfo, at: datetime) -> int:
    off = tz.utcoffset(at)
    return int(off.total_seconds() // 60) if off is not None else 0


def input_window(start: date, end: date, model: Model) -> tuple[date, date]:
    """The stored days whose rows the signals of days [start, end] need (baselines, the
    calendar coverage window, the night after the last day)."""
    back = max(model.calendar_coverage_days, model.tasks_coverage_days)
    lo = start - timedelta(days=model.baseline_days + back + 8)
    hi = end + timedelta(days=model.calendar_coverage_days + 2)
    return lo, hi


def default_offset_min(tz: tzinfo, day: date) -> int:
    """The offset (minutes) of ``tz`` on ``day`` (for a zone without an IANA name)."""
    return _offset_of(tz, datetime(day.year, day.month, day.day))


def zone_name(tz: tzinfo) -> str | None:
    """The IANA name of a zone (storage resolves rows without an offset in it), if it has one."""
    if tz is UTC:
        return "UTC"
    return getattr(tz, "key", None)


def _offset_at(tz: tzinfo, epoch_s: float) -> int:
    """The UTC offset (minutes) of ``tz`` at an instant."""
    off = (EPOCH_UTC + timedelta(seconds=float(epoch_s))).astimezone(tz).utcoffset()
    return int(off.total_seconds() // 60) if off is not None else 0


# What mapping asks storage for (storage.inputs.mapping_inputs keyword arguments).
INPUT_METRICS = {
    "slot_sum_metrics": SLOT_SUM_METRICS,
    "slot_mean_metrics": SLOT_MEAN_METRICS,
    "nonnegative_metrics": ("stress", "body_battery"),  # Garmin: -1/-2 = not measured
    "day_metrics": DAY_METRICS,
    "interval_metrics": INTERVAL_METRICS,
}


def _local(epoch_s: float, offset_min: int) -> datetime:
    return EPOCH + timedelta(seconds=float(epoch_s), minutes=offset_min)


def bundle_from_inputs(inputs: StoredInputs, tz: tzinfo) -> DataBundle:
    """The stored rows of a range as a DataBundle with local wall-clock times.

    Each row keeps its own UTC offset; events are shown in their own IANA zone; rows with
    neither are shown in the person's zone ``tz`` (its offset at that instant)."""
    b = DataBundle()
    for agg in inputs.slot_aggregates:
        val = agg.total if agg.metric in SLOT_SUM_METRICS else agg.mean
        b.slot_values[(agg.day, agg.slot, agg.metric)] = float(val)
        if agg.metric == "steps":
            b.steps_days.add(agg.day)
        elif agg.metric == TASK_METRIC and agg.total > 0:
            b.task_days.add(agg.day)
    for dv in inputs.day_values:
        b.day_values[(dv.day, dv.metric)] = float(dv.value)
        if dv.metric == TASK_DAY_METRIC and dv.value > 0:
            b.task_days.add(dv.day)
    b.wearable_days.update(inputs.wearable_days)

    def off(row_off: int | None, epoch_s: float) -> int:
        return _offset_at(tz, epoch_s) if row_off is None else row_off

    for m in inputs.mindful:
        o = off(m.tz_offset_min, m.start_s)
        b.mindful.append((_local(m.start_s, o), _local(m.end_s, o)))
        b.mindful_days.add(m.local_day)
    for r in inputs.sleeps:
        o = off(r.tz_offset_min, r.start_s)
        b.sleeps.append(
            SleepRow(r.source, _local(r.start_s, o), _local(r.end_s, o), r.local_day, r.sleep_min,
                     r.in_bed_min, r.deep_min, r.rem_min, r.efficiency_pct, bool(r.is_nap),
                     r.hrv_rmssd_ms, r.resting_hr_bpm)
        )
    for w in inputs.workouts:
        o = off(w.tz_offset_min, w.start_s)
        b.workouts.append(WorkoutRow(_local(w.start_s, o), _local(w.end_s, o), w.local_day, w.sport or "",
                                     w.duration_min))
    zones: dict[str, tzinfo] = {}
    for e in inputs.events:
        ev_tz = tz
        if e.timezone:
            if e.timezone not in zones:
                try:
                    zones[e.timezone] = ZoneInfo(e.timezone)
                except (ZoneInfoNotFoundError, ValueError):
                    zones[e.timezone] = tz
            ev_tz = zones[e.timezone]
        o = _offset_at(ev_tz, e.start_s)
        # Rhythm's own blocks written into the calendar (plan export/push) are suggestions, not
        # what the person did: they never count as an action or as calendar time; nor does a
        # hold (tentative, "free", "maybe gym?": mapping.actions.counts_as_done).
        active = (counts_as_done(e.title, e.status, e.transparency, e.self_response)
                  and not is_rhythm_event_id(e.event_id))
        b.events.append(
            EventRow((e.source, e.calendar_id, e.event_id), _local(e.start_s, o), _local(e.end_s, o),
                     e.local_day, bool(e.all_day), e.title, e.description, e.attendees_count,
                     e.event_type, active)
        )
        if active:
            b.event_days.add(e.local_day)
    b.index()
    return b


# --- signals (pure) -------------------------------------------------------------------------


def _calendar_covered(b: DataBundle, day: date, model: Model) -> bool:
    k = model.calendar_coverage_days
    return any((day + timedelta(days=i)) in b.event_days for i in range(-k, k + 1))


def _tasks_covered(b: DataBundle, day: date, model: Model) -> bool:
    """The person keeps a task list: a completed task on ``day`` or in the days before."""
    k = model.tasks_coverage_days
    return any((day - timedelta(days=i)) in b.task_days for i in range(k + 1))


def task_signals(b: DataBundle, day: date, slot: int) -> dict[str, float]:
    """Completed tasks as progress evidence for one slot (call only when covered).

    ``tasks_done``: completions with a time in the slot. ``tasks_so_far``: from 06:00 to the
    end of the slot. ``tasks_7d``: in the 7 days up to the end of the slot (the 28 slots that
    end there; left out by ``slot_signals`` while the person's first completed task is less
    than a week old, when the week is not a whole one). A completion known only by its day
    counts for that day's night slot (the day is over then) and in ``tasks_7d`` from then on,
    never in ``tasks_done``.
    """

    def done(d: date, s: int) -> float:
        return b.slot_values.get((d, s, TASK_METRIC), 0.0)

    def dated(d: date) -> float:
        return b.day_values.get((d, TASK_DAY_METRIC), 0.0)

    night = slot == 3
    so_far = sum(done(day, s) for s in range(slot + 1)) + (dated(day) if night else 0.0)
    week = so_far + sum(done(day - timedelta(days=7), s) for s in range(slot + 1, 4))
    for i in range(1, 7):
        d = day - timedelta(days=i)
        week += sum(done(d, s) for s in range(4)) + dated(d)
    return {"tasks_done": done(day, slot), "tasks_so_far": so_far, "tasks_7d": week}


def day_signals(b: DataBundle, day: date, model: Model) -> dict[str, float]:
    """Day-scope signals of ``day`` (the same for its four slots)."""
    out: dict[str, float] = {}
    main = b.main_sleep(day)
    if main:
        sleep = [r.sleep_min for r in main if r.sleep_min is not None]
        if sleep:
            out["sleep_min"] = float(sum(sleep))
        effs = [r.efficiency_pct for r in main if r.efficiency_pct is not None]
        in_bed = [r.in_bed_min for r in main if r.in_bed_min]
        if effs:
            out["sleep_efficiency_pct"] = float(sum(effs) / len(effs))
        elif sleep and in_bed and len(in_bed) == len(main):
            out["sleep_efficiency_pct"] = 100.0 * sum(sleep) / sum(in_bed)
        deep = [r.deep_min for r in main]
        rem = [r.rem_min for r in main]
        if sleep and sum(sleep) > 0 and all(x is not None for x in deep + rem):
            out["deep_rem_share"] = (sum(deep) + sum(rem)) / sum(sleep)
    rmssd = b.day_values.get((day, "hrv_rmssd"))
    if rmssd is None:
        vals = [r.hrv_rmssd_ms for r in main if r.hrv_rmssd_ms is not None]
        rmssd = sum(vals) / len(vals) if vals else None
    if rmssd is not None:
        out["hrv_rmssd_ms"] = float(rmssd)
    sdnn = b.day_values.get((day, "hrv_sdnn"))
    if sdnn is not None:
        out["hrv_sdnn_ms"] = float(sdnn)
    rhr = b.day_values.get((day, "resting_heart_rate"))
    if rhr is None:
        vals = [r.resting_hr_bpm for r in main if r.resting_hr_bpm is not None]
        rhr = sum(vals) / len(vals) if vals else None
    if rhr is not None:
        out["resting_hr_bpm"] = float(rhr)
    rec = b.day_values.get((day, "recovery"))
    if rec is not None:
        out["recovery_pct"] = float(rec)

    # HRV trend: mean daily HRV over the last 7 days (RMSSD if the person has it, else SDNN).
    trend = []
    for i in range(7):
        d = day - timedelta(days=i)
        if b.has_rmssd:
            v = b.day_values.get((d, "hrv_rmssd"))
            if v is None:
                vals = [r.hrv_rmssd_ms for r in b.main_sleep(d) if r.hrv_rmssd_ms is not None]
                v = sum(vals) / len(vals) if vals else None
        else:
            v = b.day_values.get((d, "hrv_sdnn"))
        if v is not None:
            trend.append(v)
    if len(trend) >= 2 and day in b.wearable_days:
        out["hrv_7d_ms"] = float(sum(trend) / len(trend))

    k = model.mindful_coverage_days
    if any((day - timedelta(days=i)) in b.mindful_days for i in range(k + 1)):
        out["mindful_7d_min"] = float(sum(b.mindful_min_on(day - timedelta(days=i)) for i in range(7)))
    return out


def _blocks(events: list[EventRow], gap_min: float) -> list[tuple[datetime, datetime]]:
    """Merge events separated by less than ``gap_min`` into blocks without a break."""
    out: list[list[datetime]] = []
    for ev in sorted(events, key=lambda e: e.start):
        if out and (ev.start - out[-1][1]).total_seconds() / 60.0 < gap_min:
            out[-1][1] = max(out[-1][1], ev.end)
        else:
            out.append([ev.start, ev.end])
    return [(s, e) for s, e in out]


def slot_signals(
    b: DataBundle,
    day: date,
    slot: int,
    labels: Mapping[tuple[str, str, str], str | None],
    model: Model,
    day_level: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """All signals of one (day, slot). ``labels`` maps event keys to their action (or None)."""
    out: dict[str, float] = dict(day_level if day_level is not None else day_signals(b, day, model))
    lo, hi = slot_bounds(day, slot)
    day_start = slot_bounds(day, 0)[0]

    if day in b.steps_days:
        out["steps"] = b.slot_values.get((day, slot, "steps"), 0.0)
    for metric in SLOT_MEAN_METRICS:
        v = b.slot_values.get((day, slot, metric))
        if v is not None:
            out[metric] = v
    if day in b.wearable_days:
        out["exercise_min"] = union_min([(w.start, w.end) for w in b.workouts], lo, hi)

    if _calendar_covered(b, day, model):
        evs = b.events_between(lo, hi)

        def mins(pred) -> float:
            return union_min([(e.start, e.end) for e in evs if pred(e)], lo, hi)

        def is_meeting(e: EventRow) -> bool:
            return (e.attendees or 0) >= 2 or labels.get(e.key) == "ADMIN_WORK"

        def is_work(e: EventRow) -> bool:
            return labels.get(e.key) in WORK_ACTIONS

        out["busy_min"] = mins(lambda e: True)
        out["meeting_min"] = mins(is_meeting)
        out["focus_min"] = mins(is_work)
        out["social_min"] = mins(lambda e: labels.get(e.key) in SOCIAL_ACTIONS)
        today_evs = b.events_between(day_start, hi)
        out["meetings_so_far_min"] = union_min(
            [(e.start, e.end) for e in today_evs if is_meeting(e)], day_start, hi
        )
        out["work_so_far_min"] = union_min(
            [(e.start, e.end) for e in today_evs if is_work(e)], day_start, hi
        )
        around = b.events_between(lo - timedelta(hours=12), hi + timedelta(hours=12))
        blocks = [(s, e) for s, e in _blocks(around, model.break_gap_min) if e > lo and s < hi]
        out["longest_block_min"] = max(((e - s).total_seconds() / 60.0 for s, e in blocks), default=0.0)
        week = b.events_starting(hi - timedelta(days=7), hi)
        out["work_blocks_7d"] = float(
            sum(1 for e in week if is_work(e) and e.minutes >= model.work_block_min and e.end <= hi)
        )
        out["social_events_7d"] = float(sum(1 for e in week if labels.get(e.key) in SOCIAL_ACTIONS))
        out["people_events_7d"] = float(
            sum(1 for e in week if (e.attendees or 0) >= 2 and not is_work(e))
        )
    if _tasks_covered(b, day, model):
        out.update(task_signals(b, day, slot))
        if day - timedelta(days=6) < min(b.task_days):  # the list is younger than the week
            del out["tasks_7d"]
    return out


def slot_evidence(
    b: DataBundle,
    day: date,
    slot: int,
    labels: Mapping[tuple[str, str, str], str | None],
    confidences: Mapping[tuple[str, str, str], float],
    point_event_min: float = 60.0,
) -> SlotEvidence:
    """Minutes of sleep, workouts, mindfulness and classified events inside one slot.

    An event without a duration counts ``point_event_min`` in the slot it starts in.
    """
    lo, hi = slot_bounds(day, slot)
    ev = SlotEvidence()
    near = [s for d in (day, day + timedelta(days=1)) for s in b._sleep_by_wake.get(d, ())]
    ev.sleep_min = union_min([(s.start, s.end) for s in near], lo, hi)
    inside = [w for w in b.workouts if w.end > lo and w.start < hi]
    ev.workout_min = union_min([(w.start, w.end) for w in inside], lo, hi)
    ev.workout_sports = [w.sport for w in inside]
    ev.mindful_min = union_min(b.mindful, lo, hi)
    for e in b.events_between(lo, hi):
        action = labels.get(e.key)
        if action is None or e.end <= e.start:
            continue
        ev.add_event(action, overlap_min(e.start, e.end, lo, hi), confidences.get(e.key, 0.0))
    for e in b.events_starting(lo, hi):
        action = labels.get(e.key)
        if action is not None and e.end <= e.start:
            ev.add_event(action, point_event_min, confidences.get(e.key, 0.0))
    return ev


def describe_bundle(b: DataBundle) -> dict[str, Any]:
    return {
        "sleep_sessions": len(b.sleeps),
        "workouts": len(b.workouts),
        "events": len(b.events),
        "mindful_sessions": len(b.mindful),
        "wearable_days": len(b.wearable_days),
        "calendar_days": len(b.event_days),
        "task_days": len(b.task_days),
    }
