"""What mapping reads, as plain rows (common.rows): the only SQL behind the meters.

Mapping never sees the connection (STYLE rules 6, 7): the app shell asks these functions
for the rows of a range of days and hands them to mapping. Heavy per-sample tables are
aggregated here, in DuckDB, per (day, slot).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from common.rows import (
    DayValue,
    EventRow,
    EventText,
    IntervalRow,
    SleepRow,
    SlotAggregate,
    StoredInputs,
    WorkoutRow,
)
from common.timeutil import EARLIEST_DAY, LATEST_DAY, SLOT_BOUNDS
from storage.db import Database

# Days mapping will consider: the importers' accepted range (common.timeutil); a row dated
# outside it (year 1 or 9999, slipped in before the importers refused such dates) is left
# alone rather than stretching the range to millions of days (`rhythm db prune` removes it).
FIRST_DAY = EARLIEST_DAY
LAST_DAY = LATEST_DAY
# Sample sources that are not a wearable: a day with only their rows is not a "wearable day"
# for mapping (whose empty slots would read as "no workout").
NOT_WEARABLE = ("calendar", "tasks")
_WEARABLE = f"source NOT IN ({', '.join(repr(s) for s in NOT_WEARABLE)})"


def data_span(db: Database) -> tuple[date, date] | None:
    """First and last local day with any stored record (events included), within
    [FIRST_DAY, LAST_DAY]."""
    sane = "local_day BETWEEN ? AND ?"
    row = db.con.execute(
        "SELECT min(d), max(d) FROM ("
        f" SELECT min(local_day) AS d FROM samples WHERE {sane} UNION ALL SELECT max(local_day) FROM samples WHERE {sane}"
        f" UNION ALL SELECT min(local_day) FROM sleep_sessions WHERE {sane}"
        f" UNION ALL SELECT max(local_day) FROM sleep_sessions WHERE {sane}"
        f" UNION ALL SELECT min(local_day) FROM workouts WHERE {sane} UNION ALL SELECT max(local_day) FROM workouts WHERE {sane}"
        f" UNION ALL SELECT min(local_day) FROM events WHERE status <> 'cancelled' AND {sane}"
        f" UNION ALL SELECT max(local_day) FROM events WHERE status <> 'cancelled' AND {sane})",
        [FIRST_DAY, LAST_DAY] * 8,
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return row[0], row[1]


def wearable_span(db: Database) -> tuple[date, date] | None:
    """First and last local day of wearable data (samples, sleep, workouts; not calendars),
    within [FIRST_DAY, LAST_DAY]."""
    sane = "local_day BETWEEN ? AND ?"
    row = db.con.execute(
        "SELECT min(d), max(d) FROM ("
        f" SELECT min(local_day) AS d FROM samples WHERE source <> 'calendar' AND {sane}"
        f" UNION ALL SELECT max(local_day) FROM samples WHERE source <> 'calendar' AND {sane}"
        f" UNION ALL SELECT min(local_day) FROM sleep_sessions WHERE {sane}"
        f" UNION ALL SELECT max(local_day) FROM sleep_sessions WHERE {sane}"
        f" UNION ALL SELECT min(local_day) FROM workouts WHERE {sane} UNION ALL SELECT max(local_day) FROM workouts WHERE {sane})",
        [FIRST_DAY, LAST_DAY] * 6,
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return row[0], row[1]


# A sample of two hours or more (a ring's or a daily summary's whole-day total) cannot be
# placed in one slot: it counts on its own local day, shared over the slots as a day's
# activity usually is (morning, afternoon, evening, night).
COARSE_S = 7200
DAY_SHARES = (0.3, 0.35, 0.3, 0.05)


def _slot_case(column: str) -> str:
    """SQL: the slot index of a local timestamp (the night's small hours included)."""
    (m0, _), (a0, _), (e0, _), (n0, _) = SLOT_BOUNDS
    return (
        f"CASE WHEN hour({column}) < {m0} THEN 3 WHEN hour({column}) < {a0} THEN 0 "
        f"WHEN hour({column}) < {e0} THEN 1 WHEN hour({column}) < {n0} THEN 2 ELSE 3 END"
    )


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


def mapping_inputs(
    db: Database,
    lo: date,
    hi: date,
    *,
    zone: str | None,
    default_offset_min: int,
    slot_sum_metrics: Sequence[str],
    slot_mean_metrics: Sequence[str],
    nonnegative_metrics: Sequence[str] = (),
    day_metrics: Sequence[str] = (),
    interval_metrics: Sequence[str] = (),
) -> StoredInputs:
    """The stored rows of local days [lo, hi] that mapping needs, from the merged layer (one
    source per metric and window: samples_merged, sleep_sessions_merged, workouts_merged).

    Per-slot aggregates: for each metric, (day, slot) and source, the sum and mean of the
    values (local time from each row's own offset, else in the IANA ``zone`` (its offset on
    that day), else ``default_offset_min``); then the sum of the source totals (the merged
    layer already chose one source per hour, so nothing is counted twice) and the mean of
    the source means. ``nonnegative_metrics`` drop negative values (Garmin writes -1/-2 for
    "not measured"). A sample of two hours or more counts on its own local day, shared over
    the slots by ``DAY_SHARES`` (its time says nothing about which slot it belongs to).
    """
    metrics = [*slot_sum_metrics, *slot_mean_metrics]
    rows = db.con.execute(
        f"""
        WITH s AS (
            SELECT metric, source, source_name, value, local_day,
                epoch(end_ts) - epoch(start_ts) >= {COARSE_S} AS coarse,
                CASE WHEN tz_offset_min IS NOT NULL
                     THEN (start_ts AT TIME ZONE 'UTC') + to_minutes(CAST(tz_offset_min AS INTEGER))
                     WHEN CAST(? AS VARCHAR) IS NOT NULL THEN timezone(CAST(? AS VARCHAR), start_ts)
                     ELSE (start_ts AT TIME ZONE 'UTC') + to_minutes(CAST(? AS INTEGER)) END AS lt
            FROM samples_merged
            WHERE metric IN ({_marks(metrics)}) AND value IS NOT NULL
              AND (metric NOT IN ({_marks(nonnegative_metrics)}) OR value >= 0)
              AND local_day BETWEEN ? AND ?
        ), slotted AS (
            SELECT metric, source, source_name, value,
                CASE WHEN hour(lt) < {SLOT_BOUNDS[0][0]} THEN CAST(lt AS DATE) - 1 ELSE CAST(lt AS DATE) END AS day,
                {_slot_case("lt")} AS slot
            FROM s WHERE NOT coarse
            UNION ALL  -- a day-long total: its own day, shared over the slots (DAY_SHARES)
            SELECT metric, source, source_name, value * w.share, local_day, w.slot
            FROM s JOIN (VALUES {", ".join(f"({i}, {x})" for i, x in enumerate(DAY_SHARES))}) w(slot, share) ON true
            WHERE coarse
        ), per_source AS (
            SELECT metric, day, slot, source, source_name, sum(value) AS total, avg(value) AS mean
            FROM slotted GROUP BY ALL
        )
        SELECT metric, day, slot, sum(total) AS total, avg(mean) AS mean FROM per_source GROUP BY ALL
        ORDER BY metric, day, slot
        """,
        [zone, zone, default_offset_min, *metrics, *nonnegative_metrics, lo, hi],
    ).fetchall()
    aggregates = tuple(SlotAggregate(m, d, int(s), float(t), float(a)) for m, d, s, t, a in rows)

    day_values: tuple[DayValue, ...] = ()
    if day_metrics:
        rows = db.con.execute(
            f"SELECT local_day, metric, avg(value) FROM samples_merged WHERE metric IN ({_marks(day_metrics)}) "
            "AND value IS NOT NULL AND local_day BETWEEN ? AND ? GROUP BY ALL ORDER BY 1, 2",
            [*day_metrics, lo, hi],
        ).fetchall()
        day_values = tuple(DayValue(d, m, float(v)) for d, m, v in rows)

    rows = db.con.execute(
        f"SELECT DISTINCT local_day FROM samples WHERE {_WEARABLE} AND local_day BETWEEN ? AND ?",
        [lo, hi],
    ).fetchall()
    wearable = {r[0] for r in rows}

    mindful: tuple[IntervalRow, ...] = ()
    if interval_metrics:
        rows = db.con.execute(
            "SELECT epoch(start_ts), epoch(end_ts), tz_offset_min, local_day FROM samples_merged "
            f"WHERE metric IN ({_marks(interval_metrics)}) AND local_day BETWEEN ? AND ? ORDER BY start_ts",
            [*interval_metrics, lo, hi],
        ).fetchall()
        mindful = tuple(IntervalRow(float(s), float(e), off, d) for s, e, off, d in rows)

    rows = db.con.execute(
        "SELECT source, epoch(start_ts), epoch(end_ts), tz_offset_min, local_day, sleep_min, "
        "in_bed_min, deep_min, rem_min, efficiency_pct, is_nap, hrv_rmssd_ms, resting_hr_bpm "
        "FROM sleep_sessions_merged WHERE local_day BETWEEN ? AND ? ORDER BY start_ts, source",
        [lo, hi],
    ).fetchall()
    sleeps = tuple(
        SleepRow(src, float(s), float(e), off, d, *vals[:5], bool(vals[5]), *vals[6:])
        for src, s, e, off, d, *vals in rows
    )
    wearable.update(r.local_day for r in sleeps)

    rows = db.con.execute(
        "SELECT epoch(start_ts), epoch(end_ts), tz_offset_min, local_day, sport, duration_min "
        "FROM workouts_merged WHERE local_day BETWEEN ? AND ? ORDER BY start_ts",
        [lo, hi],
    ).fetchall()
    workouts = tuple(WorkoutRow(float(s), float(e), off, d, sport, dur) for s, e, off, d, sport, dur in rows)
    wearable.update(r.local_day for r in workouts)

    return StoredInputs(
        slot_aggregates=aggregates,
        day_values=day_values,
        wearable_days=frozenset(wearable),
        mindful=mindful,
        sleeps=sleeps,
        workouts=workouts,
        events=events_between(db, lo, hi),
    )


def events_between(db: Database, lo: date, hi: date) -> tuple[EventRow, ...]:
    """Every stored event occurrence of local days [lo, hi] (cancelled ones too: mapping decides)."""
    rows = db.con.execute(
        "SELECT source, calendar_id, event_id, epoch(start_ts), epoch(end_ts), local_day, all_day, "
        "title, description, attendees_count, event_type, timezone, status, self_response, transparency, action, "
        "recurring_event_id "
        "FROM events WHERE local_day BETWEEN ? AND ? ORDER BY start_ts, event_id",
        [lo, hi],
    ).fetchall()
    return tuple(
        EventRow(src, cal, eid, float(s), float(e), d, bool(ad), *rest)
        for src, cal, eid, s, e, d, ad, *rest in rows
    )


def event_texts(db: Database, since: date | None = None) -> list[EventText]:
    """Title, description, attendees and type of every event on or after ``since``."""
    sql = (
        "SELECT source, calendar_id, event_id, title, description, attendees_count, event_type, recurring_event_id "
        "FROM events"
    )
    params: list[object] = []
    if since is not None:
        sql += " WHERE local_day >= ?"
        params.append(since)
    return [EventText(*r) for r in db.con.execute(sql, params).fetchall()]


def main_sleeps(db: Database, lo: date, hi: date) -> list[SleepRow]:
    """The main (not nap) sleep of each wake-up day in [lo, hi], from the one source the merged
    layer chose for that day (two devices never add up), in start order."""
    rows = db.con.execute(
        "SELECT source, epoch(start_ts), epoch(end_ts), tz_offset_min, local_day, sleep_min, "
        "in_bed_min, deep_min, rem_min, efficiency_pct, is_nap, hrv_rmssd_ms, resting_hr_bpm "
        "FROM sleep_sessions_merged WHERE NOT is_nap AND local_day BETWEEN ? AND ? ORDER BY start_ts",
        [lo, hi],
    ).fetchall()
    return [SleepRow(src, float(a), float(b), off, d, *v[:5], bool(v[5]), *v[6:]) for src, a, b, off, d, *v in rows]


def workout_minutes(db: Database, lo: date, hi: date) -> list[float]:
    """The length in minutes of each workout of local days [lo, hi] (one source per workout:
    the merged layer), what the person usually gives a workout."""
    return [float(m) for (m,) in db.con.execute(
        "SELECT (epoch(end_ts) - epoch(start_ts)) / 60.0 FROM workouts_merged WHERE local_day BETWEEN ? AND ? "
        "AND end_ts > start_ts ORDER BY start_ts", [lo, hi]).fetchall()]


def daily_series(db: Database, lo: date, hi: date) -> dict[str, dict[date, float]]:
    """Per-day values of local days [lo, hi]: main sleep minutes (the source with most), steps
    (the largest source total), resting heart rate, HRV (RMSSD, SDNN) and recovery score day
    means."""
    out: dict[str, dict[date, float]] = {k: {} for k in (
        "sleep_min", "steps", "resting_hr_bpm", "hrv_rmssd_ms", "hrv_sdnn_ms", "recovery_pct")}
    for d, v in db.con.execute(
        "SELECT local_day, max(sleep_min) FROM daily_sleep WHERE local_day BETWEEN ? AND ? "
        "AND sleep_min IS NOT NULL GROUP BY 1", [lo, hi]
    ).fetchall():
        out["sleep_min"][d] = float(v)
    for d, *vals in db.con.execute(
        "SELECT local_day, steps, resting_hr_bpm, hrv_rmssd_ms, hrv_sdnn_ms, recovery_pct FROM daily_activity "
        "WHERE local_day BETWEEN ? AND ?", [lo, hi]
    ).fetchall():
        for key, v in zip(("steps", "resting_hr_bpm", "hrv_rmssd_ms", "hrv_sdnn_ms", "recovery_pct"), vals,
                          strict=True):
            if v is not None:
                out[key][d] = float(v)
    return out
