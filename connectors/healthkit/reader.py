"""`read_export(path, progress=None)`: the Apple Health file connector (STYLE rule 2).

Parsing runs in one background thread that feeds a small bounded queue; the caller's
thread takes records from it. The caller (the import pipeline) spends most of its time in
DuckDB, which releases the GIL, so parsing and loading overlap on two cores. The queue
holds at most `QUEUE_DEPTH` items (each at most one batch of `parser.BATCH_ROWS` rows), so
memory does not grow with the file.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from common.errors import SourceFormatError
from connectors.healthkit import source as source_mod
from connectors.healthkit.parser import ExportParser, ParseError
from connectors.screen import READ_ERRORS, describe, screen

Progress = Callable[[float, float | None], None]

QUEUE_DEPTH = 8  # with 2, the parser waited 1.4 s of a 1 M-Record import on a full queue
_DONE = object()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def iter_records(path: str | Path) -> Iterator[tuple[list[Any], int, int]]:
    """(records, bytes done, bytes total) per chunk, in this thread. Progress counts bytes of
    the file given (for a zip: uncompressed progress scaled to the zip's size)."""
    src = source_mod.locate(path)
    parser = ExportParser()
    scale = src.file_size / src.size if src.size else 1.0
    done = 0
    try:
        for chunk, done in source_mod.chunks(src):
            try:
                parser.feed(chunk)
                out = list(parser.drain())
            except ParseError as exc:
                raise _format_error(src, exc) from None
            yield out, int(done * scale), src.file_size
        try:
            parser.close()
            out = list(parser.drain(final=True))
        except ParseError as exc:
            raise _format_error(src, exc) from None
    except READ_ERRORS as exc:  # last resort: one line, never a traceback
        raise SourceFormatError(src.label, describe(exc), f"near uncompressed byte {done}") from exc
    if parser.locale is None and parser.export_date is None and parser.records_seen == 0:
        raise SourceFormatError(src.label, "not an Apple Health export (no <HealthData> root)")
    yield out, src.file_size, src.file_size


def _format_error(src: source_mod.XmlSource, exc: ParseError) -> SourceFormatError:
    position = f"line {exc.line}, column {exc.column}" if exc.line else exc.where
    return SourceFormatError(src.label, f"malformed XML: {exc}" if exc.xml else str(exc), position)


def read_export(path: str | Path, progress: Progress | None = None) -> Iterator[Any]:
    """Yield the export's records: columnar `RecordBatch`es of `Sample` (Records),
    `RawRecord` (payloads landed raw) and `SleepSession` (at the end), and `Sample` and
    `Workout` objects for the few other elements.

    Raises `SourceFormatError` (file and position in the message) for a missing file, a
    damaged zip, a zip without an export XML, or malformed XML.
    """
    q: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_DEPTH)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in iter_records(path):
                if not put(item):
                    return
        except BaseException as exc:  # handed to the consumer, re-raised there
            put(_Failed(exc))
            return
        put(_DONE)

    worker = threading.Thread(target=produce, name="healthkit-parser", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                break
            if isinstance(item, _Failed):
                raise item.error
            records, done, total = item
            yield from screen(records, "healthkit", label=str(path))
            if progress is not None:
                progress(done, total)
    finally:
        stop.set()
        while worker.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()
