"""A filler for the derived tables (meters, slot actions, recommendations, feedback)."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta

from common.records import ACTIONS, METERS, SLOTS


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
        created = datetime(d.year, d.month, d.day, 7, 0, tzinfo=UTC)  # one plan a day: one batch
        for k, slot in enumerate(SLOTS[:3]):
            sd = 0.3 / math.sqrt(1 + i)
            start = datetime(d.year, d.month, d.day, 8 + 5 * k, 0, tzinfo=UTC)
            rid = con.execute(
                "INSERT INTO recommendations (created_at, local_day, slot, action, belief_social, belief_morning, "
                "belief_work, belief_sd_social, belief_sd_morning, belief_sd_work, rationale, model, start_ts, end_ts, "
                "kind, evidence, expected_effect) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'block', ?, ?) RETURNING id",
                [created, d, slot, ACTIONS[(2 * i + k) % len(ACTIONS)], 0.4 + 0.01 * i,
                 0.7 + 0.005 * i, 0.5, sd, sd * 0.8, sd * 1.2, f"because of <signals> on day {i} & more", "bayes-test",
                 start, start + timedelta(minutes=60), json.dumps([f"slept 7 h {i:02d}, your usual 7 h 30"]),
                 json.dumps({"vitality": 0.05, "progress": -0.02})],
            ).fetchone()[0]
            if with_feedback and d < today and (i + k) % 3 != 2:
                con.execute('INSERT INTO feedback (recommendation_id, response, "at") VALUES (?, ?, ?)',
                            [rid, "accept" if (i + k) % 2 else "ignore", created + timedelta(hours=1)])
