"""The app's units of work, in one place: import, sync, map, recommend, feedback, push.

Each unit runs through the same runner (``rhythm.runner``, STYLE rule 16): it takes the
writer lock (``rhythm.lock``: the daemon, or one CLI command, is the only writer), opens the
database, runs one transaction and records the run in ``runs`` inside that transaction. A
failure rolls everything back: the database is exactly as before and the error propagates
as one RhythmError (the daemon notes failures afterwards with ``rhythm.runner.record_failure``).
The CLI, the daemon and the demo call these functions and nothing else that writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import ConfigError, RhythmError, SourceFormatError
from common.records import Event, Skipped
from common.rhythm_blocks import is_rhythm_event_id
from connectors import registry
from connectors.checkpoint import Checkpoint
from rhythm.runner import recorded, session, unit_of_work
from rhythm.settings import Settings, local_today, user_zone
from storage import open_db, runs
from storage.db import Database

if TYPE_CHECKING:  # httpx loads only to sync; pyarrow (the writer) only to write
    from connectors.http import RetryPolicy
    from storage.writer import WriteSummary

Progress = Callable[[float, float | None], None]
SyncProgress = Callable[[str, int], None]


# -- import ----------------------------------------------------------------------------------
def import_file(
    settings: Settings,
    source: str,
    path: str | Path,
    progress: Progress | None = None,
    on_flush: Callable[[WriteSummary], None] | None = None,
) -> WriteSummary:
    """Import one export file or folder for a file source, all or nothing. Idempotent."""
    desc = registry.file_import(source)
    path = Path(path).expanduser()
    if not path.exists():
        raise SourceFormatError(str(path), "no such file or folder")
    reader = registry.resolve(desc.reader)
    options = {kw: settings.get(name) for kw, name in desc.options.items()}
    with unit_of_work(settings, "import", source, str(path)) as run:
        if desc.data_window:
            options.update(_data_window(run.db, settings))
        from storage.writer import RecordWriter

        writer = RecordWriter(run.db, on_flush=on_flush)
        seen = _RhythmEventsSeen() if source == "ics" else None
        for record in reader(path, progress=progress, **options):
            writer.add(record)
            if seen is not None:
                seen.add(record)
        writer.flush()
        if seen is not None:
            seen.forget_the_missing(run.db)
        run.summary = writer.summary.to_dict()
    return writer.summary


class _RhythmEventsSeen:
    """Rhythm's own events in an imported .ics calendar (issue 38): the file is a snapshot, so
    Rhythm's events stored from an earlier import of that calendar, in the file's span and not
    in it any more, were deleted by the person (storage.implicit.forget_missing_rhythm_events)."""

    def __init__(self) -> None:
        self.calendars: set[str] = set()
        self.present: set[str] = set()
        self.start: datetime | None = None
        self.end: datetime | None = None

    def add(self, record: Any) -> None:  # every record of the file: nothing imported here
        if not isinstance(record, Event):
            return
        self.start = record.start_ts if self.start is None else min(self.start, record.start_ts)
        self.end = record.end_ts if self.end is None else max(self.end, record.end_ts)
        self.calendars.add(record.calendar_id)
        if is_rhythm_event_id(record.event_id):
            self.present.add(record.event_id)

    def forget_the_missing(self, db: Database) -> None:
        from storage.implicit import forget_missing_rhythm_events

        if self.calendars and self.start is not None and self.end is not None:
            forget_missing_rhythm_events(db, sorted(self.calendars), sorted(self.present), self.start, self.end)


def import_payload(
    settings: Settings, source: str, payload: bytes, name: str, **hints: str | None
) -> WriteSummary:
    """Import one pushed payload (the body of a request to `rhythm serve`) through the source's
    file reader, all or nothing, like a file. ``name`` names it in errors and `runs`;
    ``hints`` (content_type, aggregation, ...) go to the reader, which takes ``payload=``."""
    import inspect

    desc = registry.file_import(source)
    reader = registry.resolve(desc.reader)
    if "payload" not in inspect.signature(reader).parameters:
        raise ConfigError(f"source {source!r} does not take pushed payloads")
    options = {kw: settings.get(n) for kw, n in desc.options.items()}
    options.update({k: v for k, v in hints.items() if v is not None})
    with unit_of_work(settings, "import", source, name) as run:
        from storage.writer import RecordWriter

        writer = RecordWriter(run.db)
        for record in reader(name, payload=payload, **options):
            writer.add(record)
        writer.flush()
        run.summary = writer.summary.to_dict()
    return writer.summary


def _data_window(db: Database, settings: Settings) -> dict[str, datetime]:
    """The window recurring series are expanded in: the configured one around today, widened
    to the stored wearable data (a 2021 export meets its own 2021 calendar)."""
    from datetime import timedelta

    from storage.inputs import wearable_span

    now = datetime.now(UTC)
    lo = now - timedelta(days=int(settings.ics_window_past_days))
    hi = now + timedelta(days=int(settings.ics_window_future_days))
    span = wearable_span(db)
    if span is not None:
        first = datetime(span[0].year, span[0].month, span[0].day, tzinfo=UTC) - timedelta(days=7)
        last = datetime(span[1].year, span[1].month, span[1].day, tzinfo=UTC) + timedelta(days=8)
        lo, hi = min(lo, first), max(hi, last)
    return {"window_start": lo, "window_end": hi}


# -- sync --------------------------------------------------------------------------------------
def sync(
    settings: Settings,
    sources: Iterable[str] | None = None,
    progress: SyncProgress | None = None,
    *,
    policy: RetryPolicy | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sync each API source in its own transaction; a failing one does not stop the others.

    Per source: read each stream's cursor, fetch from it (minus the source's lag window),
    upsert the records and move each cursor at its stream's Checkpoint, in the same
    transaction as the data. A failure rolls that source back (no rows, no cursor move) and
    is then noted in ``sync_state.last_error`` and ``runs``.

    Returns {"ok": bool, "sources": {name: {"ok", "records", "tables", "streams"} or
    {"ok": False, "error": line}}}.
    """
    from rhythm import sync as api  # httpx and the OAuth clients: loaded only to sync

    names = list(sources) if sources else api.configured_sources(settings)
    known = api.sync_names()
    unknown = [s for s in names if s not in known]
    if unknown:
        raise ConfigError(f"unknown source {unknown[0]!r}; choose from {', '.join(known)}")
    policy = policy or api.default_policy()
    results: dict[str, Any] = {}
    with session(settings, "rhythm sync") as db:
        for name in dict.fromkeys(names):
            started = datetime.now(UTC)
            try:
                results[name] = {"ok": True, **_sync_one(db, settings, name, progress, policy, now)}
            except RhythmError as exc:
                line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                _note_sync_failure(db, name, line, started)
                results[name] = {"ok": False, "error": line}
            except Exception as exc:  # an unexpected payload must not stop the other sources
                line = f"{name}: unexpected {type(exc).__name__} while syncing: {str(exc)[:200]}"
                _note_sync_failure(db, name, line, started)
                results[name] = {"ok": False, "error": line}
    return {"ok": all(r["ok"] for r in results.values()), "sources": results}


def _sync_one(
    db: Database,
    settings: Settings,
    name: str,
    progress: SyncProgress | None,
    policy: RetryPolicy,
    now: datetime | None,
) -> dict[str, Any]:
    from rhythm import sync as api

    cursors = db.cursors(name)
    records, closer = api.open_source(settings, name, cursors, policy, now)
    written = 0
    moved: dict[str, str | None] = {}
    try:
        with recorded(db, "sync", name, "api") as run:
            from storage.writer import RecordWriter

            writer = RecordWriter(db)
            for rec in records:
                if isinstance(rec, Checkpoint):
                    writer.flush()
                    cursor = rec.cursor if rec.cursor is not None else cursors.get(rec.stream)
                    db.set_cursor(name, rec.stream, cursor)
                    moved[rec.stream] = cursor
                    continue
                writer.add(rec)
                if not isinstance(rec, Skipped):  # a count of rows left out, not a record
                    written += 1
                if progress is not None and written % 100 == 0:
                    progress(name, written)
            writer.flush()
            run.summary = {**writer.summary.to_dict(), "streams": sorted(moved)}
    finally:
        closer()
    if progress is not None:
        progress(name, written)
    return {"records": written, "tables": run.summary["tables"], "streams": sorted(moved)}


def _note_sync_failure(db: Database, source: str, line: str, started: datetime) -> None:
    """After the rollback: keep every cursor, note the error (best effort)."""
    try:
        with db.transaction():
            cursors = db.cursors(source)
            streams = list(cursors) or [registry.api_sync(source).default_stream]
            for stream in streams:
                db.set_cursor(source, stream, cursors.get(stream), error=line)
            runs.record_run(db, "sync", source, "api", started, False, {"error": line})
    except RhythmError:
        pass


# -- map ---------------------------------------------------------------------------------------
def map_data(settings: Settings, since: date | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Rebuild meters, slot actions and event actions from stored data (no network), for
    days >= ``since`` (all when None) up to today in the person's zone."""
    from rhythm.derive import rebuild  # mapping's numpy work: loaded only to map

    tz = user_zone(settings)
    with unit_of_work(settings, "map", None, since.isoformat() if since else "all") as run:
        run.summary = rebuild(run.db, since, tz=tz, today=local_today(settings, now))
        if settings.implicit_answers:  # answers without typing (issue 38; docs/answers.md)
            from rhythm.implicit import judge_stored

            run.summary["answers"] = judge_stored(run.db, tz=tz, today=local_today(settings, now), now=now)
    return run.summary


# -- recommend and feedback --------------------------------------------------------------------
def recommend(settings: Settings, day: date | None = None, now: datetime | None = None) -> Any:
    """Plan the rest of ``day`` (default: today in the person's zone) and store the plan;
    returns the Plan (rhythm.recommend)."""
    from rhythm.recommend import make_plan  # the agent and the simulator: loaded to plan

    with unit_of_work(settings, "recommend", None, day.isoformat() if day else "today") as run:
        plan = make_plan(run.db, settings, day, now)
        run.target = plan.day.isoformat()
        run.summary = {"day": plan.day.isoformat(), "recommendations": [s.id for s in plan.slots],
                       "model": plan.model, "picks": plan.picks}  # picks: the local model asked (issue 37)
    return plan


def feedback(settings: Settings, recommendation_id: int, response: str) -> dict[str, Any]:
    """Store the person's answer to a recommendation (a later answer replaces an earlier one)."""
    from rhythm.recommend import record_answer

    with unit_of_work(settings, "feedback", None, str(recommendation_id)) as run:
        result = record_answer(run.db, recommendation_id, response)
        run.summary = {"id": recommendation_id, "response": response}
    return result


# -- the plan in the calendar ------------------------------------------------------------------
def push_google(
    settings: Settings,
    day: date | None = None,
    days: int = 1,
    *,
    calendar_id: str | None = None,
    busy: bool | None = None,
    clear: bool = False,
    now: datetime | None = None,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """Put the latest plan of each day into a Google calendar (``rhythm plan push google``):
    insert or patch Rhythm's blocks, delete its stale ones, never touch another event
    (connectors.calendar.google_write). A day with no stored plan is planned first; with
    ``clear``, Rhythm's blocks of those days are removed instead. Recorded as a `push` run."""
    from connectors.calendar import google_write
    from rhythm import plan_export
    from rhythm import sync as api

    cid = calendar_id or settings.push_calendar_id
    busy = settings.push_busy if busy is None else busy
    wanted = plan_export.plan_days(settings, day, days, now)
    writer = google_write.open_writer(settings.get, api.tokens(settings), policy or api.default_policy())
    planned_now = [] if clear else plan_export.ensure_plans(settings, wanted, recommend, now)
    tz = user_zone(settings)
    with unit_of_work(settings, "push", "google", cid) as run:
        stored = {} if clear else plan_export.read_plans(run.db, wanted)
        blocks = [b for d in wanted for b in plan_export.calendar_blocks(stored.get(d, []), tz, busy)]
        result = google_write.push(writer, cid, wanted, blocks, planned_at=plan_export.planned_at(stored),
                                   zone=tz, clear=clear)
        from storage.implicit import record_pushed  # read back by the next sync (issue 38)

        record_pushed(run.db, cid, [{"key": b.key, "recommendation_id": b.recommendation_id,
                                     "event_id": result.events.get(b.key), "start": b.start, "end": b.end}
                                    for b in blocks], result.deleted, datetime.now(UTC))
        run.summary = {**result.to_dict(), "planned": [d.isoformat() for d in planned_now], "busy": busy,
                       "clear": clear}
    return run.summary


# -- repairs -----------------------------------------------------------------------------------
def prune(
    settings: Settings,
    *,
    before: date | None = None,
    after: date | None = None,
    source: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Remove the rows of some days and/or one source, in one transaction (`rhythm db prune`);
    with ``dry_run``, only count them."""
    from storage.maintenance import prune as prune_rows

    if dry_run:  # counts only: a reader, nothing recorded
        with open_db(settings.database, read_only=True) as db:
            return prune_rows(db, before=before, after=after, source=source, dry_run=True)
    target = " ".join(f"{k}={v}" for k, v in (("before", before), ("after", after), ("source", source)) if v)
    with unit_of_work(settings, "prune", source, target) as run:
        run.summary = prune_rows(run.db, before=before, after=after, source=source)
    return run.summary


def set_source_priority(settings: Settings, group: str, kinds: list[str]) -> dict[str, list[str]]:
    """Rank the device kinds of a metric group (`rhythm sources --set`); returns the priorities."""
    from storage import overview

    with unit_of_work(settings, "sources", None, f"{group}={','.join(kinds)}") as run:
        overview.set_source_priority(run.db, group, kinds)
        run.summary = overview.source_priority(run.db)
    return run.summary


# -- labels (issue 40) ---------------------------------------------------------------------------
def set_label(settings: Settings, pattern: str, action: str, now: datetime | None = None) -> dict[str, Any]:
    """Store the person's label for a title or pattern (ACTION: one of the ten actions or
    NONE) and re-label history at once (the same transaction as ``rhythm map``)."""
    from mapping.labels import new_label
    from rhythm.derive import rebuild
    from storage import labels as stored_labels

    label = new_label(pattern, action)  # a bad action or an empty pattern: one line, nothing written
    with unit_of_work(settings, "label", None, label.key) as run:
        replaced = stored_labels.set_label(run.db, label)
        summary = rebuild(run.db, None, tz=user_zone(settings), today=local_today(settings, now))
        run.summary = {"pattern": label.pattern, "action": label.action, "replaced": replaced,
                       "events_with_your_label": summary.get("labels_yours", 0)}
    return run.summary


def remove_label(settings: Settings, pattern: str, now: datetime | None = None) -> dict[str, Any]:
    """Remove the person's label for a title or pattern and re-label history."""
    from mapping.labels import label_key
    from rhythm.derive import rebuild
    from storage import labels as stored_labels

    key = label_key(pattern)
    with unit_of_work(settings, "label", None, key) as run:
        removed = stored_labels.remove_label(run.db, key)
        if not removed:
            raise ConfigError(f"no label of yours for {pattern!r}: see `rhythm label --list`")
        rebuild(run.db, None, tz=user_zone(settings), today=local_today(settings, now))
        run.summary = {"pattern": pattern, "removed": removed}
    return run.summary


def list_labels(settings: Settings) -> list[dict[str, Any]]:
    """The person's labels, then the learned ones (applied, then proposed) with their evidence."""
    from storage import labels as stored_labels

    if not settings.database.exists():
        return []
    with open_db(settings.database, read_only=True) as db:
        rows = stored_labels.labels(db) if "labels" in db.tables() else []
    return [{"pattern": r.pattern, "action": r.action,
             "origin": "your label" if r.origin == "you" else ("learned" if r.applied else "proposed"),
             "evidence": r.evidence} for r in rows]
