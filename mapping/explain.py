"""Read the stored meters and slot actions back, with their evidence (for `rhythm meters`)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

from common.records import SLOTS
from mapping.rules import METERS
from storage.db import Database


def latest_day(db: Database) -> date | None:
    row = db.con.execute("SELECT max(local_day) FROM meters").fetchone()
    return None if row is None else row[0]


def meter_rows(db: Database, day: date | None = None, days: int = 1) -> list[dict[str, Any]]:
    """Meters, confidence, evidence and the slot action of ``days`` days ending at ``day``
    (default: the latest day with meters), ordered by day and slot."""
    end = day or latest_day(db)
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
        d, slot = r[0], r[1]
        vals = r[2 : 2 + len(METERS)]
        conf, ev, action, aconf, aev = r[2 + len(METERS) :]
        out.append(
            {
                "local_day": d,
                "slot": slot,
                **dict(zip(METERS, vals, strict=True)),
                "confidence": conf,
                "action": action,
                "action_confidence": aconf,
                "evidence": json.loads(ev) if ev else {},
                "action_evidence": json.loads(aev) if aev else {},
            }
        )
    order = {s: i for i, s in enumerate(SLOTS)}
    out.sort(key=lambda x: (x["local_day"], order.get(x["slot"], 9)))
    return out


def history_rows(db: Database, end: date | None = None, days: int = 90) -> list[dict[str, Any]]:
    """Meters only (no evidence) of the ``days`` days ending at ``end``, for plots."""
    end = end or latest_day(db)
    if end is None:
        return []
    start = end - timedelta(days=max(1, days) - 1)
    rows = db.con.execute(
        f"SELECT local_day, slot, {', '.join(METERS)} FROM meters WHERE local_day BETWEEN ? AND ? "
        "ORDER BY local_day",
        [start, end],
    ).fetchall()
    return [dict(zip(["local_day", "slot", *METERS], r, strict=True)) for r in rows]


def signal_lines(evidence: dict[str, Any], meter: str) -> list[str]:
    """Human lines for one meter's evidence: signal = value (usual x) -> score."""
    ev = evidence.get(meter) or {}
    lines = []
    for name, s in sorted((ev.get("signals") or {}).items()):
        base = "usual" if s.get("personal") else "population"
        lines.append(
            f"{name} = {s['value']:g} ({base} {s['baseline']:g} ± {s['scale']:g}) -> {s['score']:.2f}"
        )
    if ev.get("missing"):
        lines.append("missing: " + ", ".join(ev["missing"]))
    return lines
