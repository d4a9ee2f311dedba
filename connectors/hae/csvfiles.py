"""Health Auto Export CSV files -> records.

The CSV export writes two kinds of file (and the REST automation posts them as the parts of
one multipart/form-data request):

- **metrics** (``HealthAutoExport-<from>-<to>.csv``): ``Date/Time`` (local wall time, no
  offset) and one column per metric, named ``<Display Name> (<unit>)`` or ``<Display Name>
  [<part>] (<unit>)``: ``Step Count (count)``, ``Active Energy (kJ)``, ``Heart Rate [Min]
  (count/min)``, ``Sleep Analysis [Deep] (hr)``. A row is one bucket (the export's
  aggregation); an empty cell is "not measured". Known columns become samples exactly as
  the JSON points do (series.py), heart rate's ``[Avg]`` with ``[Min]``/``[Max]`` in
  ``detail``; the ``Sleep Analysis [...]`` columns of a row become that night's sleep
  (sleep.py: the CSV has no sleep times, so the session is a zero-length marker at the row's
  time with the app's durations). Each row is kept raw (kind ``csv_row``).
- **workouts** (``Workouts-<from>-<to>.csv``): ``Workout Type``, ``Start``, ``End``,
  ``Duration`` and columns with units (``Active Energy (kcal)``, ``Distance (mi)``,
  ``Avg. Heart Rate (count/min)``, ``Max. Heart Rate (count/min)``): workouts.py. Each row
  is kept raw (kind ``workout_csv``).

Per-workout heart-rate files (``<Type>-Heart Rate-<yyyymmdd_hhmm>.csv``: ``Date/Time, Min,
Max, Avg``) repeat the heart-rate metric of those minutes and are skipped; so are route files.

Wall times are placed in the person's zone (the ``timezone`` setting, else this machine's);
a time with a written offset keeps it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from common.errors import SourceFormatError
from common.records import RawRecord
from connectors.hae import sleep as sleep_mod
from connectors.hae.dates import BadDate, parse_local
from connectors.hae.metrics import (
    CSV_NAMES,
    JSON_METRICS,
    SLEEP,
    conversion,
    csv_column,
    known_units,
)
from connectors.hae.payload import Context, raw_key
from connectors.hae.series import SOURCE, Series, emit, hr_detail
from connectors.hae.workouts import from_csv as workout_from_csv

DATE_COLUMNS = ("date/time", "date")
SLEEP_PARTS = {"total": "totalSleep", "asleep": "asleep", "in bed": "inBed", "core": "core", "deep": "deep",
               "rem": "rem", "awake": "awake"}


def kind_of(header: list[str]) -> str | None:
    """'metrics', 'workouts', 'workout_heart_rate' or None (not a Health Auto Export CSV)."""
    names = [h.strip().lower() for h in header]
    if "workout type" in names and "start" in names:
        return "workouts"
    if names and names[0] in DATE_COLUMNS:
        parsed = [csv_column(h)[0] for h in header[1:]]
        if parsed and set(parsed) <= {"min", "max", "avg", "source"}:
            return "workout_heart_rate"
        if any("(" in h for h in header[1:]) or any(p in CSV_NAMES for p in parsed):
            return "metrics"
    return None


def csv_kind(text: str) -> str | None:
    """The kind of a CSV file's text by its header (kind_of), None if not ours."""
    try:
        header = next(csv.reader(io.StringIO(text[:65536].partition("\n")[0])), None)
    except csv.Error:
        return None
    return kind_of(header) if header else None


def read_csv(text: str, ctx: Context) -> Iterator[Any]:
    """Records of one CSV file (``csv_kind`` said it is ours)."""
    rows = csv.reader(io.StringIO(text))
    try:
        header = next(rows, None)
    except csv.Error as exc:
        raise SourceFormatError(ctx.name, f"invalid CSV: {exc}", "line 1") from None
    kind = kind_of(header) if header else None
    if kind is None:
        raise SourceFormatError(ctx.name, "not a Health Auto Export CSV export (no 'Date/Time' or "
                                "'Workout Type' column)", "line 1")
    if kind == "workout_heart_rate":
        return
    if kind == "workouts":
        yield from _workouts(rows, header, ctx)
    else:
        yield from _metrics(rows, header, ctx)


def _lines(rows: Any, ctx: Context) -> Iterator[tuple[int, list[str]]]:
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise SourceFormatError(ctx.name, f"invalid CSV: {exc}", f"line {rows.line_num}") from None
        if row and any(c.strip() for c in row):
            yield rows.line_num, row


def _metrics(rows: Any, header: list[str], ctx: Context) -> Iterator[Any]:
    # column index -> how it is read
    plain: list[tuple[int, Series]] = []
    heart: dict[str, int] = {}
    heart_series: Series | None = None
    sleep_cols: list[tuple[int, str, float]] = []  # (index, JSON key, minutes per unit)
    for i, h in enumerate(header[1:], start=1):
        name, part, unit = csv_column(h)
        json_name = CSV_NAMES.get(name)
        if json_name is None:
            continue
        if json_name == SLEEP:
            key = SLEEP_PARTS.get(part or "")
            conv = conversion("hours", unit or "hr")
            if key is None or conv is None:
                continue
            sleep_cols.append((i, key, conv[0]))
            continue
        spec = JSON_METRICS[json_name]
        conv = conversion(spec.kind, unit or "")
        if conv is None:
            raise SourceFormatError(ctx.name, f"column {h!r}: unknown unit {unit!r} (known: {known_units(spec.kind)})",
                                    "line 1")
        if json_name == "heart_rate":
            if part in ("min", "max", "avg"):
                heart[part] = i
                if heart_series is None:
                    heart_series = Series(spec, conv[0], conv[1])
            continue
        plain.append((i, Series(spec, conv[0], conv[1], percent_fix=spec.kind == "percent")))
    tag = raw_key("\x1f".join(header))
    sessions = []
    for line, row in _lines(rows, ctx):
        where = f"line {line}"
        cell = row[0] if row else ""
        try:
            t = parse_local(cell, ctx.zone)
        except BadDate as exc:
            raise SourceFormatError(ctx.name, f"'{header[0]}': {exc}", where) from None
        yield RawRecord(SOURCE, "csv_row", f"{cell.strip()}|{tag}",
                        json.dumps(dict(zip(header, row, strict=False)), ensure_ascii=False), ctx.fetched_at)
        for i, series in plain:
            v = _number(row, i, header, where, ctx)
            if v is not None:
                if series.spec.cumulative and v < 0:
                    raise SourceFormatError(ctx.name, f"{header[i]!r}: negative amount {v!r}", where)
                series.add(t.epoch, t.offset_min, t.day, t.second_of_day, v, None)
        if heart_series is not None:
            avg = _number(row, heart["avg"], header, where, ctx) if "avg" in heart else None
            if avg is not None:
                lo = _number(row, heart["min"], header, where, ctx) if "min" in heart else None
                hi = _number(row, heart["max"], header, where, ctx) if "max" in heart else None
                heart_series.add(t.epoch, t.offset_min, t.day, t.second_of_day, avg, None, hr_detail(lo, hi))
        if sleep_cols:
            point: dict[str, Any] = {}
            for i, key, to_min in sleep_cols:
                v = _number(row, i, header, where, ctx)
                if v is not None:
                    point[key] = v * to_min  # minutes
            session = sleep_mod.aggregated(point, 1.0, where, lambda p, d: SourceFormatError(ctx.name, d, p),
                                           marker=t)
            if session is not None:
                sessions.append(session)
    series = [s for _, s in plain] + ([heart_series] if heart_series is not None else [])
    yield from emit(series, ctx.aggregation)
    yield from sessions


def _number(row: list[str], i: int, header: list[str], where: str, ctx: Context) -> float | None:
    text = row[i].strip() if i < len(row) else ""
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        raise SourceFormatError(ctx.name, f"{header[i]!r} is not a number: {text!r}", where) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise SourceFormatError(ctx.name, f"{header[i]!r} is not a finite number: {text!r}", where)
    return v


def _workouts(rows: Any, header: list[str], ctx: Context) -> Iterator[Any]:
    names = [h.strip() for h in header]
    for line, row in _lines(rows, ctx):
        where = f"line {line}"
        rec = dict(zip(names, row, strict=False))
        try:
            start = parse_local(rec.get("Start", ""), ctx.zone)
            end = parse_local(rec.get("End", ""), ctx.zone)
        except BadDate as exc:
            raise SourceFormatError(ctx.name, f"workout 'Start'/'End': {exc}", where) from None
        w = workout_from_csv(rec, start, end, where, lambda p, d: SourceFormatError(ctx.name, d, p))
        yield w
        yield RawRecord(SOURCE, "workout_csv", w.workout_id, json.dumps(rec, ensure_ascii=False), ctx.fetched_at)
