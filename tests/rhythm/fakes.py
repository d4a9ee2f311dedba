"""Stand-ins for the map and recommend stages, and a filler for the derived tables.

The daemon and demo tests use the real `mapping.build` and `rhythm.recommend` when they are
installed, and these stand-ins (same signatures, same tables written) while they are not.
"""

from __future__ import annotations

import json
import math
import sys
import types
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from rhythm.report import ACTIONS, METERS, SLOTS
from storage import open_db


def fill_derived(con, today: date, days: int, *, with_feedback: bool = True) -> None:
    """Meters, slot actions, recommendations (+ belief and sd) and feedback for `days` days."""
    for i in range(days):
        d = today - timedelta(days=days - 1 - i)
        for k, slot in enumerate(SLOTS):
            vals = [0.5 + 0.35 * math.sin(i / 4 + k + j) for j in range(len(METERS))]
            if i == 3:
                vals[2] = None  # a day without the progress signals
            ev = {m: {"signals": [{"name": "hrv_rmssd", "value": 48.0 + i, "z": 0.3, "score": 0.57}], "missing": []}
                  for m in METERS}
            con.execute(
                f"INSERT INTO meters (local_day, slot, {', '.join(METERS)}, confidence, evidence, computed_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [d, slot, *vals, 0.8, json.dumps(ev), datetime.now(UTC)],
            )
            con.execute(
                "INSERT INTO slot_actions (local_day, slot, action, confidence, evidence, computed_at) VALUES (?, ?, ?, ?, ?, ?)",
                [d, slot, ACTIONS[(i + k) % len(ACTIONS)], 0.7, json.dumps({"events": ["Team stand-up"]}), datetime.now(UTC)],
            )
        created = datetime(d.year, d.month, d.day, 7, 0, tzinfo=UTC)
        for k, slot in enumerate(SLOTS[:3]):
            sd = 0.3 / math.sqrt(1 + i)
            rid = con.execute(
                "INSERT INTO recommendations (created_at, local_day, slot, action, belief_social, belief_morning, "
                "belief_work, belief_sd_social, belief_sd_morning, belief_sd_work, rationale, model) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                [created + timedelta(minutes=k), d, slot, ACTIONS[(2 * i + k) % len(ACTIONS)], 0.4 + 0.01 * i,
                 0.7 + 0.005 * i, 0.5, sd, sd * 0.8, sd * 1.2, f"because of <signals> on day {i} & more", "bayes-test"],
            ).fetchone()[0]
            if with_feedback and d < today and (i + k) % 3 != 2:
                con.execute('INSERT INTO feedback (recommendation_id, response, "at") VALUES (?, ?, ?)',
                            [rid, "accept" if (i + k) % 2 else "ignore", created + timedelta(hours=1)])


# -- the stages ------------------------------------------------------------------------------
def fake_rebuild(db, since=None):
    days = [r[0] for r in db.con.execute(
        "SELECT DISTINCT local_day FROM (SELECT local_day FROM samples UNION SELECT local_day FROM events "
        "UNION SELECT local_day FROM sleep_sessions) ORDER BY 1").fetchall()]
    db.con.execute("DELETE FROM meters")
    db.con.execute("DELETE FROM slot_actions")
    for d in days:
        for slot in SLOTS:
            db.con.execute(
                f"INSERT INTO meters (local_day, slot, {', '.join(METERS)}, confidence, evidence, computed_at) "
                "VALUES (?, ?, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, '{}', ?)", [d, slot, datetime.now(UTC)])
            db.con.execute("INSERT INTO slot_actions VALUES (?, ?, 'DEEP_WORK', 0.6, '{}', ?)", [d, slot, datetime.now(UTC)])
    return {"days": len(days)}


@dataclass
class FakeSlotPlan:
    slot: str
    action: str
    rationale: str
    belief: tuple[float, float, float]
    belief_sd: tuple[float, float, float]
    model: str = "fake"


@dataclass
class FakePlan:
    day: date
    slots: list[FakeSlotPlan] = field(default_factory=list)


def fake_recommend(settings, day):
    plan = FakePlan(day, [
        FakeSlotPlan("afternoon", "ADMIN_WORK", "meetings all afternoon", (0.4, 0.8, 0.6), (0.1, 0.05, 0.1)),
        FakeSlotPlan("evening", "FAMILY_TIME", "Sunday dinner habit", (0.4, 0.8, 0.6), (0.1, 0.05, 0.1)),
    ])
    with open_db(settings.database) as db:
        for s in plan.slots:
            db.con.execute(
                "INSERT INTO recommendations (created_at, local_day, slot, action, belief_social, belief_morning, "
                "belief_work, belief_sd_social, belief_sd_morning, belief_sd_work, rationale, model) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [datetime.now(UTC), day, s.slot, s.action, *s.belief, *s.belief_sd, s.rationale, s.model])
    return plan


def install_missing_stages(monkeypatch) -> dict[str, bool]:
    """Put the stand-ins in place of stages not installed yet; returns which are fakes."""
    import importlib

    fakes = {}
    for name, attr, fn in (("mapping.build", "rebuild", fake_rebuild), ("rhythm.recommend", "recommend", fake_recommend)):
        try:
            mod = importlib.import_module(name)
            fakes[name] = not hasattr(mod, attr)
        except ModuleNotFoundError:
            fakes[name] = True
        if fakes[name]:
            mod = types.ModuleType(name)
            setattr(mod, attr, fn)
            monkeypatch.setitem(sys.modules, name, mod)
    return fakes
