"""Repairs: remove rows a person no longer wants (a source they left, days with bad data).

``prune`` deletes, in one transaction, the rows of the data tables (and what was derived
from them) that match every filter given: local days before / after a day, one source. A
source's raw payloads, sync cursors and its import/sync history go with it when it is
pruned whole (``source`` without days). Nothing else is touched.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from common.errors import ConfigError
from storage.db import Database, raw_table_name

DATA_TABLES = ("samples", "sleep_sessions", "workouts", "events")
DERIVED_BY_DAY = ("meters", "slot_actions")


def prune(
    db: Database,
    *,
    before: date | None = None,
    after: date | None = None,
    source: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Delete matching rows; returns {"tables": {table: rows}, "dry_run": bool}. With
    ``dry_run`` nothing is deleted (the counts say what would be)."""
    if before is None and after is None and source is None:
        raise ConfigError("prune: say what to remove (--before DAY, --after DAY and/or --source NAME)")
    conds: list[str] = []
    params: list[Any] = []
    if before is not None:
        conds.append("local_day < ?")
        params.append(before)
    if after is not None:
        conds.append("local_day > ?")
        params.append(after)
    day_conds, day_params = list(conds), list(params)
    if source is not None:
        conds.append("source = ?")
        params.append(source)
    where = " AND ".join(conds)
    counts: dict[str, int] = {}
    with db.transaction():
        for table in DATA_TABLES:
            counts[table] = _delete(db, table, where, params, dry_run)
        if day_conds and source is None:  # the meters of those days go too (re-run `rhythm map`)
            for table in DERIVED_BY_DAY:
                counts[table] = _delete(db, table, " AND ".join(day_conds), day_params, dry_run)
        if source is not None and not day_conds:
            table = raw_table_name(source)
            if table in db.tables():
                counts[table] = _delete(db, table, "true", [], dry_run)
            counts["sync_state"] = _delete(db, "sync_state", "source = ?", [source], dry_run)
    return {"tables": counts, "dry_run": dry_run}


def _delete(db: Database, table: str, where: str, params: list[Any], dry_run: bool) -> int:
    n = int(db.con.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0])
    if n and not dry_run:
        db.con.execute(f"DELETE FROM {table} WHERE {where}", params)
    return n
