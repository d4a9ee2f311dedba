"""The derived tables mapping produces: `meters`, `slot_actions` and `events.action`.

Written only by ``replace_mapped`` (one transaction, joining the caller's: the rows of the
days rebuilt are replaced, never appended) and read back as plain rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import pyarrow as pa

from common.records import METERS, SLOTS
from common.rows import SlotRow
from storage.db import Database

METER_COLUMNS = ["local_day", "slot", *METERS, "confidence", "evidence", "computed_at"]
ACTION_COLUMNS = ["local_day", "slot", "action", "confidence", "evidence", "computed_at"]
EventKey = tuple[str, str, str]


def _table(rows: Sequence[Mapping[str, Any]], columns: list[str]) -> pa.Table:
    cols = {c: [r[c] for r in rows] for c in columns}
    cols["evidence"] = [json.dumps(e, sort_keys=True) for e in cols["evidence"]]
    return pa.table(cols)


def replace_mapped(
    db: Database,
    since: date | None,
    meters: Sequence[Mapping[str, Any]],
    slot_actions: Sequence[Mapping[str, Any]],
    event_actions: Mapping[EventKey, str | None],
    event_sources: Mapping[EventKey, str] | None = None,
) -> int:
    """Replace meters and slot actions of days >= ``since`` (all days when None) and set
    ``events.action`` of the events given (others of those days become NULL). Returns how
    many events got an action."""
    with db.transaction():
        for table in ("meters", "slot_actions"):
            if since is None:
                db.con.execute(f"DELETE FROM {table}")
            else:
                db.con.execute(f"DELETE FROM {table} WHERE local_day >= ?", [since])
        if meters:
            db.upsert("meters", _table(meters, METER_COLUMNS))
        if slot_actions:
            db.upsert("slot_actions", _table(slot_actions, ACTION_COLUMNS))
        if since is None:
            db.con.execute("UPDATE events SET action = NULL, action_source = NULL")
        else:
            db.con.execute("UPDATE events SET action = NULL, action_source = NULL WHERE local_day >= ?", [since])
        sources = event_sources or {}
        # an event a label named NONE keeps its source too (the person's "not an action")
        labelled = [(k, a) for k, a in event_actions.items() if a or sources.get(k) in ("label", "learned")]
        if labelled:
            upd = pa.table({
                "source": [k[0] for k, _ in labelled],
                "calendar_id": [k[1] for k, _ in labelled],
                "event_id": [k[2] for k, _ in labelled],
                "action": pa.array([a for _, a in labelled], pa.string()),
                "action_source": pa.array([sources.get(k) for k, _ in labelled], pa.string()),
            })
            db.con.register("__event_actions", upd)
            try:
                db.con.execute(
                    "UPDATE events SET action = u.action, action_source = u.action_source FROM __event_actions u "
                    "WHERE events.source = u.source AND events.calendar_id = u.calendar_id "
                    "AND events.event_id = u.event_id"
                )
            finally:
                db.con.unregister("__event_actions")
    return sum(1 for _, a in labelled if a)


def latest_meter_day(db: Database) -> date | None:
    row = db.con.execute("SELECT max(local_day) FROM meters").fetchone()
    return None if row is None else row[0]


def slot_rows(db: Database, start: date, end: date) -> list[SlotRow]:
    """Stored meters with their slot action, days [start, end], in day and slot order."""
    rows = db.con.execute(
        f"SELECT m.local_day, m.slot, {', '.join('m.' + k for k in METERS)}, m.confidence, "
        "a.action, a.confidence FROM meters m LEFT JOIN slot_actions a USING (local_day, slot) "
        "WHERE m.local_day BETWEEN ? AND ?",
        [start, end],
    ).fetchall()
    out = [SlotRow(d, s, tuple(r[:5]), r[5], r[6], r[7]) for d, s, *r in rows]
    order = {s: i for i, s in enumerate(SLOTS)}
    out.sort(key=lambda x: (x.day, order.get(x.slot, len(SLOTS))))
    return out


def meter_rows(db: Database, day: date | None = None, days: int = 1) -> list[dict[str, Any]]:
    """Meters, confidence, evidence and the slot action of ``days`` days ending at ``day``
    (default: the latest day with meters), ordered by day and slot."""
    end = day or latest_meter_day(db)
    if end is None:
        return []
    start = end - timedelta(days=max(1, days) - 1)
    rows = db.con.execute(
        f"SELECT m.local_day, m.slot, {', '.join('m.' + k for k in METERS)}, m.confidence, m.evidence, "
        "a.action, a.confidence, a.evidence FROM meters m LEFT JOIN slot_actions a USING (local_day, slot) "
        "WHERE m.local_day BETWEEN ? AND ?",
        [start, end],
    ).fetchall()
    out = []
    for r in rows:
        vals = r[2 : 2 + len(METERS)]
        conf, ev, action, aconf, aev = r[2 + len(METERS) :]
        out.append({
            "local_day": r[0],
            "slot": r[1],
            **dict(zip(METERS, vals, strict=True)),
            "confidence": conf,
            "action": action,
            "action_confidence": aconf,
            "evidence": json.loads(ev) if ev else {},
            "action_evidence": json.loads(aev) if aev else {},
        })
    order = {s: i for i, s in enumerate(SLOTS)}
    out.sort(key=lambda x: (x["local_day"], order.get(x["slot"], 9)))
    return out


def history_rows(db: Database, end: date | None = None, days: int = 90) -> list[dict[str, Any]]:
    """Meters only (no evidence) of the ``days`` days ending at ``end``, for plots."""
    end = end or latest_meter_day(db)
    if end is None:
        return []
    start = end - timedelta(days=max(1, days) - 1)
    rows = db.con.execute(
        f"SELECT local_day, slot, {', '.join(METERS)} FROM meters WHERE local_day BETWEEN ? AND ? "
        "ORDER BY local_day",
        [start, end],
    ).fetchall()
    return [dict(zip(["local_day", "slot", *METERS], r, strict=True)) for r in rows]


def slot_history(db: Database, end: date | None = None, days: int = 180) -> list[SlotRow]:
    """Stored meters with their slot action of the ``days`` days ending at ``end`` (default:
    the latest day with meters), in day and slot order: the history personal dynamics are
    fitted on."""
    end = end or latest_meter_day(db)
    if end is None:
        return []
    return slot_rows(db, end - timedelta(days=max(1, days) - 1), end)
