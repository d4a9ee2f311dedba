"""Recommendations and the person's answers to them (`recommendations`, `feedback`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from storage.db import Database

RECOMMENDATION_COLUMNS = (
    "created_at", "local_day", "slot", "action", "belief_social", "belief_morning", "belief_work",
    "belief_sd_social", "belief_sd_morning", "belief_sd_work", "rationale", "model",
)


def insert_recommendations(db: Database, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Insert recommendations (inside the caller's transaction); returns their ids in order.

    Each row has the columns of RECOMMENDATION_COLUMNS and may have any other column of
    the table (e.g. the plan's times and evidence)."""
    ids = []
    known = set(db.columns("recommendations"))
    for row in rows:
        cols = [c for c in row if c in known and c != "id"]
        values = [row[c] for c in cols]
        (rec_id,) = db.con.execute(
            f"INSERT INTO recommendations ({', '.join(_q(c) for c in cols)}) "
            f"VALUES ({', '.join('?' for _ in cols)}) RETURNING id",
            values,
        ).fetchone()
        ids.append(int(rec_id))
    return ids


def recommendation(db: Database, rec_id: int) -> dict[str, Any] | None:
    """One recommendation as a dict of its columns, or None."""
    cur = db.con.execute("SELECT * FROM recommendations WHERE id = ?", [rec_id])
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def record_answer(db: Database, rec_id: int, response: str, at: datetime | None = None) -> datetime:
    """Store (or replace) the answer to a recommendation."""
    at = at or datetime.now(UTC)
    db.upsert("feedback", [{"recommendation_id": rec_id, "response": response, "at": at}])
    return at


def json_value(value: Any, empty: Any) -> Any:
    """A JSON column of ``recommendations`` (evidence, expected_effect, meters_before) as
    Python: it arrives as text; None or unreadable text is ``empty``."""
    if value is None:
        return empty
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return empty
    return value


def answers(db: Database, implicit: bool = True) -> list[dict[str, Any]]:
    """Every answer with its recommendation, oldest first: the person's explicit answers
    (``source`` 'explicit', confidence 1), and with ``implicit`` what the data said
    (``answers_implicit``: source 'implicit' or 'calendar', with its confidence and evidence)
    for the recommendations the person did not answer: an explicit answer always wins."""
    cur = db.con.execute(
        "SELECT r.id, r.action, f.response, r.local_day, r.slot, f.\"at\", r.meters_before, r.context FROM feedback f "
        "JOIN recommendations r ON r.id = f.recommendation_id ORDER BY f.\"at\", r.id"
    )
    out = [
        {"id": i, "action": a, "response": resp, "local_day": d, "slot": s, "at": at,
         "meters_before": json.loads(m) if isinstance(m, str) else m, "source": "explicit", "confidence": 1.0,
         "evidence": [], "moved_to": None, "context": ctx}
        for i, a, resp, d, s, at, m, ctx in cur.fetchall()
    ]
    if implicit and "answers_implicit" in db.tables():
        cur = db.con.execute(
            "SELECT r.id, r.action, j.response, r.local_day, r.slot, j.\"at\", r.meters_before, j.source, "
            "j.confidence, j.evidence, j.moved_start_ts, r.context FROM answers_implicit j "
            "JOIN recommendations r ON r.id = j.recommendation_id "
            "WHERE j.recommendation_id NOT IN (SELECT recommendation_id FROM feedback) ORDER BY r.start_ts, r.id"
        )
        out += [
            {"id": i, "action": a, "response": resp, "local_day": d, "slot": s, "at": at,
             "meters_before": json.loads(m) if isinstance(m, str) else m, "source": src, "confidence": float(c),
             "evidence": json_value(ev, []), "moved_to": mv, "context": ctx}
            for i, a, resp, d, s, at, m, src, c, ev, mv, ctx in cur.fetchall()
        ]
        out.sort(key=lambda r: (r["at"], r["id"]))
    return out


# a row of recommendations ``r`` belongs to its day's latest plan (the ones made together last)
_OF_LATEST_PLAN = "r.created_at = (SELECT max(created_at) FROM recommendations q WHERE q.local_day = r.local_day)"


def recent_blocks(db: Database, lo: date, hi: date) -> list[tuple[date, str, str, str]]:
    """(local_day, slot, action, kind) of the blocks of each day's latest plan in [lo, hi]:
    what Rhythm offered lately (the week's diminishing returns, agent.day.objective)."""
    return [(d, s, a, k or "block") for d, s, a, k in db.con.execute(
        "SELECT local_day, slot, action, kind FROM recommendations r WHERE local_day BETWEEN ? AND ? AND "
        f"{_OF_LATEST_PLAN} ORDER BY local_day, start_ts NULLS LAST, id", [lo, hi]).fetchall()]


def recent_bedtimes(db: Database, lo: date, hi: date) -> list[datetime]:
    """When Rhythm suggested going to bed on each day in [lo, hi]: the start of the bedtime
    (or early night) of the day's latest plan, in time order."""
    return [t for (t,) in db.con.execute(
        "SELECT start_ts FROM recommendations r WHERE local_day BETWEEN ? AND ? "
        "AND kind IN ('bedtime', 'early_night') AND start_ts IS NOT NULL AND "
        f"{_OF_LATEST_PLAN} ORDER BY start_ts", [lo, hi]).fetchall()]


def latest_plan(db: Database, day: date) -> list[dict[str, Any]]:
    """The blocks of the latest plan stored for ``day`` (the recommendations made together
    most recently), in time order, as dicts of their columns; [] when none is stored."""
    cur = db.con.execute(
        "SELECT * FROM recommendations WHERE local_day = ? AND created_at = "
        "(SELECT max(created_at) FROM recommendations WHERE local_day = ?) "
        "ORDER BY start_ts NULLS LAST, id",
        [day, day],
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def latest_plan_day(db: Database) -> date | None:
    return db.con.execute("SELECT max(local_day) FROM recommendations").fetchone()[0]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
