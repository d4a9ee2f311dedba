"""Read-only summaries of the database for `rhythm status` and `rhythm report`."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from common.records import METERS
from storage.db import Database

DATA_TABLES = ("samples", "sleep_sessions", "workouts", "events")
DERIVED_TABLES = ("meters", "slot_actions", "recommendations", "feedback")


def _dicts(db: Database, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = db.con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def sync_states(db: Database) -> list[tuple[str, str, str | None, Any, str | None]]:
    """(source, stream, cursor, updated_at, last_error) of every sync stream."""
    return db.con.execute(
        "SELECT source, stream, cursor, updated_at, last_error FROM sync_state ORDER BY source, stream"
    ).fetchall()


def rows_per_source(db: Database) -> dict[str, dict[str, int]]:
    """table -> source -> rows, for the data tables."""
    out: dict[str, dict[str, int]] = {}
    for table in DATA_TABLES:
        out[table] = {
            s: int(n)
            for s, n in db.con.execute(f"SELECT source, count(*) FROM {table} GROUP BY source").fetchall()
        }
    return out


def derived_summary(db: Database) -> dict[str, Any]:
    counts = {t: int(db.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in DERIVED_TABLES}
    days = db.con.execute("SELECT min(local_day), max(local_day) FROM meters").fetchone()
    last_rec = db.con.execute("SELECT max(created_at) FROM recommendations").fetchone()[0]
    return {
        "rows": counts,
        "meter_days": [days[0], days[1]] if days[0] else None,
        "last_recommendation": last_rec,
    }


def report_rows(db: Database, start: date, end: date) -> dict[str, Any]:
    """Everything the report shows for local days [start, end]."""
    span = [start, end]
    return {
        "meters": _dicts(db, f"SELECT local_day, slot, {', '.join(METERS)}, confidence, evidence FROM meters "
                             "WHERE local_day BETWEEN ? AND ? ORDER BY local_day, slot", span),
        "slot_actions": _dicts(db, "SELECT local_day, slot, action, confidence, evidence FROM slot_actions "
                                   "WHERE local_day BETWEEN ? AND ? ORDER BY local_day, slot", span),
        "recommendations": _dicts(
            db,
            "SELECT r.*, f.response, f.\"at\" AS answered_at FROM recommendations r "
            "LEFT JOIN feedback f ON f.recommendation_id = r.id "
            "WHERE r.local_day BETWEEN ? AND ? ORDER BY r.created_at, r.id",
            span,
        ),
        "workouts": _dicts(db, "SELECT local_day, source, sport, start_ts, duration_min, energy_kcal, avg_hr_bpm "
                               "FROM workouts WHERE local_day BETWEEN ? AND ? ORDER BY start_ts", span),
        "events_by_action": {
            (a or "unclassified"): int(n)
            for a, n in db.con.execute(
                "SELECT action, count(*) FROM events WHERE local_day BETWEEN ? AND ? AND status <> 'cancelled' "
                "GROUP BY action ORDER BY count(*) DESC, action", span).fetchall()
        },
        "events_near_today": _dicts(
            db,
            "SELECT event_id, title, start_ts, end_ts, all_day, status, transparency, self_response, action, source "
            "FROM events WHERE local_day BETWEEN ? AND ? ORDER BY start_ts",
            [end - timedelta(days=1), end + timedelta(days=1)],
        ),
        "coverage": _dicts(
            db,
            "SELECT local_day, source, sum(n) AS n FROM ("
            " SELECT local_day, source, count(*) AS n FROM samples WHERE local_day BETWEEN ? AND ? GROUP BY ALL"
            " UNION ALL SELECT local_day, source, count(*) FROM sleep_sessions WHERE local_day BETWEEN ? AND ? GROUP BY ALL"
            " UNION ALL SELECT local_day, source, count(*) FROM workouts WHERE local_day BETWEEN ? AND ? GROUP BY ALL"
            " UNION ALL SELECT local_day, source, count(*) FROM events WHERE local_day BETWEEN ? AND ? GROUP BY ALL"
            ") GROUP BY ALL ORDER BY local_day, source",
            span * 4,
        ),
    }


PRIORITY_GROUPS = ("sleep", "activity", "vitals", "heart_rate", "workouts")
KINDS = ("ring", "strap", "watch", "phone", "other")


def source_priority(db: Database) -> dict[str, list[str]]:
    """group -> device kinds, best first."""
    out: dict[str, list[str]] = {}
    for grp, kind in db.con.execute("SELECT grp, kind FROM source_priority ORDER BY grp, rank, kind").fetchall():
        out.setdefault(grp, []).append(kind)
    return out


def set_source_priority(db: Database, grp: str, kinds: list[str]) -> None:
    """Rank the device kinds of a group in this order (kinds not named keep their order after)."""
    from common.errors import ConfigError

    if grp not in PRIORITY_GROUPS:
        raise ConfigError(f"unknown group {grp!r}; choose from {', '.join(PRIORITY_GROUPS)}")
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds or len(set(kinds)) != len(kinds):
        raise ConfigError(f"{grp}: give device kinds once each, from {', '.join(KINDS)} (got {', '.join(kinds)})")
    rest = [k for k in source_priority(db).get(grp, list(KINDS)) if k not in kinds]
    with db.transaction():
        db.con.execute("DELETE FROM source_priority WHERE grp = ?", [grp])
        for rank, kind in enumerate([*kinds, *rest], start=1):
            db.con.execute("INSERT INTO source_priority VALUES (?, ?, ?)", [grp, kind, rank])


def source_report(db: Database) -> list[dict[str, Any]]:
    """Per metric and source: its device kind, the rows it has, the rows the merged layer uses,
    and whether it wins anywhere."""
    rows = _dicts(db, """
        WITH kept AS (SELECT metric, source, source_name, count(*) AS used FROM samples_merged GROUP BY ALL),
        all_rows AS (
            SELECT metric, source, source_name, device_kind(source, source_name, any_value(device)) AS kind,
                metric_group(metric) AS grp, count(*) AS rows
            FROM samples GROUP BY metric, source, source_name)
        SELECT a.metric, a.grp, a.source, a.source_name, a.kind, a.rows, coalesce(k.used, 0) AS used
        FROM all_rows a LEFT JOIN kept k USING (metric, source, source_name)
        UNION ALL
        SELECT 'sleep_sessions', 'sleep', s.source, s.source_name, device_kind(s.source, s.source_name, NULL), count(*),
            (SELECT count(*) FROM sleep_sessions_merged m WHERE m.source = s.source AND m.source_name = s.source_name)
        FROM sleep_sessions s GROUP BY s.source, s.source_name
        UNION ALL
        SELECT 'workouts', 'workouts', w.source, w.source_name, device_kind(w.source, w.source_name, NULL), count(*),
            (SELECT count(*) FROM workouts_merged m WHERE m.source = w.source AND m.source_name = w.source_name)
        FROM workouts w GROUP BY w.source, w.source_name
        ORDER BY 1, 7 DESC, 3, 4
    """)
    return rows
