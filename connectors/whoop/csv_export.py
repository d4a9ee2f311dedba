"""WHOOP app data export (CSV files in a zip or folder) -> records.

Files, matched by name (case-insensitive, anywhere in the zip/folder):

==========================  ==================================================================
``physiological_cycles``    one row per physiological cycle -> ``Sample`` rows: ``recovery``,
                            ``resting_heart_rate``, ``hrv_rmssd``, ``skin_temp`` (absolute degC),
                            ``spo2``, ``respiratory_rate`` (instants at *Wake onset*), and for
                            closed cycles ``strain``, ``heart_rate`` (cycle average) and
                            ``total_energy`` (kcal, basal included) spanning the cycle.
``sleeps``                  one row per sleep or nap -> ``SleepSession`` (``sleep:<onset UTC>``)
``workouts``                one row per workout -> ``Workout`` (``workout:<start UTC>``)
``journal_entries``         one row per (cycle, question) -> raw, plus a ``journal_<question>``
                            sample valued 1 (yes) or 0 (no) at the cycle start
==========================  ==================================================================

Every CSV row is also landed raw (kinds ``cycle``, ``sleep``, ``workout``, ``journal``).

Times are local wall-clock times in the row's ``Cycle timezone`` (``UTC-04:00``, ``UTC+01:00``,
``UTCZ``); they are made aware with that offset and ``tz_offset_min`` keeps it. A cycle's
``local_day`` is the local date of its *Wake onset*, else of start + 12 h (a cycle starts at
sleep onset the evening before the day it describes). The open (current) cycle has no end:
its recovery is kept, its running strain/energy are not (they are incomplete; the next export
has them). Natural keys use start times only, so a newer overlapping export replaces rows.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

from common.errors import SourceFormatError
from common.records import RawRecord, Sample, SleepSession, Workout
from common.timeutil import in_sane_range, out_of_range_detail
from connectors.files import CappedStream, MiB, check_member, files_under, input_path
from connectors.screen import READ_ERRORS, describe, screen

SOURCE = "whoop"
SOURCE_NAME = "whoop_export"
Progress = Callable[[float, float | None], None]

FILES = ("physiological_cycles", "sleeps", "workouts", "journal_entries")
REQUIRED = {
    "physiological_cycles": ("Cycle start time", "Cycle end time", "Cycle timezone"),
    "sleeps": ("Cycle start time", "Cycle timezone", "Sleep onset", "Wake onset", "Nap"),
    "workouts": ("Cycle timezone", "Workout start time", "Workout end time", "Activity name"),
    "journal_entries": ("Cycle start time", "Cycle timezone", "Question text", "Answered yes"),
}
# (column, metric, unit) of the cycle file
RECOVERY_COLUMNS = (
    ("Recovery score %", "recovery", "pct"),
    ("Resting heart rate (bpm)", "resting_heart_rate", "bpm"),
    ("Heart rate variability (ms)", "hrv_rmssd", "ms"),
    ("Skin temp (celsius)", "skin_temp", "degC"),
    ("Blood oxygen %", "spo2", "pct"),
    ("Respiratory rate (rpm)", "respiratory_rate", "brpm"),
)
CYCLE_COLUMNS = (
    ("Day Strain", "strain", "score", None),
    ("Energy burned (cal)", "total_energy", "kcal", "WHOOP 'Energy burned': total, basal included"),
    ("Average HR (bpm)", "heart_rate", "bpm", "cycle average"),
)

_TZ_RE = re.compile(r"^(?:UTC|GMT)?\s*(?:(Z)|([+-])(\d{1,2}):?(\d{2})?)?$", re.IGNORECASE)
_MAX_OFFSET_MIN = 18 * 60  # ISO 8601's widest offset; real zones span -12:00 .. +14:00
_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError)
# A WHOOP CSV holds one row a day (cycles ~1 MB for five years); a member of the zip larger
# than this is refused (declared size, and bytes counted while streaming it).
MAX_CSV = 64 * MiB
# One CSV line (a row; a quoted field may span lines) longer than this is refused: rows are
# a few hundred bytes, and a line is held in memory whole before the csv module splits it.
MAX_LINE = 1 * MiB


# -- entry point -----------------------------------------------------------------------------
def read_export(path: str | Path, progress: Progress | None = None, **_opts: Any) -> Iterator[Any]:
    """Yield records from a WHOOP CSV export: the zip, its unzipped folder, or one CSV file."""
    path = input_path(path)
    yield from screen(_read(path, progress), SOURCE, label=str(path))


def _read(path: Path, progress: Progress | None) -> Iterator[Any]:
    fetched_at = datetime.now(UTC)
    if path.is_dir():
        found = [(k, p) for p in files_under(path) if p.suffix.lower() == ".csv" and (k := file_kind(p.name))]
        _require_some(path, found)
        total = sum(p.stat().st_size for _, p in found)
        done = 0
        for kind, p in found:
            with p.open("rb") as fh:
                yield from _read_csv(fh, str(p), kind, fetched_at, _sub(progress, done, total))
            done += p.stat().st_size
    elif path.suffix.lower() == ".zip":
        yield from _read_zip(path, fetched_at, progress)
    else:
        kind = file_kind(path.name)
        if kind is None:
            raise SourceFormatError(
                str(path), "not a WHOOP export file (expected " + ", ".join(f"{f}.csv" for f in FILES) + ")"
            )
        with path.open("rb") as fh:
            yield from _read_csv(fh, str(path), kind, fetched_at, _sub(progress, 0, path.stat().st_size))


def file_kind(name: str) -> str | None:
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if not base.endswith(".csv") or base.startswith("._"):
        return None
    for kind in FILES:
        if kind in base:
            return kind
    return None


def _require_some(path: Path, found: list) -> None:
    if not found:
        raise SourceFormatError(
            str(path), "no WHOOP export CSV found (" + ", ".join(f"{f}.csv" for f in FILES) + ")"
        )


def _sub(progress: Progress | None, done: float, total: float) -> Callable[[float], None] | None:
    if progress is None:
        return None
    return lambda pos: progress(done + pos, total)


def _read_zip(path: Path, fetched_at: datetime, progress: Progress | None) -> Iterator[Any]:
    try:
        zf = zipfile.ZipFile(path)
    except (*_ZIP_ERRORS, OSError) as exc:
        raise SourceFormatError(str(path), f"truncated or corrupt zip: {exc}", "end of file") from None
    with zf:
        found = [(k, i) for i in sorted(zf.infolist(), key=lambda i: i.filename)
                 if not i.is_dir() and (k := file_kind(i.filename))]
        _require_some(path, found)
        zip_size = path.stat().st_size
        total_raw = sum(i.file_size for _, i in found) or 1
        scale = zip_size / total_raw
        done = 0
        for kind, info in found:
            name = f"{path}:{info.filename}"
            tick = None if progress is None else (
                lambda pos, d=done: progress((d + pos) * scale, zip_size)
            )
            check_member(info, MAX_CSV, name, "a CSV file")
            try:
                with zf.open(info) as member:
                    fh = CappedStream(member, MAX_CSV, name, "a CSV file")
                    yield from _read_csv(fh, name, kind, fetched_at, tick)  # type: ignore[arg-type]
            except _ZIP_ERRORS as exc:
                raise SourceFormatError(name, f"truncated or corrupt zip member: {exc}") from None
            done += info.file_size


# -- CSV plumbing ------------------------------------------------------------------------------
@dataclass
class _Row:
    name: str
    line: int
    values: dict[str, str]

    def get(self, col: str) -> str | None:
        v = self.values.get(col)
        if v is None:
            return None
        v = v.strip()
        return v or None

    def num(self, col: str) -> float | None:
        v = self.get(col)
        if v is None:
            return None
        try:
            return float(v)
        except ValueError:
            raise SourceFormatError(self.name, f"column {col!r}: not a number: {v!r}", f"line {self.line}") from None

    def tz(self) -> timezone:
        raw = self.get("Cycle timezone")
        if raw is None:
            raise SourceFormatError(self.name, "empty 'Cycle timezone'", f"line {self.line}")
        m = _TZ_RE.match(raw)
        if not m:
            raise SourceFormatError(self.name, f"unknown timezone {raw!r}", f"line {self.line}")
        if m.group(1) or not m.group(2):
            return UTC
        minutes = int(m.group(3)) * 60 + int(m.group(4) or 0)
        if minutes > _MAX_OFFSET_MIN or int(m.group(4) or 0) > 59:
            raise SourceFormatError(self.name, f"impossible timezone offset {raw!r}", f"line {self.line}")
        return timezone(timedelta(minutes=minutes if m.group(2) == "+" else -minutes))

    def time(self, col: str, tz: timezone) -> datetime | None:
        v = self.get(col)
        if v is None:
            return None
        try:
            dt = datetime.fromisoformat(v)
        except ValueError:
            raise SourceFormatError(self.name, f"column {col!r}: not a date-time: {v!r}", f"line {self.line}") from None
        dt = dt.replace(tzinfo=tz) if dt.tzinfo is None else dt
        if not in_sane_range(dt) or not in_sane_range(dt.date()):
            raise SourceFormatError(self.name, f"column {col!r}: " + out_of_range_detail("date-time", repr(v)), f"line {self.line}")
        return dt

    def payload(self) -> str:
        return json.dumps(self.values, ensure_ascii=False, separators=(",", ":"))


def _read_csv(
    fh: IO[bytes], name: str, kind: str, fetched_at: datetime, tick: Callable[[float], None] | None
) -> Iterator[Any]:
    text = io.TextIOWrapper(fh, encoding="utf-8-sig", newline="")
    lines = _Lines(text, name)
    reader = csv.reader(lines)
    try:
        try:
            header = next(reader)
        except StopIteration:
            raise SourceFormatError(name, "empty file, no header", "line 1") from None
        header = [h.strip() for h in header]
        missing = [c for c in REQUIRED[kind] if c not in header]
        if missing:
            raise SourceFormatError(
                name, f"missing column{'s' if len(missing) > 1 else ''}: " + ", ".join(missing), "line 1"
            )
        handler = _HANDLERS[kind]
        for n, cells in enumerate(reader):
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                raise SourceFormatError(name, f"{len(cells)} fields, header has {len(header)}", f"line {line}")
            row = _Row(name, line, dict(zip(header, cells, strict=False)))
            yield from handler(row, fetched_at)
            if tick is not None and n % 500 == 0:
                tick(_pos(fh))
        if tick is not None:
            tick(_pos(fh))
    except UnicodeDecodeError as exc:
        raise SourceFormatError(name, f"not UTF-8 text: {exc.reason}", f"line {lines.n + 1}") from None
    except csv.Error as exc:
        raise SourceFormatError(name, f"malformed CSV: {exc}", f"line {max(lines.n, 1)}") from None
    except READ_ERRORS as exc:  # last resort behind the checks above: one line
        raise SourceFormatError(name, describe(exc), f"line {max(lines.n, 1)}") from exc
    finally:
        text.detach()


class _Lines:
    """The lines of a text stream for csv.reader, each at most MAX_LINE characters (a line
    is read whole into memory; a hostile file of one endless line must not be)."""

    def __init__(self, text: io.TextIOWrapper, name: str):
        self.text = text
        self.name = name
        self.n = 0  # lines read so far

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self.text.readline(MAX_LINE + 1)
        if not line:
            raise StopIteration
        self.n += 1
        if len(line) > MAX_LINE:
            raise SourceFormatError(self.name, f"a line longer than {MAX_LINE // MiB} MiB; refused", f"line {self.n}")
        return line


def _pos(fh: IO[bytes]) -> float:
    try:
        return float(fh.tell())
    except (OSError, ValueError):
        return 0.0


def _utc_key(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _offset(tz: timezone) -> int:
    off = tz.utcoffset(None)
    return int(off.total_seconds() // 60) if off is not None else 0


def _cycle_day(start: datetime, wake: datetime | None) -> date:
    return wake.date() if wake is not None else (start + timedelta(hours=12)).date()


def _raw(kind: str, key: str, row: _Row, fetched_at: datetime) -> RawRecord:
    return RawRecord(source=SOURCE, kind=kind, natural_key=key, payload=row.payload(), fetched_at=fetched_at)


# -- the four files ------------------------------------------------------------------------------
def _cycle(row: _Row, fetched_at: datetime) -> Iterator[Any]:
    tz = row.tz()
    start = row.time("Cycle start time", tz)
    if start is None:
        raise SourceFormatError(row.name, "empty 'Cycle start time'", f"line {row.line}")
    end = row.time("Cycle end time", tz)
    wake = row.time("Wake onset", tz)
    day = _cycle_day(start, wake)
    off = _offset(tz)
    yield _raw("cycle", f"cycle:{_utc_key(start)}", row, fetched_at)

    def sample(metric: str, unit: str, value: float, t0: datetime, t1: datetime, detail: str | None) -> Sample:
        return Sample(
            source=SOURCE, metric=metric, start_ts=t0, end_ts=t1, value=value, unit=unit,
            local_day=day, source_name=SOURCE_NAME, device=None, tz_offset_min=off, detail=detail,
        )

    at = wake or start
    for col, metric, unit in RECOVERY_COLUMNS:
        v = row.num(col)
        if v is not None:
            yield sample(metric, unit, v, at, at, f"cycle:{_utc_key(start)}")
    if end is None:
        return  # open cycle: strain and energy still accumulating
    for col, metric, unit, note in CYCLE_COLUMNS:
        v = row.num(col)
        if v is not None:
            yield sample(metric, unit, v, start, end, note)


def _sleep(row: _Row, fetched_at: datetime) -> Iterator[Any]:
    tz = row.tz()
    onset = row.time("Sleep onset", tz)
    wake = row.time("Wake onset", tz)
    if onset is None or wake is None:
        cycle = row.time("Cycle start time", tz)
        key = f"sleep:cycle:{_utc_key(cycle)}" if cycle else f"sleep:line:{row.line}"
        yield _raw("sleep", key, row, fetched_at)
        return
    key = f"sleep:{_utc_key(onset)}"
    yield _raw("sleep", key, row, fetched_at)
    nap = (row.get("Nap") or "").lower()
    if nap not in ("true", "false"):
        raise SourceFormatError(row.name, f"column 'Nap': expected true/false, got {nap!r}", f"line {row.line}")
    yield SleepSession(
        source=SOURCE,
        session_id=key,
        start_ts=onset,
        end_ts=wake,
        local_day=wake.date(),
        sleep_min=row.num("Asleep duration (min)"),
        in_bed_min=row.num("In bed duration (min)"),
        awake_min=row.num("Awake duration (min)"),
        light_min=row.num("Light sleep duration (min)"),
        deep_min=row.num("Deep (SWS) duration (min)"),
        rem_min=row.num("REM duration (min)"),
        efficiency_pct=row.num("Sleep efficiency %"),
        score=row.num("Sleep performance %"),
        is_nap=nap == "true",
        respiratory_rate_brpm=row.num("Respiratory rate (rpm)"),
        tz_offset_min=_offset(tz),
        source_name=SOURCE_NAME,
    )


def _workout(row: _Row, fetched_at: datetime) -> Iterator[Any]:
    tz = row.tz()
    start = row.time("Workout start time", tz)
    end = row.time("Workout end time", tz)
    if start is None or end is None:
        raise SourceFormatError(row.name, "workout without start or end time", f"line {row.line}")
    key = f"workout:{_utc_key(start)}"
    yield _raw("workout", key, row, fetched_at)
    duration = row.num("Duration (min)")
    distance = row.num("Distance (meters)")
    yield Workout(
        source=SOURCE,
        workout_id=key,
        start_ts=start,
        end_ts=end,
        local_day=start.date(),
        sport=row.get("Activity name") or "unknown",
        duration_min=duration if duration is not None else (end - start).total_seconds() / 60.0,
        energy_kcal=row.num("Energy burned (cal)"),
        distance_m=distance,
        avg_hr_bpm=row.num("Average HR (bpm)"),
        max_hr_bpm=row.num("Max HR (bpm)"),
        strain=row.num("Activity Strain"),
        tz_offset_min=_offset(tz),
        source_name=SOURCE_NAME,
    )


def journal_metric(question: str) -> str:
    """'Have any caffeine? ' -> 'journal_have_any_caffeine'."""
    slug = re.sub(r"[^a-z0-9]+", "_", question.lower()).strip("_")
    return f"journal_{slug}"


def _journal(row: _Row, fetched_at: datetime) -> Iterator[Any]:
    tz = row.tz()
    start = row.time("Cycle start time", tz)
    question = row.get("Question text")
    if start is None or question is None:
        raise SourceFormatError(row.name, "journal row without cycle start or question", f"line {row.line}")
    metric = journal_metric(question)
    yield _raw("journal", f"{_utc_key(start)}:{metric}", row, fetched_at)
    answer = (row.get("Answered yes") or "").lower()
    if answer not in ("true", "false"):
        return  # unanswered: raw only
    yield Sample(
        source=SOURCE,
        metric=metric,
        start_ts=start,
        end_ts=start,
        value=1.0 if answer == "true" else 0.0,
        unit="bool",
        local_day=_cycle_day(start, None),
        source_name=SOURCE_NAME,
        device=None,
        tz_offset_min=_offset(tz),
        detail=question,
    )


_HANDLERS: dict[str, Callable[[_Row, datetime], Iterator[Any]]] = {
    "physiological_cycles": _cycle,
    "sleeps": _sleep,
    "workouts": _workout,
    "journal_entries": _journal,
}
