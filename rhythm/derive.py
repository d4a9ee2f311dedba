"""Stored rows through mapping: the glue between storage (SQL) and mapping (pure).

Storage reads (``storage.inputs``, ``storage.derived``), mapping computes
(``mapping.build``, ``mapping.observations``), storage writes (``storage.derived``). The
person's zone ``tz`` and ``today`` come from the caller (``rhythm.settings.user_zone``), so
meters, slot actions, plans and reports agree on what "today" is.
"""

from __future__ import annotations

from datetime import date, tzinfo
from typing import Any

from common.records import METERS
from common.rows import LabelRow, SlotRow, StoredInputs
from mapping.build import MapResult, classify_texts, mapped_range
from mapping.build import bundle as _bundle
from mapping.build import compute as _compute
from mapping.features import INPUT_METRICS, DataBundle, default_offset_min, input_window, zone_name
from mapping.labels import YOU, LabelBook, learn
from mapping.observations import lookback_start, observations_from_states, states_from_rows
from mapping.rules import Rules, default_rules
from storage import derived, inputs
from storage import labels as stored_labels
from storage.db import Database


def stored_inputs(db: Database, start: date, end: date, tz: tzinfo, rules: Rules | None = None) -> StoredInputs:
    """The rows mapping needs to compute days [start, end]."""
    lo, hi = input_window(start, end, (rules or default_rules()).model)
    return inputs.mapping_inputs(
        db, lo, hi, zone=zone_name(tz), default_offset_min=default_offset_min(tz, start), **INPUT_METRICS
    )


def compute(
    db: Database,
    start: date | None = None,
    end: date | None = None,
    *,
    tz: tzinfo,
    today: date,
    rules: Rules | None = None,
) -> MapResult:
    """Meters and slot actions of [start, end] (defaults: the stored data's span, up to
    ``today``). Reads only."""
    days = mapped_range(inputs.data_span(db), start, end, today)
    if days is None:
        return MapResult(start, end)
    lo, hi = days
    return _compute(stored_inputs(db, lo, hi, tz, rules), lo, hi, tz=tz, rules=rules, book=label_book(db))


def label_book(db: Database) -> LabelBook:
    """The person's labels and the applied learned ones, with the series they name."""
    return LabelBook.build(stored_labels.labels(db), stored_labels.event_series(db))


def relearn(db: Database) -> list[LabelRow]:
    """Learn labels from what the devices recorded during each event (mapping/labels.py) and
    store them (proposed and applied), replacing the learned ones; the person's labels win."""
    mine = {lab.key for lab in stored_labels.labels(db, YOU)}
    learned = learn(stored_labels.event_facts(db), skip=mine)
    stored_labels.replace_learned(db, learned)
    return learned


def rebuild(
    db: Database, since: date | None = None, *, tz: tzinfo, today: date, rules: Rules | None = None
) -> dict[str, Any]:
    """Recompute meters, slot actions and events.action for days >= ``since`` (all if None),
    replacing what was there, in one transaction (joining the caller's). Returns a summary."""
    with db.transaction():
        learned = relearn(db)
        result = compute(db, since, None, tz=tz, today=today, rules=rules)
        texts = inputs.event_texts(db, since)
        classified = classify_texts(texts, label_book(db))
        event_actions = {k: c.action for k, c in classified.items()}
        sources = {k: c.method for k, c in classified.items()}
        labelled = derived.replace_mapped(db, since or result.start, result.meters, result.slot_actions, event_actions,
                                          sources)
    summary = result.summary()
    summary["labels_yours"] = sum(1 for c in classified.values() if c.method == "label")
    summary["labels_learned"] = sum(1 for c in classified.values() if c.method == "learned")
    summary["learned_applied"] = sum(1 for lab in learned if lab.applied)
    summary["learned_proposed"] = sum(1 for lab in learned if not lab.applied)
    summary["events_classified"] = labelled
    summary["events_seen"] = len(texts)
    return summary


def bundle_for(db: Database, start: date, end: date, tz: tzinfo) -> DataBundle:
    """The loaded rows behind a range, in local time (for explanations and tests)."""
    return _bundle(stored_inputs(db, start, end, tz), tz)


def computed_slot_rows(db: Database, start: date, end: date, *, tz: tzinfo) -> list[SlotRow]:
    """The slots of [start, end] computed on the fly, as stored slots look (nothing written)."""
    res = compute(db, start, end, tz=tz, today=end)
    acts = {(r["local_day"], r["slot"]): r for r in res.slot_actions}
    out = []
    for r in res.meters:
        a = acts.get((r["local_day"], r["slot"]), {})
        out.append(SlotRow(r["local_day"], r["slot"], tuple(r[m] for m in METERS), r["confidence"],
                           a.get("action"), a.get("confidence", 0.0)))
    return out


def observation_records(
    db: Database, start: date, end: date, *, tz: tzinfo
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(observation, info) per slot of [start, end] in the simulator's format, from the
    stored slots (computed on the fly when the range has none stored)."""
    if end < start:
        return []
    lo = lookback_start(start)
    rows = derived.slot_rows(db, lo, end)
    if not any(r.day >= start for r in rows):
        rows = computed_slot_rows(db, lo, end, tz=tz)
    return observations_from_states(states_from_rows(rows), start, end)


def observation_stream(db: Database, start: date, end: date, *, tz: tzinfo) -> list[dict[str, Any]]:
    """The observations only, exactly as ``RhythmEnv`` shapes them (one per slot)."""
    return [obs for obs, _ in observation_records(db, start, end, tz=tz)]
