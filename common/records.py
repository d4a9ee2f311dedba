"""Typed records: the only thing connectors hand to storage and storage hands to mapping.

Rules (STYLE 5): frozen dataclasses, units in field names, timezone-aware timestamps plus
the local day, ``None`` for missing (never 0). A connector yields these; it never touches
the database.

Timestamps are aware ``datetime`` objects. ``tz_offset_min`` keeps the UTC offset that was
in force where the measurement was taken (the only travel signal some sources give), and
``local_day`` is the calendar day in that local time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import Any, ClassVar

# The ten actions and four slots of product.md (same order as the simulator's tables).
ACTIONS = (
    "DEEP_WORK",
    "ADMIN_WORK",
    "LEARN",
    "SLEEP",
    "EXERCISE",
    "MEDITATE",
    "FAMILY_TIME",
    "SOCIALIZE",
    "ME_TIME",
    "BINGE_WATCH",
)
SLOTS = ("morning", "afternoon", "evening", "night")
# The five meters of product.md, in the simulator's order (V, C, P, S, N).
METERS = ("vitality", "cognition", "progress", "serenity", "connection")

# Metric vocabulary for `samples.metric`, with the unit each is stored in.
METRIC_UNITS: dict[str, str] = {
    "heart_rate": "bpm",
    "resting_heart_rate": "bpm",
    "walking_heart_rate": "bpm",
    "hrv_sdnn": "ms",
    "hrv_rmssd": "ms",
    "rr_interval": "ms",
    "steps": "count",
    "active_energy": "kcal",
    "basal_energy": "kcal",
    "total_energy": "kcal",  # active + basal (WHOOP's "Energy burned")
    "exercise_time": "min",
    "respiratory_rate": "brpm",
    "spo2": "pct",
    "skin_temp": "degC",
    "skin_temp_deviation": "degC",
    "mindful": "min",
    "stand_hour": "count",
    "stress": "score",
    "body_battery": "score",
    "recovery": "pct",
    "strain": "score",
    "sleep_stage": "min",
    "distance": "m",
    "floors": "count",
    "intensity_minutes": "min",
    "vo2max": "ml/kg/min",
    "weight": "kg",
    "readiness": "score",  # Oura readiness, 1-100 (not WHOOP's recovery)
    "sleep_score": "score",  # a day's sleep score, 1-100 (Oura daily_sleep)
    "activity_score": "score",  # a day's activity score, 1-100 (Oura daily_activity)
    "high_stress_time": "min",  # daytime minutes in high stress (Oura daily_stress)
    "high_recovery_time": "min",  # daytime minutes in high recovery (Oura daily_stress)
    "task_completed": "count",  # a completed task at its completion time (connectors/tasks)
    "task_completed_day": "count",  # completed tasks known only by their local day
    # journal_<question>: WHOOP journal answers, 1 = yes, 0 = no (unit "bool")
}


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A payload as received, kept so normalised tables can be rebuilt without the network."""

    table: ClassVar[str] = "raw"
    source: str
    kind: str
    natural_key: str
    payload: str  # JSON text
    fetched_at: datetime


@dataclass(frozen=True, slots=True)
class Sample:
    """One normalised measurement (point or interval)."""

    table: ClassVar[str] = "samples"
    source: str
    metric: str
    start_ts: datetime
    end_ts: datetime
    value: float
    unit: str
    local_day: date
    source_name: str = ""  # app/device that wrote it (Apple sourceName, Garmin product...)
    device: str | None = None
    tz_offset_min: int | None = None
    detail: str | None = None  # e.g. sleep stage name, workout-context, JSON extras


@dataclass(frozen=True, slots=True)
class SleepSession:
    """One sleep (or nap). ``local_day`` is the local day the person woke up on."""

    table: ClassVar[str] = "sleep_sessions"
    source: str
    session_id: str
    start_ts: datetime
    end_ts: datetime
    local_day: date
    sleep_min: float | None = None
    in_bed_min: float | None = None
    awake_min: float | None = None
    light_min: float | None = None
    deep_min: float | None = None
    rem_min: float | None = None
    efficiency_pct: float | None = None
    score: float | None = None
    is_nap: bool = False
    respiratory_rate_brpm: float | None = None
    hrv_rmssd_ms: float | None = None
    resting_hr_bpm: float | None = None
    tz_offset_min: int | None = None
    source_name: str = ""


@dataclass(frozen=True, slots=True)
class Workout:
    table: ClassVar[str] = "workouts"
    source: str
    workout_id: str
    start_ts: datetime
    end_ts: datetime
    local_day: date
    sport: str
    duration_min: float | None = None
    energy_kcal: float | None = None
    distance_m: float | None = None
    avg_hr_bpm: float | None = None
    max_hr_bpm: float | None = None
    strain: float | None = None
    tz_offset_min: int | None = None
    source_name: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    """One calendar occurrence (recurring series are expanded, one row per instance)."""

    table: ClassVar[str] = "events"
    source: str
    calendar_id: str
    event_id: str
    start_ts: datetime
    end_ts: datetime
    all_day: bool
    local_day: date
    title: str | None = None
    description: str | None = None
    location: str | None = None
    status: str = "confirmed"
    attendees_count: int | None = None
    self_response: str | None = None
    event_type: str | None = None
    transparency: str | None = None
    timezone: str | None = None
    recurring_event_id: str | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """Columnar fast path: many rows of one record type at once.

    ``columns`` maps field names of ``record_type`` to equal-length sequences. Streaming
    parsers of multi-GB files use this to avoid one object per row.
    """

    record_type: type
    columns: dict[str, Sequence[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


@dataclass(frozen=True, slots=True)
class Deletion:
    """A source says these rows no longer exist (cancelled event, 410 resync wipe)."""

    table: str
    where: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A connector left `count` rows out for `reason` (a NaN value, an end before its start,
    negative sleep minutes...): counted in the import summary, never stored as a row."""

    source: str
    reason: str
    count: int = 1


RECORD_TYPES = (RawRecord, Sample, SleepSession, Workout, Event)


def field_names(record_type: type) -> list[str]:
    return [f.name for f in fields(record_type)]


def as_row(record: Any) -> tuple:
    return tuple(getattr(record, n) for n in record.__slots__)
