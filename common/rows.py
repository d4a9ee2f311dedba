"""Stored rows as storage hands them to mapping (they meet only through `common`).

Storage reads the tables and returns these plain, immutable rows; mapping turns them into
signals, meters and actions without touching the database (data in, rows out). Times are
UTC epoch seconds with the row's own UTC offset (minutes; ``None`` when the source gave
none), so mapping decides how to show them in local time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple


class SlotAggregate(NamedTuple):
    """A sample metric summed and averaged over one (day, slot), one source per hour (merged)."""

    metric: str
    day: date
    slot: int
    total: float
    mean: float


class DayValue(NamedTuple):
    """A day-level metric (HRV, resting heart rate, recovery): the mean of the day's samples."""

    day: date
    metric: str
    value: float


class IntervalRow(NamedTuple):
    """A timed interval sample (mindful minutes)."""

    start_s: float
    end_s: float
    tz_offset_min: int | None
    local_day: date


class SleepRow(NamedTuple):
    source: str
    start_s: float
    end_s: float
    tz_offset_min: int | None
    local_day: date  # the wake-up day
    sleep_min: float | None
    in_bed_min: float | None
    deep_min: float | None
    rem_min: float | None
    efficiency_pct: float | None
    is_nap: bool
    hrv_rmssd_ms: float | None
    resting_hr_bpm: float | None


class WorkoutRow(NamedTuple):
    start_s: float
    end_s: float
    tz_offset_min: int | None
    local_day: date
    sport: str | None
    duration_min: float | None


class EventRow(NamedTuple):
    source: str
    calendar_id: str
    event_id: str
    start_s: float
    end_s: float
    local_day: date
    all_day: bool
    title: str | None
    description: str | None
    attendees_count: int | None
    event_type: str | None
    timezone: str | None
    status: str | None
    self_response: str | None
    transparency: str | None = None
    action: str | None = None  # the classifier's action (set by `rhythm map`)
    recurring_event_id: str | None = None  # the series it belongs to (a person's label follows it)


class EventText(NamedTuple):
    """What the classifier may read of an event (titles only ever reach the classifier)."""

    source: str
    calendar_id: str
    event_id: str
    title: str | None
    description: str | None
    attendees_count: int | None
    event_type: str | None
    recurring_event_id: str | None = None


class SlotRow(NamedTuple):
    """A stored (day, slot): its meters (None = missing), confidence and action."""

    day: date
    slot: str
    meters: tuple[float | None, ...]
    confidence: float | None
    action: str | None
    action_confidence: float | None


@dataclass(frozen=True)
class StoredInputs:
    """Everything mapping reads for a range of days, as stored."""

    slot_aggregates: tuple[SlotAggregate, ...] = ()
    day_values: tuple[DayValue, ...] = ()
    wearable_days: frozenset[date] = field(default_factory=frozenset)
    mindful: tuple[IntervalRow, ...] = ()
    sleeps: tuple[SleepRow, ...] = ()
    workouts: tuple[WorkoutRow, ...] = ()
    events: tuple[EventRow, ...] = ()


class LabelRow(NamedTuple):
    """A label of event titles (issue 40; rules in mapping/labels.py, table ``labels``)."""

    key: str  # the title or pattern as titles are compared (mapping.labels.label_key)
    pattern: str  # as the person wrote it (or the title, for a learned label)
    action: str  # one of the ten actions, or NONE ("not an action")
    origin: str = "you"  # "you" (the person's; always wins) or "learned"
    evidence: str | None = None  # a learned label's evidence
    applied: bool = True  # a learned label below the apply thresholds is only proposed


class EventFacts(NamedTuple):
    """One timed event and what the devices recorded during it (storage computes the minutes)."""

    title: str | None
    minutes: float
    workout_min: float
    sleep_min: float
    steps: float | None
    wearable_day: bool  # a wearable recorded anything on the event's day
    description: str | None = None
    attendees: int | None = None
    event_type: str | None = None
