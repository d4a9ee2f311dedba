"""What every connector refuses, and what it leaves out and counts (issue 22).

Two kinds of bad input, handled the same way by every connector:

- **Refused** (the import stops with one `SourceFormatError` naming the file and the position;
  the database is unchanged): a timestamp outside `common.timeutil.SANE_RANGE`
  (1900-01-01 .. 2100-12-31), and input a reader cannot make sense of (a value of the wrong
  type, nesting too deep, an unknown encoding...). Readers check timestamps where they know
  the position; `screen` is the backstop that names the file only.
- **Left out and counted**: a row with a NaN or infinite number, an end before its start, or
  negative sleep minutes. `screen` yields a `common.records.Skipped` in its place; the writer
  counts those in the import summary (`skipped`, by reason).

API syncs (WHOOP, Google Calendar, Garmin live) leave out and count records with an
out-of-range timestamp too (`screen(..., refuse=False)`): the server would send the same
record on every sync, and a refusal would stop that source for good.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from typing import Any

from common.errors import SourceFormatError
from common.records import Event, Sample, Skipped, SleepSession, Workout
from common.timeutil import SANE_RANGE, in_sane_range, out_of_range_detail

NOT_FINITE = "NaN or infinite value"
END_BEFORE_START = "end before start"
NEGATIVE_SLEEP = "negative sleep minutes"
OUT_OF_RANGE = f"timestamp outside {SANE_RANGE}"

# Exceptions a reader turns into one SourceFormatError line (never a traceback).
READ_ERRORS = (TypeError, ValueError, OverflowError, RecursionError, LookupError, AttributeError)

_SLEEP_MINUTES = ("sleep_min", "in_bed_min", "awake_min", "light_min", "deep_min", "rem_min")
_TIMES = ("start_ts", "end_ts", "updated_at")


def _bad_number(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def out_of_range(rec: Any) -> str | None:
    """The first field of `rec` holding a timestamp or day outside the sane range, or None."""
    for name in (*_TIMES, "local_day"):
        v = getattr(rec, name, None)
        if isinstance(v, datetime | date) and not in_sane_range(v):
            return name
    return None


def problem(rec: Any) -> str | None:
    """Why `rec` must be left out (a reason above, checked in that order), or None."""
    if isinstance(rec, Sample):
        if _bad_number(rec.value):
            return NOT_FINITE
    elif isinstance(rec, SleepSession | Workout):
        if any(_bad_number(getattr(rec, name)) for name in rec.__slots__):
            return NOT_FINITE
    elif not isinstance(rec, Event):
        return None
    if rec.end_ts < rec.start_ts:
        return END_BEFORE_START
    if isinstance(rec, SleepSession) and any((v := getattr(rec, n)) is not None and v < 0 for n in _SLEEP_MINUTES):
        return NEGATIVE_SLEEP
    return None


def screen(records: Iterable[Any], source: str, *, label: str | None = None, refuse: bool = True) -> Iterator[Any]:
    """Pass `records` through, with a `Skipped` in place of each row `problem` rejects.

    A record with a timestamp outside the sane range raises `SourceFormatError(label, ...)`
    (file imports, `refuse=True`; the readers' own checks name the position first), or is
    left out and counted (API syncs, `refuse=False`).
    """
    for rec in records:
        if isinstance(rec, Sample | SleepSession | Workout | Event):
            field = out_of_range(rec)
            if field is not None:
                if refuse:
                    raise SourceFormatError(label or source, out_of_range_detail(field, getattr(rec, field)))
                yield Skipped(source, OUT_OF_RANGE)
                continue
            reason = problem(rec)
            if reason is not None:
                yield Skipped(source, reason)
                continue
        yield rec


def describe(exc: BaseException) -> str:
    """One line for an unexpected reading error (no traceback, no multi-line text)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, LookupError) and "encoding" in str(exc):
        return f"unknown text encoding ({str(exc).splitlines()[0][:120]})"
    text = str(exc).strip().splitlines()
    detail = text[0][:200] if text else ""
    return f"unreadable input ({type(exc).__name__}{': ' + detail if detail else ''})"
