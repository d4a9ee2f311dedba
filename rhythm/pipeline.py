"""The app's units of work, shared by the CLI and the daemon (one code path for both).

Each function opens the database as the single writer, runs one transaction, and records
the run in the `runs` table. A failure rolls everything back: the database is exactly as
before, and the error propagates as one RhythmError.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.errors import RhythmError, SourceFormatError
from rhythm.lock import writer_lock
from rhythm.settings import Settings
from storage import WriteSummary, open_db
from storage.writer import RecordWriter

Progress = Callable[[float, float | None], None]

# source name -> "module:function" of a file reader `read_export(path, progress=None, **opts)`
FILE_READERS = {
    "healthkit": "connectors.healthkit:read_export",
    "garmin": "connectors.garmin:read_export",
    "whoop": "connectors.whoop:read_export",
    "ics": "connectors.calendar:read_export",
}


def _resolve(spec: str) -> Callable[..., Iterator[Any]]:
    module, func = spec.split(":")
    return getattr(importlib.import_module(module), func)


def reader_options(settings: Settings, source: str) -> dict[str, Any]:
    if source == "ics":
        return {
            "window_past_days": settings.ics_window_past_days,
            "window_future_days": settings.ics_window_future_days,
        }
    return {}


def import_file(
    settings: Settings,
    source: str,
    path: str | Path,
    progress: Progress | None = None,
    on_flush: Callable[[WriteSummary], None] | None = None,
) -> WriteSummary:
    """Import one export file or folder for `source`, all or nothing. Idempotent."""
    path = Path(path).expanduser()
    if not path.exists():
        raise SourceFormatError(str(path), "no such file or folder")
    reader = _resolve(FILE_READERS[source])
    started = datetime.now(UTC)
    with writer_lock(settings.home, f"rhythm import {source}"), open_db(settings.database) as db:
        writer = RecordWriter(db, on_flush=on_flush)
        with db.transaction():
            for record in reader(path, progress=progress, **reader_options(settings, source)):
                writer.add(record)
            writer.flush()
            db.con.execute(
                "INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) "
                "VALUES ('import', ?, ?, ?, ?, true, ?)",
                [source, str(path), started, datetime.now(UTC), json.dumps(writer.summary.to_dict())],
            )
    return writer.summary


def record_failure(settings: Settings, kind: str, source: str, target: str, error: RhythmError) -> None:
    """Best effort: note a failed run (outside the rolled-back transaction)."""
    try:
        with open_db(settings.database) as db:
            db.con.execute(
                "INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) "
                "VALUES (?, ?, ?, ?, ?, false, ?)",
                [kind, source, target, datetime.now(UTC), datetime.now(UTC), json.dumps({"error": str(error)})],
            )
    except RhythmError:
        pass
