"""Answers without typing (issue 38): the rows the judge reads, the judgements it stores
(``answers_implicit``), and Rhythm's blocks as pushed to a calendar (``pushed_blocks``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from common.rhythm_blocks import GOOGLE_ID_PREFIX, RHYTHM_UID_SUFFIX
from storage.db import Database

#: ``pushed_blocks.calendar_id`` of blocks written to an .ics file (`rhythm plan export --ics`):
#: they come back, if at all, through `rhythm import ics` of the person's calendar.
ICS_CALENDAR = "ics"
#: The stored ids of Rhythm's own events (common.rhythm_blocks.is_rhythm_event_id, in SQL).
_RHYTHM_ID_SQL = f"(split_part(event_id, '/', 1) LIKE '%{RHYTHM_UID_SUFFIX}' OR event_id LIKE '{GOOGLE_ID_PREFIX}%')"


def blocks_to_judge(db: Database, lo: date, hi: date) -> list[dict[str, Any]]:
    """The latest recommendation of each (day, slot) of [lo, hi] that has times."""
    cur = db.con.execute(
        "SELECT id, action, kind, start_ts, end_ts, local_day, slot FROM ("
        " SELECT *, row_number() OVER (PARTITION BY local_day, slot ORDER BY created_at DESC, id DESC) AS k"
        " FROM recommendations WHERE local_day BETWEEN ? AND ? AND start_ts IS NOT NULL AND end_ts IS NOT NULL"
        ") WHERE k = 1 ORDER BY start_ts",
        [lo, hi],
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def seen_rows(db: Database, start: datetime, end: datetime) -> dict[str, list[tuple[Any, ...]]]:
    """What was stored between ``start`` and ``end`` (UTC instants), as plain rows:
    workouts (start, end, sport, source), sleeps (start, end, is_nap, source), events
    (start, end, action, event_id: the person's and Rhythm's, told apart by the caller),
    steps (start, end, value), tasks (start)."""
    args = [start, end]
    rows: dict[str, list[tuple[Any, ...]]] = {}
    rows["workouts"] = db.con.execute(
        "SELECT start_ts, end_ts, sport, source FROM workouts_merged WHERE end_ts >= ? AND start_ts <= ? "
        "ORDER BY start_ts", args).fetchall()
    rows["sleeps"] = db.con.execute(
        "SELECT start_ts, end_ts, is_nap, source FROM sleep_sessions_merged WHERE end_ts >= ? AND start_ts <= ? "
        "ORDER BY start_ts", args).fetchall()
    rows["events"] = db.con.execute(
        "SELECT start_ts, end_ts, action, event_id, source FROM events WHERE NOT all_day AND status <> 'cancelled' "
        "AND end_ts >= ? AND start_ts <= ? ORDER BY start_ts", args).fetchall()
    rows["steps"] = db.con.execute(
        "SELECT start_ts, end_ts, value FROM samples_merged WHERE metric = 'steps' AND end_ts >= ? AND start_ts <= ?",
        args).fetchall()
    rows["tasks"] = db.con.execute(
        "SELECT start_ts FROM samples WHERE metric = 'task_completed' AND start_ts BETWEEN ? AND ?", args).fetchall()
    return rows


def data_until(db: Database) -> datetime | None:
    """The end of the latest wearable record stored (not calendar, not tasks)."""
    vals = [
        db.con.execute("SELECT max(end_ts) FROM samples WHERE source NOT IN ('calendar', 'tasks')").fetchone()[0],
        db.con.execute("SELECT max(end_ts) FROM sleep_sessions").fetchone()[0],
        db.con.execute("SELECT max(end_ts) FROM workouts").fetchone()[0],
    ]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def pushed(db: Database) -> list[dict[str, Any]]:
    cur = db.con.execute("SELECT * FROM pushed_blocks")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def calendar_synced_at(db: Database, source: str = "google") -> datetime | None:
    """When the source last synced without an error."""
    return db.con.execute(
        "SELECT max(updated_at) FROM sync_state WHERE source = ? AND last_error IS NULL", [source]
    ).fetchone()[0]


def ics_read_at(db: Database) -> datetime | None:
    """When an .ics calendar was last imported without an error."""
    return db.con.execute(
        "SELECT max(finished_at) FROM runs WHERE kind = 'import' AND source = 'ics' AND ok").fetchone()[0]


def forget_missing_rhythm_events(db: Database, calendar_ids: Sequence[str], present: Sequence[str],
                                 start: datetime, end: datetime) -> int:
    """An .ics calendar is a snapshot: Rhythm's own events of ``calendar_ids`` stored from an
    earlier import, inside [start, end] and not in this file (``present``: their ids), were
    deleted by the person since; they are marked cancelled. Only Rhythm's events are touched.
    Returns how many."""
    if not calendar_ids:
        return 0
    cal = ", ".join("?" for _ in calendar_ids)
    keep = f"AND event_id NOT IN ({', '.join('?' for _ in present)})" if present else ""
    return len(db.con.execute(
        f"UPDATE events SET status = 'cancelled' WHERE source = 'calendar' AND calendar_id IN ({cal}) AND "
        f"{_RHYTHM_ID_SQL} AND status <> 'cancelled' AND start_ts BETWEEN ? AND ? {keep} RETURNING event_id",
        [*calendar_ids, start, end, *present]).fetchall())


def calendar_read_at(db: Database) -> datetime | None:
    """When the person's calendar was last read: an .ics import or a Google sync that worked."""
    vals = [ics_read_at(db), calendar_synced_at(db)]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def record_pushed(db: Database, calendar_id: str, blocks: Iterable[Mapping[str, Any]], removed: Sequence[str],
                  at: datetime) -> None:
    """After a push: the blocks now in the calendar (key, recommendation_id, event_id, start,
    end), and the keys Rhythm itself removed (a replan: not the person's doing)."""
    for key in removed:
        db.con.execute("DELETE FROM pushed_blocks WHERE calendar_id = ? AND block_key = ?", [calendar_id, key])
    rows = [{"calendar_id": calendar_id, "block_key": b["key"], "recommendation_id": b["recommendation_id"],
             "event_id": b["event_id"], "start_ts": b["start"], "end_ts": b["end"], "pushed_at": at}
            for b in blocks if b.get("recommendation_id") is not None and b.get("event_id")]
    if rows:
        db.upsert("pushed_blocks", rows)


def replace_judgements(db: Database, ids: Sequence[int], judgements: Iterable[Mapping[str, Any]],
                       at: datetime | None = None) -> int:
    """Replace the implicit answers of recommendations ``ids`` (judged again) with
    ``judgements`` (dicts: recommendation_id, response, source, evidence list, confidence,
    moved or None). Returns how many are stored."""
    at = at or datetime.now(UTC)
    if ids:
        db.con.execute(
            f"DELETE FROM answers_implicit WHERE recommendation_id IN ({', '.join('?' for _ in ids)})", list(ids))
    n = 0
    for j in judgements:
        moved = j.get("moved")
        db.con.execute(
            "INSERT INTO answers_implicit VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [j["recommendation_id"], j["response"], j["source"], json.dumps(list(j["evidence"])),
             float(j["confidence"]), moved[0] if moved else None, moved[1] if moved else None, at],
        )
        n += 1
    return n


def implicit_answers(db: Database) -> list[dict[str, Any]]:
    cur = db.con.execute("SELECT * FROM answers_implicit ORDER BY recommendation_id")
    names = [d[0] for d in cur.description]
    out = []
    for r in cur.fetchall():
        row = dict(zip(names, r, strict=True))
        row["evidence"] = json.loads(row["evidence"]) if isinstance(row["evidence"], str) else row["evidence"]
        out.append(row)
    return out


def judge_window(today: date, days: int = 30) -> tuple[date, date]:
    return today - timedelta(days=days), today


def answered_blocks(db: Database, lo: date, hi: date) -> list[dict[str, Any]]:
    """The latest block of each (day, slot) of [lo, hi] with the person's answer (``explicit``)
    and what the data said (``response``, ``source``, ``confidence``, ``evidence``, moved)."""
    cur = db.con.execute(
        "SELECT r.id, r.local_day, r.slot, r.action, r.kind, r.start_ts, r.end_ts, f.response AS explicit, "
        "j.response, j.source, j.confidence, j.evidence, j.moved_start_ts, j.moved_end_ts FROM ("
        " SELECT *, row_number() OVER (PARTITION BY local_day, slot ORDER BY created_at DESC, id DESC) AS k"
        " FROM recommendations WHERE local_day BETWEEN ? AND ? AND start_ts IS NOT NULL) r "
        "LEFT JOIN feedback f ON f.recommendation_id = r.id "
        "LEFT JOIN answers_implicit j ON j.recommendation_id = r.id WHERE r.k = 1 ORDER BY r.start_ts",
        [lo, hi],
    )
    names = [d[0] for d in cur.description]
    out = []
    for r in cur.fetchall():
        row = dict(zip(names, r, strict=True))
        row["evidence"] = json.loads(row["evidence"]) if isinstance(row["evidence"], str) else (row["evidence"] or [])
        out.append(row)
    return out


def last_planned_day(db: Database, upto: date) -> date | None:
    return db.con.execute("SELECT max(local_day) FROM recommendations WHERE local_day <= ?", [upto]).fetchone()[0]
