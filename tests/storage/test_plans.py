"""storage.plans: what Rhythm offered lately, read back from the recommendations table."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from storage import open_db
from storage.plans import insert_recommendations, recent_bedtimes

D = date(2025, 3, 10)


def rec(day: date, slot: str, action: str, kind: str, start: datetime, created: datetime) -> dict:
    return {"created_at": created, "local_day": day, "slot": slot, "action": action, "model": "bayes",
            "kind": kind, "start_ts": start, "end_ts": start + timedelta(hours=8)}


def t(day: date, h: int, m: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, h, m, tzinfo=UTC)


def test_recent_bedtimes_are_each_days_latest_plans_bedtime_or_early_night(tmp_path):
    d1, d2, d3 = D, D + timedelta(days=1), D + timedelta(days=2)
    with open_db(tmp_path / "r.duckdb") as db, db.transaction():
        insert_recommendations(db, [
            rec(d1, "night", "SLEEP", "bedtime", t(d1, 22, 30), t(d1, 6)),
            rec(d1, "night", "SLEEP", "bedtime", t(d1, 23, 0), t(d1, 12)),  # replanned at noon: this one
            rec(d1, "afternoon", "SLEEP", "nap", t(d1, 14), t(d1, 12)),  # a nap is not a bedtime
            rec(d2, "night", "SLEEP", "early_night", t(d2, 21, 30), t(d2, 6)),
            rec(d3, "night", "SLEEP", "bedtime", t(d3, 23, 15), t(d3, 6)),
        ])
    with open_db(tmp_path / "r.duckdb", read_only=True) as db:
        got = recent_bedtimes(db, d1, d2)
    assert got == [t(d1, 23, 0), t(d2, 21, 30)]
    assert all(x.tzinfo is not None for x in got)
