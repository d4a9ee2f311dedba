"""Plain reads for judging stored plans against the stored rows (``lab/plan_check.py``,
``benchmarks/plan_quality.py``): the latest plan of a day, the events that hold time, the
main sleeps, what the person did, daily values. Read-only; every statement is here, as
STYLE rule 6 asks."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from storage.db import Database

PLAN_KEYS = ("id", "slot", "action", "start", "end", "kind", "rationale", "evidence", "effect", "created",
             "b_social", "b_morning", "b_work", "sd_social", "sd_morning", "sd_work")


def latest_plan(db: Database, day: date) -> list[dict[str, Any]]:
    """The blocks of the latest ``rhythm recommend`` run for ``day`` (one created_at), by start."""
    rows = db.con.execute(
        "SELECT id, slot, action, start_ts, end_ts, kind, rationale, evidence, expected_effect, created_at, "
        "belief_social, belief_morning, belief_work, belief_sd_social, belief_sd_morning, belief_sd_work "
        "FROM recommendations WHERE local_day = ? AND created_at = "
        "(SELECT max(created_at) FROM recommendations WHERE local_day = ?) ORDER BY start_ts", [day, day]).fetchall()
    return [dict(zip(PLAN_KEYS, r, strict=True)) for r in rows]


def events_overlapping(db: Database, lo: datetime, hi: datetime) -> list[tuple[Any, ...]]:
    """(start, end, action, title, status, transparency, self_response, all_day, event_id) of
    the stored events overlapping [lo, hi)."""
    return db.con.execute(
        "SELECT start_ts, end_ts, action, title, status, transparency, self_response, all_day, event_id "
        "FROM events WHERE end_ts > ? AND start_ts < ?", [lo, hi]).fetchall()


def events_with_action(db: Database, action: str, before: datetime) -> list[tuple[Any, ...]]:
    """(start, end, title, status, transparency, self_response, all_day, event_id) of the
    events classified as ``action`` that start before ``before``."""
    return db.con.execute(
        "SELECT start_ts, end_ts, title, status, transparency, self_response, all_day, event_id FROM events "
        "WHERE action = ? AND start_ts < ?", [action, before]).fetchall()


def main_sleeps_merged(db: Database) -> list[tuple[Any, Any, float | None]]:
    """(start, end, minutes asleep) of every main sleep as the product merges them (one source
    a day), in start order."""
    return db.con.execute("SELECT start_ts, end_ts, sleep_min FROM sleep_sessions_merged WHERE NOT is_nap "
                          "ORDER BY start_ts").fetchall()


def slot_action_days(db: Database, action: str, lo: date, hi: date) -> set[tuple[date, str]]:
    """(day, slot) whose slot action is ``action``, days [lo, hi]."""
    return {(d, s) for d, s in db.con.execute(
        "SELECT local_day, slot FROM slot_actions WHERE action = ? AND local_day BETWEEN ? AND ?",
        [action, lo, hi]).fetchall()}


def daily_sample(db: Database, metric: str, how: str = "avg") -> dict[date, float]:
    """A merged sample metric per local day: its mean (``avg``) or total (``sum``)."""
    agg = {"avg": "avg", "sum": "sum"}[how]
    return {d: float(v) for d, v in db.con.execute(
        f"SELECT local_day, {agg}(value) FROM samples_merged WHERE metric = ? GROUP BY 1", [metric]).fetchall()}


def recommend_run(db: Database, day: date) -> Any:
    """The summary (JSON text) of the latest successful ``rhythm recommend`` run for ``day``
    (``rhythm.jobs.recommend``: the blocks' ids, the plan's model and, since issue 37, the
    local model's and the planner's picks), None when there is none."""
    row = db.con.execute(
        "SELECT summary FROM runs WHERE kind = 'recommend' AND ok AND target = ? ORDER BY id DESC LIMIT 1",
        [day.isoformat()]).fetchone()
    return None if row is None else row[0]


def recommendation_models(db: Database, ids: list[int]) -> list[str]:
    """The ``model`` column of these recommendations (who chose each block)."""
    if not ids:
        return []
    return [m for (m,) in db.con.execute(
        f"SELECT model FROM recommendations WHERE id IN ({', '.join('?' for _ in ids)}) ORDER BY id",
        [int(i) for i in ids]).fetchall()]


def slot_actions_between(db: Database, lo: date, hi: date) -> list[tuple[date, str, str | None]]:
    """(local_day, slot, action) of every slot of days [lo, hi]."""
    return db.con.execute("SELECT local_day, slot, action FROM slot_actions WHERE local_day BETWEEN ? AND ? "
                          "ORDER BY local_day, slot", [lo, hi]).fetchall()
