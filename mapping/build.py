"""`rhythm map`, the pure part: stored rows in, ``meters`` and ``slot_actions`` rows out.

The app shell reads the rows (``storage.inputs``) and writes the result
(``storage.derived.replace_mapped``); nothing here touches the database or the clock:

- ``mapped_range(span, start, end, today)``: the days to map, clipped to the data and today;
- ``compute(inputs, start, end, tz=...)``: meters and slot actions of those days from the
  rows of ``features.input_window(start, end)``;
- ``classify_texts(texts)``: every event's action (titles only ever reach the classifier).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from common.records import SLOTS
from common.rows import EventText, StoredInputs
from mapping.actions import Classification, slot_action
from mapping.baseline import Baseline, rolling_baselines
from mapping.features import (
    DataBundle,
    bundle_from_inputs,
    day_signals,
    describe_bundle,
    slot_bounds,
    slot_evidence,
    slot_signals,
)
from mapping.labels import LabelBook, classify_with_labels, source_name
from mapping.meters import compute_meters
from mapping.rules import METERS, Rules, default_rules

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


def classify_texts(texts: Iterable[EventText], book: LabelBook | None = None) -> dict[EventKey, Classification]:
    """Classify events (their title, description, attendees, type and series only): the
    person's labels first, then learned labels where the table is weak, then the table
    (mapping/labels.py)."""
    return {
        (t.source, t.calendar_id, t.event_id): classify_with_labels(
            t.title, t.description, t.attendees_count, t.event_type, t.recurring_event_id, book)
        for t in texts
    }


def _day_range(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def mapped_range(
    span: tuple[date, date] | None, start: date | None, end: date | None, today: date
) -> tuple[date, date] | None:
    """The days to map: [start, end] (defaults: the data's span) within the data and up to
    ``today`` (days after it get no meters). None when nothing is left."""
    if span is None:
        return None
    lo = max(start, span[0]) if start else span[0]
    hi = min(end or span[1], span[1], today)
    return None if hi < lo else (lo, hi)


def bundle(inputs: StoredInputs, tz: tzinfo) -> DataBundle:
    """The rows as a DataBundle in local time (rows without their own offset in ``tz``)."""
    return bundle_from_inputs(inputs, tz)


def compute(
    inputs: StoredInputs,
    start: date,
    end: date,
    *,
    tz: tzinfo,
    rules: Rules | None = None,
    computed_at: datetime | None = None,
    book: LabelBook | None = None,
) -> MapResult:
    """Meters and slot actions for the days [start, end], from the rows of
    ``features.input_window(start, end, rules.model)`` (see ``mapped_range``)."""
    rules = rules or default_rules()
    model = rules.model
    if end < start:
        return MapResult(start, end)
    b = bundle(inputs, tz)
    classified = classify_texts(
        (EventText(e.source, e.calendar_id, e.event_id, e.title, e.description, e.attendees_count, e.event_type,
                   e.recurring_event_id) for e in inputs.events),
        book,
    )
    labels = {k: c.action for k, c in classified.items()}
    confs = {k: c.confidence for k, c in classified.items()}

    days = _day_range(start - timedelta(days=model.baseline_days), end)
    history: dict[tuple[date, int], dict[str, float]] = {}
    for d in days:
        day_level = day_signals(b, d, model)
        for s in range(len(SLOTS)):
            history[(d, s)] = slot_signals(b, d, s, labels, model, day_level)
    # Baselines: each signal's series over the days (per slot for slot-scope signals).
    baselines: dict[tuple[str, int], list[Baseline]] = {}
    for name, sig in rules.signals.items():
        for s in range(len(SLOTS)):
            src = s if sig.scope == "slot" else 0
            series = [history[(d, src)].get(name) for d in days]
            baselines[(name, s)] = rolling_baselines(series, sig, s, model)
    index = {d: i for i, d in enumerate(days)}

    now = computed_at or datetime.now(UTC)
    result = MapResult(start, end, event_actions=classified, bundle=describe_bundle(b))
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
            sev = slot_evidence(b, d, s, labels, confs, rules.slot_actions.point_event_min)
            action, conf, ev = slot_action(sev, s, rules.slot_actions)
            if ev.get("rule") == "calendar":
                _label_sources(ev, b, d, s, action, classified)
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


def _label_sources(
    evidence: dict[str, Any], b: DataBundle, day: date, slot: int, action: str | None,
    classified: dict[EventKey, Classification],
) -> None:
    """Say where a calendar slot action came from when a label decided an event behind it:
    ``evidence["source"]`` is "your label" or "learned from your devices" (never a title)."""
    lo, hi = slot_bounds(day, slot)
    methods = [classified[e.key] for e in b.events_between(lo, hi)
               if e.key in classified and classified[e.key].action == action
               and classified[e.key].method in ("label", "learned")]
    if methods:
        first = min(methods, key=lambda c: c.method != "label")
        evidence["source"] = source_name(first.method)
