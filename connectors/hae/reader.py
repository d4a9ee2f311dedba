"""``read_export``: Health Auto Export files, folders, zips and pushed payloads -> records.

``rhythm import hae PATH`` takes a JSON file, a CSV file, a zip of them, or a folder of them
(the daily files of an automation, read in name order, so the newest export of a day is
read last and wins). ``rhythm serve hae`` hands the body of each push to the same reader
(``payload=``): JSON, or the CSV export's multipart/form-data parts.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path, PurePath
from typing import Any

import pyarrow as pa

from common.errors import SourceFormatError
from common.records import RecordBatch, Sample
from connectors.files import MiB, files_under, input_path, read_file_capped, read_member
from connectors.hae.csvfiles import csv_kind, read_csv
from connectors.hae.dates import BadDate, resolve_zone
from connectors.hae.payload import Context, read_json

Progress = Callable[[float, float | None], None]
SUFFIXES = (".json", ".csv")
AGGREGATIONS = ("seconds", "minutes", "hours", "days")
_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError)
#: One JSON or CSV file (on disk or in a zip) is read whole: at most this big.
MAX_FILE = 512 * MiB


def read_export(
    path: str | Path,
    progress: Progress | None = None,
    *,
    zone: str | None = None,
    payload: bytes | None = None,
    content_type: str | None = None,
    aggregation: str | None = None,
    **_opts: Any,
) -> Iterator[Any]:
    """Yield records from Health Auto Export files at ``path``, or from ``payload`` (the bytes
    of a push; ``path`` then only names it in errors).

    ``zone``: the IANA zone CSV wall times are in (default: this machine's). ``content_type``
    and ``aggregation``: the push's Content-Type and ``automation-aggregation`` headers.
    Samples come in batches of about ``BATCH_ROWS`` rows, whatever the files' sizes (a
    folder of small daily files is written like one large file).
    """
    return _coalesced(_records(path, progress, zone, payload, content_type, aggregation))


BATCH_ROWS = 50_000


def _coalesced(records: Iterator[Any]) -> Iterator[Any]:
    """Consecutive sample batches merged up to BATCH_ROWS rows; other records as they come."""
    pending: list[RecordBatch] = []
    rows = 0

    def merged() -> RecordBatch:
        if len(pending) == 1:
            return pending[0]
        names = list(pending[0].columns)
        return RecordBatch(Sample, {n: pa.concat_arrays([b.columns[n] for b in pending]) for n in names})

    for rec in records:
        if isinstance(rec, RecordBatch) and rec.record_type is Sample:
            pending.append(rec)
            rows += len(rec)
            if rows >= BATCH_ROWS:
                yield merged()
                pending, rows = [], 0
        else:
            yield rec
    if pending:
        yield merged()


def _records(
    path: str | Path,
    progress: Progress | None,
    zone: str | None,
    payload: bytes | None,
    content_type: str | None,
    aggregation: str | None,
) -> Iterator[Any]:
    try:
        tz = resolve_zone(zone)
    except BadDate as exc:
        raise SourceFormatError(str(path), str(exc)) from None
    hint = aggregation.strip().lower() if isinstance(aggregation, str) else None
    if hint in ("weeks", "months", "years"):
        raise SourceFormatError(str(path), f"aggregation {hint!r} is coarser than a day: export with "
                                "Default, seconds, minutes, hours or days")
    ctx = Context(str(path), datetime.now(UTC), hint if hint in AGGREGATIONS else None, tz)
    if payload is not None:
        yield from _payload(payload, content_type, ctx)
        return
    path = input_path(path)  # a regular file or a folder (connectors/files.py)
    if path.is_dir():  # regular files only; links out of the folder are not followed
        files = sorted((p for p in files_under(path) if p.suffix.lower() in (*SUFFIXES, ".zip")),
                       key=lambda p: p.relative_to(path).as_posix())
        total = sum(p.stat().st_size for p in files)
        done, found = 0, 0
        for p in files:
            found += yield from _file(p, ctx, required=False)
            done += p.stat().st_size
            if progress:
                progress(done, total)
        if not found:
            raise SourceFormatError(str(path), "no Health Auto Export JSON or CSV files found")
    elif path.is_file():
        found = yield from _file(path, ctx, required=True)
        if progress:
            size = path.stat().st_size
            progress(size, size)
        if not found:
            raise SourceFormatError(str(path), "no Health Auto Export JSON or CSV files in the zip")
    else:
        raise SourceFormatError(str(path), "no such file or folder")


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceFormatError(name, f"not UTF-8 text (byte {exc.start})") from None


def _one(data: bytes, name: str, ctx: Context, required: bool) -> Iterator[Any]:
    """Records of one file's bytes (JSON by its name, else by its first character); returns
    whether it was a Health Auto Export file (an unrecognised CSV fails when ``required``,
    else yields nothing: a folder's other files)."""
    text = _text(data, name)
    sub = Context(name, ctx.fetched_at, ctx.aggregation, ctx.zone)
    lower = name.lower()
    if lower.endswith(".json") or (not lower.endswith(".csv") and text.lstrip()[:1] in ("{", "[")):
        yield from read_json(text, sub)
        return True
    kind = csv_kind(text)
    if kind is None:
        if required:
            raise SourceFormatError(name, "not a Health Auto Export export: neither JSON nor a CSV with a "
                                    "'Date/Time' or 'Workout Type' column", "line 1")
        return False
    yield from read_csv(text, sub)
    return kind != "workout_heart_rate"


def _file(path: Path, ctx: Context, required: bool) -> Iterator[Any]:
    """Records of a file on disk; returns how many Health Auto Export files it held."""
    if path.suffix.lower() == ".zip":
        return (yield from _zip(path, ctx))
    return int((yield from _one(read_file_capped(path, MAX_FILE, "a Health Auto Export file"), str(path), ctx,
                                required)))


def _zip(path: Path, ctx: Context) -> Iterator[Any]:
    found = 0
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i for i in zf.infolist() if not i.is_dir() and i.filename.lower().endswith(SUFFIXES)
                       and not PurePath(i.filename).name.startswith("._")]
            for info in sorted(members, key=lambda i: i.filename):
                name = f"{path}!{info.filename}"
                data = read_member(zf, info, MAX_FILE, name, "a Health Auto Export file")
                found += yield from _one(data, name, ctx, required=False)
    except _ZIP_ERRORS as exc:
        raise SourceFormatError(str(path), f"bad zip file: {exc}") from None
    return found


def _payload(body: bytes, content_type: str | None, ctx: Context) -> Iterator[Any]:
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        parts = _multipart(body, content_type or "", ctx.name)
        if not parts:
            raise SourceFormatError(ctx.name, "multipart body without files")
        for filename, data in parts:
            yield from _one(data, f"{ctx.name}:{filename}", ctx, required=True)
        return
    if ctype in ("application/json", "text/json", ""):
        text = _text(body, ctx.name)
        if ctype == "" and not text.lstrip().startswith("{"):
            yield from _one(body, ctx.name, ctx, required=True)
            return
        yield from read_json(text, ctx)
        return
    if ctype in ("text/csv", "application/csv", "text/plain"):
        yield from _one(body, ctx.name + ".csv" if not ctx.name.endswith(".csv") else ctx.name, ctx, required=True)
        return
    raise SourceFormatError(ctx.name, f"unsupported content type {ctype!r} (JSON or the CSV export's "
                            "multipart/form-data)")


def _multipart(body: bytes, content_type: str, name: str) -> list[tuple[str, bytes]]:
    """The (filename, bytes) parts of a multipart/form-data body."""
    if "boundary=" not in content_type:
        raise SourceFormatError(name, "multipart/form-data without a boundary")
    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if not msg.is_multipart():
        raise SourceFormatError(name, "not a multipart body")
    parts = []
    for i, part in enumerate(msg.iter_parts()):
        data = part.get_payload(decode=True)
        if data is None:
            continue
        filename = part.get_filename() or part.get_param("name", header="content-disposition") or f"part{i + 1}"
        parts.append((str(filename), data))
    return parts
