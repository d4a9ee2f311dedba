"""The store step of ``rhythm recommend``: the day plan's blocks as rows of
``recommendations`` (``storage.plans``), with their times, evidence, expected effect, the
belief and the meters they were given with, and the ``Plan`` the commands render."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from common.records import SLOTS
from rhythm.day_inputs import DayData
from storage import plans
from storage.db import Database


@dataclass(frozen=True)
class PlannedSlot:
    """One recommendation: a time block of the day."""

    id: int
    local_day: date
    slot: str
    action: str
    rationale: str
    model: str
    start: datetime | None = None
    end: datetime | None = None
    kind: str = "block"
    evidence: tuple[str, ...] = ()
    expected_effect: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    day: date
    slots: list[PlannedSlot]
    belief: tuple[float, float, float]
    belief_sd: tuple[float, float, float]
    model: str
    observed_slots: int  # slots with real meter data behind the belief
    feedback_used: int
    notes: list[str] = field(default_factory=list)
    timezone: str = "UTC"
    commitments: list[dict[str, Any]] = field(default_factory=list)
    fixed_slots: list[str] = field(default_factory=list)
    horizon: list[tuple[str, str, str]] = field(default_factory=list)
    wake: datetime | None = None
    bed: datetime | None = None
    # the current slot's choice before the checks: {"planner": ..., "model": ...} when a
    # local model was asked (benchmarks/student_real.py compares them); empty otherwise
    picks: dict[str, str | None] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The plan as plain data for logs, the daemon's state and the demo's JSON."""
        belief, sd = list(self.belief), list(self.belief_sd)
        return {
            "day": self.day.isoformat(),
            "model": self.model,
            "belief": belief,
            "belief_sd": sd,
            "observed_slots": self.observed_slots,
            "notes": list(self.notes),
            "fixed_slots": list(self.fixed_slots),
            "slots": [
                {"id": s.id, "slot": s.slot, "action": s.action, "rationale": s.rationale, "model": s.model,
                 "start": _iso(s.start), "end": _iso(s.end), "belief": belief, "belief_sd": sd}
                for s in self.slots
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `rhythm recommend --json` (issue 19)."""
        names = ("social", "morning", "work")
        return {
            "day": self.day.isoformat(),
            "timezone": self.timezone,
            "wake": _iso(self.wake),
            "bed": _iso(self.bed),
            "commitments": self.commitments,
            "fixed_slots": list(self.fixed_slots),
            "recommendations": [
                {
                    "id": s.id, "slot": s.slot, "action": s.action, "kind": s.kind,
                    "start": _iso(s.start), "end": _iso(s.end), "rationale": s.rationale,
                    "evidence": list(s.evidence), "expected_effect": dict(s.expected_effect), "model": s.model,
                }
                for s in self.slots
            ],
            "belief": dict(zip(names, self.belief, strict=True)),
            "belief_sd": dict(zip(names, self.belief_sd, strict=True)),
            "model": self.model,
            "observed_slots": self.observed_slots,
            "feedback_used": self.feedback_used,
            "notes": self.notes,
            "horizon": [{"day": d, "slot": s, "action": a} for d, s, a in self.horizon],
        }


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="minutes")


def store_plan(
    db: Database,
    data: DayData,
    dp: Any,
    *,
    model: str,
    observed: int,
    notes: list[str],
    picks: dict[str, str | None],
) -> Plan:
    """Insert the blocks of ``dp`` (an ``agent.day.DayPlan``) into ``recommendations`` and
    return the Plan. A block the planner chose is stored as ``agent.day.PLANNER_NAME``;
    ``model``: the plan's decider (the planner, or the local model whose pick stood)."""
    from agent.day import PLANNER_NAME

    created = datetime.now(UTC)
    before = [None if not ok else round(float(v), 4) for v, ok in zip(data.meters_now, data.seen, strict=True)]
    rows = [
        {
            "created_at": created, "local_day": data.day, "slot": b.slot, "action": b.action,
            **dict(zip(("belief_social", "belief_morning", "belief_work"), dp.belief, strict=True)),
            **dict(zip(("belief_sd_social", "belief_sd_morning", "belief_sd_work"), dp.belief_sd, strict=True)),
            "rationale": b.rationale, "model": b.chosen_by if b.chosen_by != "planner" else PLANNER_NAME,
            "start_ts": b.start, "end_ts": b.end, "kind": b.kind, "evidence": json.dumps(b.evidence),
            "expected_effect": json.dumps(b.expected_effect), "meters_before": json.dumps(before),
            "context": b.context,
        }
        for b in dp.blocks
    ]
    ids = plans.insert_recommendations(db, rows)
    planned = [
        PlannedSlot(rec_id, data.day, b.slot, b.action, b.rationale, r["model"], b.start, b.end, b.kind,
                    tuple(b.evidence), dict(b.expected_effect))
        for rec_id, b, r in zip(ids, dp.blocks, rows, strict=True)
    ]
    commitments = [
        {"start": _iso(c.start), "end": _iso(c.end), "title": c.title, "action": c.action, "source": c.source}
        for c in dp.frame.commitments
    ]
    return Plan(data.day, planned, dp.belief, dp.belief_sd, model, observed, len(data.feedback), notes,
                timezone=getattr(data.tz, "key", str(data.tz)), commitments=commitments,
                fixed_slots=[s for s in SLOTS if s in dp.fixed], horizon=dp.horizon,
                wake=dp.frame.wake, bed=dp.frame.bed, picks=picks)
