"""The load step of ``rhythm recommend``: the day's inputs, read once from the database.

The person's slot records (this week and ``HISTORY_WEEKS`` before it, up to the slot being
planned), their answers, the calendar around the day, their recent nights and daily numbers,
the actions of the last two weeks and their personal dynamics; plain data for the belief
filter (``rhythm.belief_filter``) and the day planner (``rhythm.plan_day``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

import numpy as np

from common.errors import ConfigError, RhythmError
from common.records import ACTIONS, METERS, SLOTS
from common.timeutil import slot_of
from rhythm.derive import observation_records
from rhythm.personal import personal_dynamics
from rhythm.settings import Settings, local_now, user_zone
from storage import derived, inputs, plans
from storage.db import Database

HISTORY_WEEKS = 2  # earlier weeks fed to the belief before this week's slots
NIGHTS_DAYS = 28
FACTS_DAYS = 35
RECENT_DAYS = 28  # slot actions: when the person last did an action, their habits, what is new to them
SLEEP_PIECE_GAP_S = 3600


@dataclass(frozen=True)
class DayData:
    """Everything the plan of one day reads from the database."""

    day: date
    today: date
    first_slot: int  # the slot planned first (the current one today, else 0)
    now: datetime  # the person's local time
    tz: tzinfo
    week_start: date
    records: list[tuple[dict[str, Any], dict[str, Any]]]  # oldest first, up to (day, first_slot)
    feedback: list[dict[str, Any]]  # storage.plans.answers
    events: list[Any]  # agent.day.CalendarEvent: the day before, the day, the day after
    nights: list[Any]  # agent.day.Night
    facts: Any  # agent.day.PersonFacts
    meters_now: np.ndarray  # the current slot's (filled) meters
    seen: list[bool]  # which of them were observed
    recent_actions: list[tuple[date, str, str]]
    dynamics: Any  # rhythm.personal.personal_dynamics
    wake_override: time | None
    bed_override: time | None
    past_events: list[Any] = field(default_factory=list)  # agent.day.CalendarEvent of the weeks before
    # (action, meter) of fitted effects the insights contradict: neither used nor shown
    contradicted: frozenset[tuple[str, str]] = frozenset()
    # (day, slot, action, kind) of the earlier days' latest plans (the last week)
    recent_blocks: list[tuple[date, str, str, str]] = field(default_factory=list)
    recent_bedtimes: list[datetime] = field(default_factory=list)  # Rhythm's, the last two weeks' plans
    workout_minutes: list[float] = field(default_factory=list)  # the last four weeks' workouts (devices)

    @property
    def week(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """This week's records, from Monday."""
        return [(o, i) for o, i in self.records if date.fromisoformat(i["local_day"]) >= self.week_start]


def load_day(db: Database, settings: Settings, day: date | None = None, now: datetime | None = None) -> DayData:
    """The inputs of the plan of ``day`` (default: the current local day) at ``now``."""
    tz = user_zone(settings)
    now = local_now(settings, now)
    today, current_slot = slot_of(now.replace(tzinfo=None))
    day = day or today
    first_slot = current_slot if day == today else 0
    week_start = day - timedelta(days=day.weekday())
    start = week_start - timedelta(weeks=HISTORY_WEEKS)
    records = [
        (o, i)
        for o, i in observation_records(db, start, day, tz=tz)
        if (date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"])) <= (day, first_slot)
    ]
    if not records:
        raise RhythmError(f"no slots to plan for {day}")
    feedback = plans.answers(db, implicit=bool(settings.implicit_answers))
    # the person's own dynamics from the days before (docs/agent.md section 8)
    dynamics = personal_dynamics(db, day)
    current, cur_info = records[-1]
    prev = cur_info.get("previous") or {}
    seen = list(prev.get("observed") or [False] * len(METERS))
    meters_now = np.asarray(current["meters"], dtype=np.float64)
    shown = {m: (float(v) if ok else None) for m, v, ok in zip(METERS, meters_now, seen, strict=True)}
    return DayData(
        day=day, today=today, first_slot=first_slot, now=now, tz=tz, week_start=week_start,
        records=records, feedback=feedback,
        events=calendar_events(db, day, tz), nights=main_nights(db, day, tz),
        facts=_facts(db, day, shown, _when(cur_info, day)), meters_now=meters_now, seen=seen,
        recent_actions=[(r.day, r.slot, r.action) for r in derived.slot_rows(db, day - timedelta(days=RECENT_DAYS), day)
                        if r.action and (r.day, SLOTS.index(r.slot)) < (day, first_slot)],
        dynamics=dynamics,
        wake_override=_clock(settings.wake_time, "wake_time"), bed_override=_clock(settings.bed_time, "bed_time"),
        past_events=calendar_events(db, day - timedelta(days=NIGHTS_DAYS), tz, end=day - timedelta(days=1)),
        contradicted=_contradicted(db, tz, dynamics, day),
        recent_blocks=plans.recent_blocks(db, day - timedelta(days=7), day - timedelta(days=1)),
        recent_bedtimes=plans.recent_bedtimes(db, day - timedelta(days=14), day - timedelta(days=1)),
        workout_minutes=inputs.workout_minutes(db, day - timedelta(days=NIGHTS_DAYS), day - timedelta(days=1)),
    )


def _contradicted(db: Database, tz: tzinfo, dynamics: Any, day: date) -> frozenset[tuple[str, str]]:
    """The fitted departures that ``rhythm insights`` on the same days contradicts."""
    if not (dynamics.fitted and dynamics.departures()):
        return frozenset()
    from rhythm.insights import contradicted_effects
    from simulator import spec

    table, residual = np.asarray(spec.EFFECT), dynamics.plan_residual()
    deps = []
    for d in dynamics.departures():
        a, k = d["action"], d["meter"]
        # the effect in the person's units and in the plan's (what a block would show)
        for fitted in (d["fitted"], float(table[a, k] + residual[a, k])):
            deps.append({"action": ACTIONS[a], "meter": METERS[k], "fitted": fitted})
    return frozenset(contradicted_effects(db, tz, deps, day))


def _aware(epoch_s: float, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(float(epoch_s), UTC).astimezone(tz)


def calendar_events(db: Database, day: date, tz: tzinfo, start: date | None = None,
                    end: date | None = None) -> list[Any]:
    """The stored events of the day before (or from ``start``), the day and the day after (or
    up to ``end``), as the planner sees them (``done``: what the meters count as done)."""
    from agent.day import CalendarEvent, is_rhythm_event_id
    from mapping.actions import counts_as_done

    return [
        CalendarEvent(
            start=_aware(e.start_s, tz), end=_aware(e.end_s, tz), title=e.title, action=e.action,
            source=e.source, status=e.status, transparency=e.transparency, all_day=e.all_day,
            self_response=e.self_response, rhythm_block=is_rhythm_event_id(e.event_id),
            done=counts_as_done(e.title, e.status, e.transparency, e.self_response),
        )
        for e in inputs.events_between(db, start or day - timedelta(days=1), end or day + timedelta(days=2))
    ]


def main_nights(db: Database, day: date, tz: tzinfo) -> list[Any]:
    """The person's main sleeps of the last four weeks (night sleeps and day sleeps after a
    night shift, each its own): bed, wake-up and minutes asleep."""
    from agent.day import Night

    # pieces of one sleep (a wake-up in the night, a strap that split it) less than an hour
    # apart are one; a day sleep after a night shift and the next night's sleep stay two
    groups: list[list[Any]] = []
    for r in sorted(inputs.main_sleeps(db, day - timedelta(days=NIGHTS_DAYS), day), key=lambda r: r.start_s):
        if groups and r.start_s - max(g.end_s for g in groups[-1]) < SLEEP_PIECE_GAP_S:
            groups[-1].append(r)
        else:
            groups.append([r])
    out = []
    for rows in groups:
        slept = [r.sleep_min for r in rows if r.sleep_min is not None]
        out.append(Night(_aware(min(r.start_s for r in rows), tz), _aware(max(r.end_s for r in rows), tz),
                         float(sum(slept)) if slept else None))
    return out


def _facts(db: Database, day: date, meters: dict[str, float | None], when: str | None) -> Any:
    from agent.day import PersonFacts

    series = inputs.daily_series(db, day - timedelta(days=FACTS_DAYS), day)
    rmssd = series["hrv_rmssd_ms"]
    hrv, kind = (rmssd, "HRV") if rmssd else (series["hrv_sdnn_ms"], "HRV (SDNN)")
    return PersonFacts(sleep_min=series["sleep_min"], hrv_ms=hrv, hrv_kind=kind,
                       resting_hr=series["resting_hr_bpm"], steps=series["steps"], meters=meters,
                       recovery_pct=series["recovery_pct"],
                       meters_when=when)


def _when(info: dict[str, Any], day: date) -> str | None:
    prev = info.get("previous") or {}
    if not prev:
        return None
    d = date.fromisoformat(prev["local_day"])
    slot = prev["slot_name"]
    if d == day:
        return f"this {slot}" if slot != "night" else "tonight"
    if d == day - timedelta(days=1):
        return "overnight" if slot == "night" else f"yesterday {slot}"
    return f"on {d:%a %d %b} ({slot})"


def _clock(value: str | None, name: str) -> time | None:
    if not value:
        return None
    try:
        return time.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{name}: expected a time like 07:00, got {value!r}") from None
