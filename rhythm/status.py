"""Health of the pipeline, for `rhythm status`: read-only, never raises on partial data.

Per source: its kind (API sync or file import), the last successful sync or import, each
stream's cursor, the current error (a failure newer than the last success), and its rows in
samples / sleep_sessions / workouts / events. Then the derived tables (meters, slot
actions, recommendations, feedback), the daemon (running or not) and the next scheduled
runs: the running daemon's own, else those a daemon started now would have.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from common.errors import DatabaseBusy, RhythmError, StorageError
from connectors.registry import file_imports
from rhythm import daemon
from rhythm.settings import Settings
from rhythm.sync import configured_sources
from storage import open_db, overview, runs
from storage.overview import DATA_TABLES


def _run_source_aliases() -> dict[str, str]:
    """`rhythm import NAME` -> the source name its rows carry (ics -> calendar)."""
    return {d.name: d.record_source for d in file_imports().values() if d.name != d.record_source}


def pipeline_status(settings: Settings, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    out: dict[str, Any] = {
        "home": str(settings.home),
        "database": str(settings.database),
        "database_state": "missing",
        "sources": [],
        "derived": {},
        "recent_runs": [],
        "daemon": _daemon(settings),
        "schedule": [],
        "problems": [],
    }
    configured = _configured(settings, out["problems"])
    last_ok: dict[str, datetime] = {}
    if settings.database.exists():
        try:
            with open_db(settings.database, read_only=True) as db:
                out["database_state"] = "ok"
                out["sources"], last_ok = _sources(db, configured)
                out["derived"] = _derived(db)
                out["recent_runs"] = _recent_runs(db)
        except DatabaseBusy:
            out["database_state"] = "busy"
            out["problems"].append("database busy: a job is writing right now; try again in a moment")
        except StorageError as exc:
            out["database_state"] = "error"
            out["problems"].append(str(exc))
    if out["database_state"] != "ok":
        out["sources"] = [_empty_source(s, "api") for s in configured]
    out["schedule"] = _schedule(settings, configured, last_ok, now, out["daemon"], out["problems"])
    return out


def _configured(settings: Settings, problems: list[str]) -> list[str]:
    try:
        return configured_sources(settings)
    except RhythmError as exc:
        problems.append(f"tokens: {exc}")
        return []


def _daemon(settings: Settings) -> dict[str, Any]:
    state = daemon.read_state(settings)
    if state is None:
        return {"running": False, "pid": None, "started_at": None, "stopped_at": None, "last": {}}
    return {
        "running": state["running"],
        "pid": state.get("pid"),
        "started_at": state.get("started_at"),
        "stopped_at": state.get("stopped_at"),
        "last": state.get("last") or {},
        "jobs": state.get("jobs") or [],
    }


def _empty_source(name: str, kind: str) -> dict[str, Any]:
    return {
        "source": name,
        "kind": kind,
        "last_sync": None,
        "last_import": None,
        "last_error": None,
        "last_error_at": None,
        "streams": [],
        "rows": {t: 0 for t in DATA_TABLES},
    }


def _sources(db: Any, configured: list[str]) -> tuple[list[dict[str, Any]], dict[str, datetime]]:
    by: dict[str, dict[str, Any]] = {}
    aliases = _run_source_aliases()

    def get(name: str, kind: str) -> dict[str, Any]:
        if name not in by:
            by[name] = _empty_source(name, kind)
        elif kind == "api":
            by[name]["kind"] = "api"
        return by[name]

    for name in configured:
        get(name, "api")
    for source, stream, cursor, updated_at, last_error in overview.sync_states(db):
        get(source, "api")["streams"].append(
            {"stream": stream, "cursor": cursor, "updated_at": updated_at, "last_error": last_error}
        )
    last_ok: dict[str, datetime] = {}
    for source, kind, ok, finished, summary in runs.latest_by_source(db):
        s = get(aliases.get(source, source) if kind == "import" else source,
                "api" if kind == "sync" else "file")
        if ok:
            key = "last_sync" if kind == "sync" else "last_import"
            s[key] = max(finished, s[key]) if s[key] else finished
            if kind == "sync":
                last_ok[source] = finished
        elif s["last_error_at"] is None or finished > s["last_error_at"]:
            s["last_error_at"] = finished
            s["last_error"] = _error_of(summary)
    for s in by.values():  # an error older than the last success is history, not a problem
        latest_ok = max((t for t in (s["last_sync"], s["last_import"]) if t), default=None)
        if s["last_error_at"] and latest_ok and latest_ok > s["last_error_at"]:
            s["last_error"] = None
            s["last_error_at"] = None
        if s["last_error"] is None:
            errs = [st["last_error"] for st in s["streams"] if st["last_error"]]
            s["last_error"] = errs[0] if errs else None
    for table, per_source in overview.rows_per_source(db).items():
        for source, n in per_source.items():
            get(source, "file")["rows"][table] = n
    return sorted(by.values(), key=lambda s: (s["kind"] != "api", s["source"])), last_ok


def _error_of(summary: Any) -> str | None:
    try:
        doc = json.loads(summary) if isinstance(summary, str) else summary
    except ValueError:
        return str(summary)
    if isinstance(doc, dict):
        return doc.get("error")
    return None


def _derived(db: Any) -> dict[str, Any]:
    return {**overview.derived_summary(db), "last_map": runs.last_finished(db, "map")}


def _recent_runs(db: Any, n: int = 8) -> list[dict[str, Any]]:
    return [
        {"id": i, "kind": k, "source": s, "finished_at": f, "ok": ok, "error": None if ok else _error_of(summ)}
        for i, k, s, f, ok, summ in runs.recent_runs(db, n)
    ]


def _schedule(
    settings: Settings,
    configured: list[str],
    last_ok: dict[str, datetime],
    now: datetime,
    daemon_info: dict[str, Any],
    problems: list[str],
) -> list[dict[str, Any]]:
    if daemon_info.get("running") and daemon_info.get("jobs"):
        return [
            {"job": j["id"], "next_run": j.get("next_run"), "describe": j.get("describe"), "by": "daemon"}
            for j in daemon_info["jobs"]
        ]
    try:
        specs = daemon.job_specs(settings, configured, now, last_ok)
    except RhythmError as exc:
        problems.append(str(exc))
        return []
    return [
        {"job": s.id, "next_run": s.next_run(now), "describe": s.describe, "by": "if the daemon starts now"}
        for s in specs
    ]
