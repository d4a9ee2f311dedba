"""What `rhythm insights` reads: the stored meters and slot actions, and the sleep, workouts,
events and day values behind the factors, as plain rows (common.rows). Read-only.

The queries are the ones `rhythm map` reads with (``storage.inputs``, ``storage.derived``),
without the per-slot sample aggregates the factors do not need.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from common.rows import SlotRow, StoredInputs
from storage import derived, inputs
from storage.db import Database


def meter_span(db: Database) -> tuple[date, date] | None:
    """First and last local day with stored meters (within storage.inputs' sane days)."""
    row = db.con.execute(
        "SELECT min(local_day), max(local_day) FROM meters WHERE local_day BETWEEN ? AND ?",
        [inputs.FIRST_DAY, inputs.LAST_DAY],
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return row[0], row[1]


def insight_rows(
    db: Database, first: date, last: date, *, input_lo: date, input_hi: date, day_metrics: Sequence[str]
) -> tuple[list[SlotRow], StoredInputs]:
    """The stored slots (meters with their action) of days [first, last], and the sleep
    sessions, workouts, events (with their stored action) and day-level sample means
    (``day_metrics``) of days [input_lo, input_hi]."""
    slots = derived.slot_rows(db, first, last)
    rows = inputs.mapping_inputs(
        db, input_lo, input_hi, zone=None, default_offset_min=0,
        slot_sum_metrics=(), slot_mean_metrics=(), day_metrics=day_metrics,
    )
    return slots, rows
