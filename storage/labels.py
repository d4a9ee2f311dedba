"""The ``labels`` table (migration 0008) and the facts labels are learned from. All SQL here.

A person's labels (origin ``you``) and learned ones (``learned``) share the table; the rules
that use them are in ``mapping/labels.py`` (pure).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

from common.rows import EventFacts, LabelRow
from storage.db import Database

YOU, LEARNED = "you", "learned"


def labels(db: Database, origin: str | None = None) -> list[LabelRow]:
    """Every stored label (or those of one origin): the person's first, then by pattern."""
    sql = "SELECT key, pattern, action, origin, evidence, applied FROM labels"
    params: list[Any] = []
    if origin is not None:
        sql += " WHERE origin = ?"
        params.append(origin)
    sql += " ORDER BY origin = 'learned', NOT applied, key"
    return [LabelRow(k, p, a, o, e, bool(ap)) for k, p, a, o, e, ap in db.con.execute(sql, params).fetchall()]


def set_label(db: Database, label: LabelRow, now: datetime | None = None) -> bool:
    """Store a person's label (replacing theirs for the same title or pattern). True when it
    replaced one."""
    with db.transaction():
        had = db.con.execute("SELECT count(*) FROM labels WHERE key = ? AND origin = ?", [label.key, YOU]).fetchone()
        db.con.execute("DELETE FROM labels WHERE key = ? AND origin = ?", [label.key, YOU])
        db.con.execute(
            "INSERT INTO labels (key, origin, pattern, action, applied, evidence, updated_at) VALUES (?, ?, ?, ?, true, NULL, ?)",
            [label.key, YOU, label.pattern, label.action, now or datetime.now(UTC)],
        )
    return bool(had and had[0])


def remove_label(db: Database, key: str) -> int:
    """Remove the person's label for a title or pattern key; how many rows went."""
    with db.transaction():
        n = db.con.execute("SELECT count(*) FROM labels WHERE key = ? AND origin = ?", [key, YOU]).fetchone()
        db.con.execute("DELETE FROM labels WHERE key = ? AND origin = ?", [key, YOU])
    return int(n[0]) if n else 0


def replace_learned(db: Database, learned: Iterable[LabelRow], now: datetime | None = None) -> int:
    """Replace every learned label with ``learned`` (a title the person labelled is skipped)."""
    rows = list(learned)
    at = now or datetime.now(UTC)
    with db.transaction():
        db.con.execute("DELETE FROM labels WHERE origin = ?", [LEARNED])
        mine = {k for (k,) in db.con.execute("SELECT key FROM labels WHERE origin = ?", [YOU]).fetchall()}
        kept = [r for r in rows if r.key not in mine]
        if kept:
            db.con.executemany(
                "INSERT INTO labels (key, origin, pattern, action, applied, evidence, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [[r.key, LEARNED, r.pattern, r.action, r.applied, r.evidence, at] for r in kept],
            )
    return len(kept)


def event_series(db: Database) -> list[tuple[str | None, str | None]]:
    """(title, recurring id) of every event in a recurring series."""
    return [(t, s) for t, s in db.con.execute(
        "SELECT DISTINCT title, recurring_event_id FROM events WHERE recurring_event_id IS NOT NULL"
    ).fetchall()]


def event_facts(db: Database) -> list[EventFacts]:
    """Every timed, not cancelled event with the minutes a workout and sleep covered it, the
    steps during it (each steps sample of the event's local day counted by its share of overlap) and whether a
    wearable recorded anything on its day (the merged layer: one source per window)."""
    rows = db.con.execute(
        """
        WITH ev AS (
            SELECT source, calendar_id, event_id, title, description, attendees_count, event_type,
                   start_ts, end_ts, local_day, (epoch(end_ts) - epoch(start_ts)) / 60.0 AS minutes
            FROM events
            WHERE NOT all_day AND status <> 'cancelled' AND end_ts > start_ts AND title IS NOT NULL
        ), wo AS (
            SELECT ev.source, ev.calendar_id, ev.event_id,
                   sum(greatest(0, epoch(least(ev.end_ts, w.end_ts)) - epoch(greatest(ev.start_ts, w.start_ts)))) / 60.0 AS m
            FROM ev JOIN workouts_merged w ON w.start_ts < ev.end_ts AND w.end_ts > ev.start_ts
            GROUP BY ALL
        ), sl AS (
            SELECT ev.source, ev.calendar_id, ev.event_id,
                   sum(greatest(0, epoch(least(ev.end_ts, s.end_ts)) - epoch(greatest(ev.start_ts, s.start_ts)))) / 60.0 AS m
            FROM ev JOIN sleep_sessions_merged s ON s.start_ts < ev.end_ts AND s.end_ts > ev.start_ts
            GROUP BY ALL
        ), st AS (
            SELECT ev.source, ev.calendar_id, ev.event_id,
                   sum(x.value * greatest(0, epoch(least(ev.end_ts, x.end_ts)) - epoch(greatest(ev.start_ts, x.start_ts)))
                       / greatest(1, epoch(x.end_ts) - epoch(x.start_ts))) AS steps
            FROM ev JOIN samples_merged x ON x.local_day = ev.local_day  -- a hash join first: years of samples
                 AND x.metric = 'steps' AND x.value IS NOT NULL
                 AND x.start_ts < ev.end_ts AND x.end_ts > ev.start_ts
                 AND epoch(x.end_ts) - epoch(x.start_ts) < 7200
            GROUP BY ALL
        ), worn AS (
            SELECT local_day FROM samples_merged UNION SELECT local_day FROM workouts_merged
            UNION SELECT local_day FROM sleep_sessions_merged
        )
        SELECT ev.title, ev.minutes, coalesce(wo.m, 0), coalesce(sl.m, 0), st.steps,
               ev.local_day IN (SELECT local_day FROM worn), ev.description, ev.attendees_count, ev.event_type
        FROM ev
        LEFT JOIN wo USING (source, calendar_id, event_id)
        LEFT JOIN sl USING (source, calendar_id, event_id)
        LEFT JOIN st USING (source, calendar_id, event_id)
        ORDER BY ev.start_ts
        """
    ).fetchall()
    return [EventFacts(t, float(m), float(w), float(s), None if st is None else float(st), bool(worn), d, a, et)
            for t, m, w, s, st, worn, d, a, et in rows]


def upcoming_titles(db: Database, lo: date, hi: date) -> list[tuple[str | None, str | None]]:
    """(title, recurring id) of the timed, not cancelled events of local days [lo, hi]."""
    return [(t, s) for t, s in db.con.execute(
        "SELECT title, recurring_event_id FROM events WHERE local_day BETWEEN ? AND ? AND NOT all_day "
        "AND status <> 'cancelled' AND title IS NOT NULL ORDER BY start_ts", [lo, hi]
    ).fetchall()]
