"""`rhythm map`: rebuild ``meters`` and ``slot_actions`` (and ``events.action``) from the tables.

``compute(db, start, end)`` reads only and returns the rows; ``rebuild(db, since)`` writes
them for every day >= ``since`` (all days when None) inside one transaction (joining the
caller's, e.g. the daemon's ``map_step``), replacing what was there. No network, no clock
other than ``today`` (days after it get no meters; events after it are still classified).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import pyarrow as pa

from common.records import SLOTS
from mapping.actions import Classification, classify_event, slot_action
from mapping.baseline import Baseline, rolling_baselines
from mapping.features import (
    DataBundle,
    data_span,
    day_signals,
    describe_bundle,
    load_bundle,
    resolve_tz,
    slot_evidence,
    slot_signals,
)
from mapping.meters import compute_meters
from mapping.rules import METERS, Rules, default_rules
from storage.db import Database

EventKey = tuple[str, str, str]


@dataclass
class MapResult:
    start: date | None
    end: date | None
    meters: list[dict[str, Any]] = field(default_factory=list)
    slot_actions: list[dict[str, Any]] = field(default_factory=list)
    event_actions: dict[EventKey, Classification] = field(default_factory=dict)
    bundle: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        actions = Counter(r["action"] for r in self.slot_actions if r["action"])
        with_values = sum(1 for r in self.meters if any(r[m] is not None for m in METERS))
        confs = [r["confidence"] for r in self.meters]
        methods = Counter(c.method for c in self.event_actions.values())
        return {
            "first_day": self.start.isoformat() if self.start else None,
            "last_day": self.end.isoformat() if self.end else None,
            "days": len({r["local_day"] for r in self.meters}),
            "slots": len(self.meters),
            "slots_with_meters": with_values,
            "mean_confidence": round(sum(confs) / len(confs), 4) if confs else 0.0,
            "slots_with_action": sum(actions.values()),
            "actions": dict(sorted(actions.items())),
            "events_classified": sum(1 for c in self.event_actions.values() if c.action),
            "events_seen": len(self.event_actions),
            "event_methods": dict(sorted(methods.items())),
            "sources": self.bundle,
        }


def classify_events(db: Database, since: date | None) -> dict[EventKey, Classification]:
    """Classify every stored event on or after ``since`` (titles only ever reach the classifier)."""
    sql = (
        "SELECT source, calendar_id, event_id, title, description, attendees_count, event_type "
        "FROM events"
    )
    params: list[Any] = []
    if since is not None:
        sql += " WHERE local_day >= ?"
        params.append(since)
    out = {}
    for src, cal, eid, title, desc, att, etype in db.con.execute(sql, params).fetchall():
        out[(src, cal, eid)] = classify_event(title, desc, att, etype)
    return out


def _day_range(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def compute(
    db: Database,
    start: date | None = None,
    end: date | None = None,
    *,
    tz: str | tzinfo | None = None,
    today: date | None = None,
    rules: Rules | None = None,
) -> MapResult:
    """Meters and slot actions for [start, end] (defaults: the stored data's span, up to today)."""
    rules = rules or default_rules()
    model = rules.model
    span = data_span(db)
    if span is None:
        return MapResult(start, end)
    today = today or date.today()
    start = max(start, span[0]) if start else span[0]
    end = min(end or span[1], span[1], today)
    if end < start:
        return MapResult(start, end)
    zone = resolve_tz(db, tz)
    bundle = load_bundle(db, start, end, zone, model)
    lo = start - timedelta(days=model.baseline_days + model.calendar_coverage_days + 8)
    classified = classify_events(db, lo)
    labels = {k: c.action for k, c in classified.items()}
    confs = {k: c.confidence for k, c in classified.items()}

    days = _day_range(start - timedelta(days=model.baseline_days), end)
    history: dict[tuple[date, int], dict[str, float]] = {}
    for d in days:
        day_level = day_signals(bundle, d, model)
        for s in range(len(SLOTS)):
            history[(d, s)] = slot_signals(bundle, d, s, labels, model, day_level)
    # Baselines: each signal's series over the days (per slot for slot-scope signals).
    baselines: dict[tuple[str, int], list[Baseline]] = {}
    for name, sig in rules.signals.items():
        for s in range(len(SLOTS)):
            src = s if sig.scope == "slot" else 0
            series = [history[(d, src)].get(name) for d in days]
            baselines[(name, s)] = rolling_baselines(series, sig, s, model)
    index = {d: i for i, d in enumerate(days)}

    now = datetime.now(UTC)
    result = MapResult(start, end, event_actions=classified, bundle=describe_bundle(bundle))
    for d in _day_range(start, end):
        for s, slot_name in enumerate(SLOTS):
            base = {name: baselines[(name, s)][index[d]] for name in rules.signals}
            res = compute_meters(history[(d, s)], base, s, rules)
            evidence = {**res.evidence, "signals_present": sorted(history[(d, s)])}
            result.meters.append(
                {
                    "local_day": d,
                    "slot": slot_name,
                    **{m: None if res.values[m] is None else round(res.values[m], 4) for m in METERS},
                    "confidence": round(res.overall_confidence, 4),
                    "evidence": evidence,
                    "computed_at": now,
                }
            )
            sev = slot_evidence(bundle, d, s, labels, confs, rules.slot_actions.point_event_min)
            action, conf, ev = slot_action(sev, s, rules.slot_actions)
            result.slot_actions.append(
                {
                    "local_day": d,
                    "slot": slot_name,
                    "action": action,
                    "confidence": round(conf, 4),
                    "evidence": ev,
                    "computed_at": now,
                }
            )
    return result


def _table(rows: list[dict[str, Any]], columns: list[str]) -> pa.Table:
    cols = {c: [r[c] for r in rows] for c in columns}
    cols["evidence"] = [json.dumps(e, sort_keys=True) for e in cols["evidence"]]
    return pa.table(cols)


def rebuild(
    db: Database,
    since: date | None = None,
    *,
    tz: str | tzinfo | None = None,
    today: date | None = None,
    rules: Rules | None = None,
) -> dict[str, Any]:
    """Recompute meters, slot actions and events.action for days >= ``since`` (all if None).

    One transaction (joins the caller's): rows for those days are replaced, never appended.
    Returns a summary (days, slots with meters and actions, action counts, classified events).
    """
    result = compute(db, since, None, tz=tz, today=today, rules=rules)
    start = since or result.start
    event_actions = classify_events(db, since)
    with db.transaction():
        for table in ("meters", "slot_actions"):
            if start is None:
                db.con.execute(f"DELETE FROM {table}")
            else:
                db.con.execute(f"DELETE FROM {table} WHERE local_day >= ?", [start])
        if result.meters:
            db.upsert("meters", _table(result.meters, [
                "local_day", "slot", *METERS, "confidence", "evidence", "computed_at"]))
            db.upsert("slot_actions", _table(result.slot_actions, [
                "local_day", "slot", "action", "confidence", "evidence", "computed_at"]))
        if since is None:
            db.con.execute("UPDATE events SET action = NULL")
        else:
            db.con.execute("UPDATE events SET action = NULL WHERE local_day >= ?", [since])
        labelled = [(k, c.action) for k, c in event_actions.items() if c.action]
        if labelled:
            upd = pa.table({
                "source": [k[0] for k, _ in labelled],
                "calendar_id": [k[1] for k, _ in labelled],
                "event_id": [k[2] for k, _ in labelled],
                "action": [a for _, a in labelled],
            })
            db.con.register("__event_actions", upd)
            try:
                db.con.execute(
                    "UPDATE events SET action = u.action FROM __event_actions u "
                    "WHERE events.source = u.source AND events.calendar_id = u.calendar_id "
                    "AND events.event_id = u.event_id"
                )
            finally:
                db.con.unregister("__event_actions")
    summary = result.summary()
    summary["events_classified"] = len(labelled)
    summary["events_seen"] = len(event_actions)
    return summary


def bundle_for(db: Database, start: date, end: date, tz: str | tzinfo | None = None) -> DataBundle:
    """The loaded rows behind a range (for explanations and tests)."""
    return load_bundle(db, start, end, resolve_tz(db, tz), default_rules().model)
