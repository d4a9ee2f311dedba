"""A plain CSV of tasks (TickTick, Todoist, Things, OmniFocus exports, or your own), or a
Google Takeout ``Tasks.json`` -> completed tasks as samples (``connectors.tasks.completions``).

``read_export(path, progress=None, zone=None)``: PATH is a CSV or JSON file, or a folder or
zip holding ``.csv`` / ``.tsv`` files and Takeout's ``Tasks.json`` (other files there are left
alone). ``zone`` is the ``timezone`` setting (None: this machine's zone): the zone of times
written without one.

Columns are found by name, case and punctuation ignored (``Completed Time``,
``completed_at`` and ``COMPLETED-AT`` are the same), on the first row that names a title and
a completion column (TickTick's backup starts with a few lines about the file first):

=================  =====================================================================
title              ``title``, ``task``, ``name``, ``content``, ``task name``, ``subject``
completion time    ``completed_at``, ``completed time``, ``completed date``, ``completion
                   date``, ``date completed``, ``completed on``, ``completed``, ``done at``,
                   ``stop date``, ``finished at`` ...
status (optional)  ``status``, ``state``, ``checked``, ``done``, ``is completed``
time zone (opt.)   ``timezone``, ``time zone``, ``tz``: an IANA name (``Europe/Berlin``) or an
                   offset (``+01:00``, ``UTC-05:00``)
id (optional)      ``id``, ``task id``, ``taskId``, ``uuid``
anything else      ``due``, ``list``, ``project``, tags, notes ...: kept in the raw row only
=================  =====================================================================

A row counts as a completed task when its status says so (``1``, ``2``, ``completed``,
``done``, ``x``, ``true`` ...; without a status column: when the completion time is filled
in) and it has a completion time or date. Open, cancelled (``-1``, ``cancelled``, ``won't
do``) and completed-without-a-date rows are kept raw and not counted. An unknown status word or
a completion time that cannot be read stops the import with one line naming the file and line.

Completion times: ISO 8601 with an offset (``2024-03-01T14:05:00+01:00``, ``...Z``,
``2024-03-01 13:05:00 +0000``) is that instant; in the row's time zone when the row has one,
else in the offset it carries, except a UTC time (``Z``, ``+00:00``) without a zone column,
which exports write for everyone and which is shown in ``zone``. A time without an offset is
local, in the row's zone or ``zone``. A date alone (``2024-03-01``) is a date-only completion.
Epoch seconds (or milliseconds) are accepted too. ``2024/03/01`` and ``2024.03.01`` are
read like ``2024-03-01``; day-first or month-first dates (``03/01/2024``) are refused, not
guessed.

Every row lands in ``raw_tasks`` (kind ``csv``, key ``id:<id>`` or a hash of the row): the
title stays there and nowhere else. The same task in two files (a folder of overlapping
exports) counts once.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.errors import SourceFormatError
from common.records import RawRecord
from connectors.files import CappedStream, check_member, files_under, input_path, too_large
from connectors.tasks.completions import SOURCE, completion, day_completions, person_zone

Progress = Callable[[float, float | None], None]

TITLE = ("title", "task", "task_name", "name", "content", "subject", "summary")
COMPLETED = (
    "completed_at", "completed_time", "completed_date", "completed_on", "completed_date_time",
    "completion_date", "completion_time", "completion_date_time", "date_completed",
    "time_completed", "completed", "done_at", "done_date", "done_time", "done_on", "stop_date",
    "stopdate", "finished_at", "finished", "finished_date", "date_done",
)
STATUS = ("status", "state", "checked", "is_completed", "is_done", "done", "complete")
ZONE = ("timezone", "time_zone", "tz", "zone")
ID = ("id", "task_id", "taskid", "uuid", "uid", "identifier", "task_uuid")

DONE = frozenset({
    "1", "2", "completed", "complete", "done", "finished", "closed", "resolved", "archived",
    "x", "true", "yes", "y", "checked",
})
OPEN = frozenset({
    "", "0", "needsaction", "needs_action", "open", "todo", "to_do", "incomplete", "active",
    "pending", "in_progress", "not_started", "false", "no", "n", "unchecked", "normal",
})
CANCELLED = frozenset({
    "-1", "cancelled", "canceled", "won_t_do", "wont_do", "abandoned", "dropped", "trashed",
    "deleted", "skipped",
})
HEADER_SCAN_ROWS = 50
SAMPLE_BYTES = 64 * 1024
MIN_YEAR, MAX_YEAR = 1970, 2100
MAX_FILE = 64 * 1024 * 1024  # a 5-year export of 20,000 tasks is ~4 MB

_DATE_ONLY = re.compile(r"^(\d{4})(?:[-/.](\d{1,2})[-/.](\d{1,2})|(\d{2})(\d{2}))$")  # 2024-03-01, 20240301
_SLASHED = re.compile(r"^(\d{4})[/.](\d{2})[/.](\d{2})(?=[T ])")
_EPOCH = re.compile(r"^\d{9,13}(\.\d+)?$")
_OFFSET = re.compile(r"^(?:UTC|GMT)?\s*([+-])(\d{1,2})(?::?(\d{2}))?$", re.I)


def norm(header: str) -> str:
    """A column name without case, spaces or punctuation: 'Completed Time' -> 'completed_time'."""
    return re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")


def _word(value: str) -> str:
    """A status word without case or punctuation ("Won't do" -> "won_t_do"; "-1" stays)."""
    v = value.strip().lower()
    return v if re.fullmatch(r"-?\d+", v) else norm(v)


# -- files ---------------------------------------------------------------------------------
@dataclass
class _Source:
    """One CSV or JSON document: a name for messages, its size, and how to open it (binary)."""

    name: str
    size: int
    open: Callable[[], IO[bytes]]
    kind: str  # "csv" | "json"


def _kind(name: str, alone: bool) -> str | None:
    """"csv" or "json" for a file to read; in a folder or zip, JSON only as ``Tasks.json``
    (a Takeout of several products holds other JSON files)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if base.startswith("."):
        return None
    if base.endswith((".csv", ".tsv")):
        return "csv"
    if base.endswith(".json") and (alone or base == "tasks.json"):
        return "json"
    return "csv" if alone else None


def _capped_file(p: Path) -> _Source:
    size = p.stat().st_size
    if size > MAX_FILE:
        raise too_large(str(p), MAX_FILE, "a tasks file")
    return _Source(str(p), size, lambda: CappedStream(p.open("rb"), MAX_FILE, str(p), "a tasks file"),
                   _kind(p.name, False) or "csv")


def _sources(path: Path, stack: ExitStack) -> list[_Source]:
    if path.is_dir():  # regular files only; links out of the folder are not followed
        found = [p for p in files_under(path) if _kind(p.name, False)]
        if not found:
            raise SourceFormatError(str(path), "no .csv file or Tasks.json in this folder")
        return [_capped_file(p) for p in found]
    if zipfile.is_zipfile(path):
        try:
            zf = stack.enter_context(zipfile.ZipFile(path))
        except (zipfile.BadZipFile, OSError) as exc:
            raise SourceFormatError(str(path), f"truncated or corrupt zip: {exc}") from None
        members = sorted((i for i in zf.infolist() if not i.is_dir() and _kind(i.filename, False)),
                         key=lambda i: i.filename)
        if not members:
            raise SourceFormatError(str(path), "no .csv file or Tasks.json in this zip")
        for i in members:
            check_member(i, MAX_FILE, f"{path}:{i.filename}", "a tasks file")
        return [_Source(f"{path}:{i.filename}", i.file_size,
                        lambda i=i: CappedStream(zf.open(i), MAX_FILE, f"{path}:{i.filename}", "a tasks file"),
                        _kind(i.filename, False) or "csv") for i in members]
    src = _capped_file(path)
    return [_Source(src.name, src.size, src.open, _kind(path.name, True) or "csv")]


# -- reading -------------------------------------------------------------------------------
@dataclass
class _Counts:
    """Completions found so far, each task once (by its raw key)."""

    timed: dict[datetime, tuple[datetime, set[str]]] = field(default_factory=dict)  # UTC -> (local, keys)
    dated: dict[date, tuple[tzinfo, set[str]]] = field(default_factory=dict)

    def add_time(self, local: datetime, key: str) -> None:
        instant = local.astimezone(UTC)
        self.timed.setdefault(instant, (local, set()))[1].add(key)

    def add_day(self, day: date, zone: tzinfo, key: str) -> None:
        self.dated.setdefault(day, (zone, set()))[1].add(key)

    def samples(self, detail: str) -> Iterator[Any]:
        for instant in sorted(self.timed):
            local, keys = self.timed[instant]
            yield completion(local, count=len(keys), detail=detail)
        for day in sorted(self.dated):
            zone, keys = self.dated[day]
            yield day_completions(day, zone, len(keys), detail=detail)


def read_export(
    path: str | Path, progress: Progress | None = None, zone: str | None = None
) -> Iterator[Any]:
    """Raw rows and completion samples of a tasks CSV / Takeout JSON (a file, folder or zip)."""
    path = input_path(path)  # a regular file or a folder (not a FIFO, not a device)
    tz = person_zone(zone)
    fetched_at = datetime.now(UTC)
    with ExitStack() as stack:
        sources = _sources(path, stack)
        total = float(sum(s.size for s in sources)) or None
        done = 0.0
        counts = _Counts()
        for src in sources:
            def tick(pos: float, base: float = done) -> None:
                if progress is not None:
                    progress(base + pos, total)

            if src.kind == "json":
                from connectors.tasks.google_api import read_takeout

                with src.open() as fh:
                    yield from read_takeout(fh, src.name, tz, fetched_at)
            else:
                yield from _read_csv(src, tz, fetched_at, counts, tick)
            done += src.size
            if progress is not None:
                progress(done, total)
    yield from counts.samples("csv")


def _decode(fh: IO[bytes]) -> io.TextIOWrapper:
    return io.TextIOWrapper(fh, encoding="utf-8-sig", errors="strict", newline="")


def _header(src: _Source) -> tuple[str, int, dict[str, int]]:
    """(delimiter, header row index, normalised name -> column) of a tasks CSV."""
    with src.open() as fh:
        try:
            sample = _decode(fh).read(SAMPLE_BYTES)
        except UnicodeDecodeError:
            raise SourceFormatError(src.name, "not UTF-8 text (save the export as UTF-8 CSV)") from None
    best: tuple[str, int, dict[str, int]] | None = None
    for delim in (",", ";", "\t"):
        for i, row in enumerate(_first_rows(sample, delim)):
            cols = {}
            for j, h in enumerate(row):
                cols.setdefault(norm(h), j)
            if _pick(cols, TITLE) is not None and _pick(cols, COMPLETED) is not None:
                if best is None or i < best[1]:
                    best = (delim, i, cols)
                break
    if best is None:
        raise SourceFormatError(
            src.name,
            "no header row naming a title and a completion column found in the first "
            f"{HEADER_SCAN_ROWS} lines (e.g. title,completed_at; see connectors/tasks/README.md)",
        )
    return best


def _first_rows(sample: str, delim: str) -> Iterator[list[str]]:
    """The first rows of a sample (a row cut off by the sample's end may come out short)."""
    reader = csv.reader(io.StringIO(sample, newline=""), delimiter=delim)
    try:
        for i, row in enumerate(reader):
            if i >= HEADER_SCAN_ROWS:
                return
            yield row
    except csv.Error:
        return


def _pick(cols: dict[str, int], names: tuple[str, ...]) -> int | None:
    for n in names:
        if n in cols:
            return cols[n]
    return None


def _read_csv(
    src: _Source, tz: tzinfo, fetched_at: datetime, counts: _Counts, tick: Callable[[float], None]
) -> Iterator[RawRecord]:
    delim, header_at, cols = _header(src)
    c_done = _pick(cols, COMPLETED)
    c_status, c_zone, c_id = _pick(cols, STATUS), _pick(cols, ZONE), _pick(cols, ID)
    if c_status == c_done:
        c_status = None
    with src.open() as raw:
        text = _decode(raw)
        reader = csv.reader(text, delimiter=delim)
        header: list[str] = []
        try:
            for i, row in enumerate(reader):
                line = reader.line_num
                if i < header_at:
                    continue
                if i == header_at:
                    header = row
                    continue
                if not any(v.strip() for v in row):
                    continue
                if len(row) > len(header) and any(v.strip() for v in row[len(header):]):
                    raise SourceFormatError(
                        src.name, f"{len(row)} fields where the header has {len(header)}", f"line {line}")
                cell = _Cells(src.name, line, row)
                payload = {h: (row[j] if j < len(row) else "") for j, h in enumerate(header) if h}
                key = _key(cell.get(c_id), payload)
                yield RawRecord(SOURCE, "csv", key, json.dumps(payload, ensure_ascii=False, sort_keys=True),
                                fetched_at)
                _count(cell, c_done, c_status, c_zone, tz, key, counts)
                if i % 1000 == 0:
                    tick(float(raw.tell()) if raw.seekable() else 0.0)
        except UnicodeDecodeError:
            raise SourceFormatError(src.name, "not UTF-8 text (save the export as UTF-8 CSV)",
                                    f"after line {reader.line_num}") from None
        except csv.Error as exc:
            raise SourceFormatError(src.name, f"broken CSV: {exc}", f"line {reader.line_num}") from None


@dataclass
class _Cells:
    name: str
    line: int
    row: list[str]

    def get(self, col: int | None) -> str:
        if col is None or col >= len(self.row):
            return ""
        return self.row[col].strip()

    def fail(self, detail: str) -> SourceFormatError:
        return SourceFormatError(self.name, detail, f"line {self.line}")


def _key(task_id: str, payload: dict[str, str]) -> str:
    if task_id:
        return f"id:{task_id}"
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return "row:" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _count(
    cell: _Cells,
    c_done: int | None,
    c_status: int | None,
    c_zone: int | None,
    tz: tzinfo,
    key: str,
    counts: _Counts,
) -> None:
    """Add the row's completion (if it is a completed task with a time or date)."""
    when_text = cell.get(c_done)
    status = _word(cell.get(c_status)) if c_status is not None else None
    if status is None:  # no status column: a filled-in completion column says "done"
        if _word(when_text) in OPEN | CANCELLED:
            return
    elif status in OPEN or status in CANCELLED:
        return
    elif status not in DONE:
        raise cell.fail(
            f"unknown status {cell.get(c_status)!r} (completed: 1, 2, completed, done, x, true; "
            "open: 0, needsAction, open; cancelled: -1, cancelled, won't do)"
        )
    if not when_text or _word(when_text) in DONE | OPEN:
        return  # completed, but the export gives no time or date: never invented
    row_zone = _row_zone(cell, c_zone)
    when = _parse_when(when_text, row_zone, tz, cell)
    if isinstance(when, datetime):
        counts.add_time(when, key)
    else:
        counts.add_day(when, row_zone or tz, key)


def _row_zone(cell: _Cells, c_zone: int | None) -> tzinfo | None:
    text = cell.get(c_zone)
    if not text:
        return None
    m = _OFFSET.match(text)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        if minutes > 14 * 60:
            raise cell.fail(f"time zone offset out of range: {text!r}")
        return timezone(timedelta(minutes=minutes if m.group(1) == "+" else -minutes))
    if text.upper() in ("UTC", "GMT", "Z"):
        return UTC
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise cell.fail(f"unknown time zone {text!r} (an IANA name like Europe/Berlin, or +01:00)") from None


def _parse_when(text: str, row_zone: tzinfo | None, tz: tzinfo, cell: _Cells) -> datetime | date:
    """A completion as an aware local time, or a date when the export gives only the day."""
    m = _DATE_ONLY.match(text)
    if m:
        try:
            d = date(int(m.group(1)), int(m.group(2) or m.group(4)), int(m.group(3) or m.group(5)))
        except ValueError:
            raise cell.fail(f"not a date: {text!r}") from None
        _check_year(d.year, text, cell)
        return d
    if _EPOCH.match(text):
        secs = float(text)
        if secs > 1e11:  # milliseconds
            secs /= 1000.0
        instant = datetime.fromtimestamp(secs, tz=UTC)
        _check_year(instant.year, text, cell)
        return instant.astimezone(row_zone or tz)
    iso = _SLASHED.sub(r"\1-\2-\3", text)
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise cell.fail(
            f"cannot read the completion time {text!r} (use ISO 8601 like 2024-03-01T14:05:00+01:00, "
            "2024-03-01 14:05, a date 2024-03-01, or epoch seconds)"
        ) from None
    _check_year(dt.year, text, cell)
    if dt.tzinfo is None:
        return dt.replace(tzinfo=row_zone or tz)
    if row_zone is not None:
        return dt.astimezone(row_zone)
    if dt.utcoffset() == timedelta(0):
        return dt.astimezone(tz)  # a UTC time: where the person was is the configured zone
    return dt


def _check_year(year: int, text: str, cell: _Cells) -> None:
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise cell.fail(f"completion time {text!r} is outside {MIN_YEAR}-{MAX_YEAR}")
