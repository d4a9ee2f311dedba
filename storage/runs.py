"""The `runs` table: one row per import, sync, map or plan, written by the job runner."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from storage.db import Database


def record_run(
    db: Database,
    kind: str,
    source: str | None,
    target: str | None,
    started: datetime,
    ok: bool,
    summary: Mapping[str, Any] | None,
) -> int:
    """Insert one run (inside the caller's transaction, if any); returns its id."""
    (run_id,) = db.con.execute(
        "INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [kind, source, target, started, datetime.now(UTC), ok, json.dumps(dict(summary or {}), default=str)],
    ).fetchone()
    return int(run_id)


def last_successful_syncs(db: Database) -> dict[str, datetime]:
    """source -> when its last successful sync finished."""
    rows = db.con.execute(
        "SELECT source, max(finished_at) FROM runs WHERE kind = 'sync' AND ok GROUP BY source"
    ).fetchall()
    return {s: ts for s, ts in rows if s and ts}


def last_finished(db: Database, kind: str) -> datetime | None:
    """When the last successful run of this kind finished."""
    return db.con.execute(
        "SELECT max(finished_at) FROM runs WHERE kind = ? AND ok", [kind]
    ).fetchone()[0]


def latest_by_source(db: Database) -> list[tuple[str, str, bool, datetime, Any]]:
    """(source, kind, ok, last finished_at, that run's summary) per source, kind and outcome,
    for imports and syncs."""
    return db.con.execute(
        "SELECT source, kind, ok, max(finished_at), arg_max(summary, finished_at) FROM runs "
        "WHERE kind IN ('sync', 'import') AND source IS NOT NULL GROUP BY source, kind, ok"
    ).fetchall()


def recent_runs(db: Database, n: int = 8) -> list[tuple[int, str, str | None, datetime, bool, Any]]:
    """The last ``n`` runs, newest first: (id, kind, source, finished_at, ok, summary)."""
    return db.con.execute(
        "SELECT id, kind, source, finished_at, ok, summary FROM runs ORDER BY id DESC LIMIT ?", [n]
    ).fetchall()
