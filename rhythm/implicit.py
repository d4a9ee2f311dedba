"""Answers without typing: stored rows through the judge (mapping/judge.py, pure) into
``answers_implicit`` (storage/implicit.py). Runs inside ``rhythm map`` (and so after every
sync or import that maps) unless the setting ``implicit_answers`` is off."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from common.rhythm_blocks import is_rhythm_event_id
from mapping.judge import Block, Pushed, Seen, Span, judge
from storage import implicit as stored
from storage.db import Database

JUDGE_DAYS = 30  # blocks of the last month are judged again on every map (late data counts)


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def seen_for(db: Database, blocks: list[Block]) -> Seen:
    """What the judge needs around ``blocks``, from the database."""
    lo = min(b.start for b in blocks) - timedelta(days=stored_days())
    hi = max(b.end for b in blocks) + timedelta(hours=12)
    rows = stored.seen_rows(db, lo, hi)
    mine = [r for r in rows["events"] if not is_rhythm_event_id(r[3])]
    rhythm = {str(r[3]): Span(_aware(r[0]), _aware(r[1]), r[2]) for r in rows["events"]
              if is_rhythm_event_id(r[3]) and r[4] in ("google", "calendar")}
    rows_pushed = stored.pushed(db)
    read_at: dict[str, datetime | None] = {"google": stored.calendar_synced_at(db), "ics": stored.ics_read_at(db)}
    for kind in read_at:
        mine_pushed = [p for p in rows_pushed if _kind(p["calendar_id"]) == kind]
        if not any(p["event_id"] in rhythm for p in mine_pushed):
            # none of Rhythm's blocks written there has come back: the calendar written to is
            # not the one read (or not read yet), so a missing event says nothing
            read_at[kind] = None
    pushed = {int(p["recommendation_id"]): Pushed(int(p["recommendation_id"]), p["event_id"], _aware(p["start_ts"]),
                                                  _aware(p["end_ts"]), _aware(p["pushed_at"]),
                                                  _aware(r) if (r := read_at[_kind(p["calendar_id"])]) else None)
              for p in rows_pushed}
    until = stored.data_until(db)
    read = stored.calendar_read_at(db)
    return Seen(
        workouts=[Span(_aware(s), _aware(e), sport, source=src) for s, e, sport, src in rows["workouts"]],
        sleeps=[Span(_aware(s), _aware(e), "nap" if nap else "main", source=src) for s, e, nap, src in rows["sleeps"]],
        events=[Span(_aware(r[0]), _aware(r[1]), r[2]) for r in mine],
        steps=[Span(_aware(s), _aware(e), value=v) for s, e, v in rows["steps"]],
        tasks=[Span(_aware(t), _aware(t)) for (t,) in rows["tasks"]],
        data_until=_aware(until) if until else None,
        pushed=pushed,
        rhythm_events=rhythm,
        calendar_read_at=_aware(read) if read else None,
    )


def _kind(calendar_id: str) -> str:
    """Where a block went: an .ics file (read back by `rhythm import ics`) or a Google calendar."""
    return "ics" if calendar_id == stored.ICS_CALENDAR else "google"


def stored_days() -> int:
    from mapping.judge import DEVICE_WORKOUTS_DAYS

    return DEVICE_WORKOUTS_DAYS + 1


def judge_stored(db: Database, *, tz: tzinfo, today: date, now: datetime | None = None) -> dict[str, Any]:
    """Judge the blocks of the ``JUDGE_DAYS`` days up to the latest planned day whose time has passed and replace
    their implicit answers (inside the caller's transaction). Returns a summary."""
    now = now or datetime.now(UTC)
    last = stored.last_planned_day(db, today) or today  # a history planned in the past: its own month
    rows = stored.blocks_to_judge(db, last - timedelta(days=JUDGE_DAYS), today)
    blocks = [Block(int(r["id"]), r["action"], r["kind"], _aware(r["start_ts"]), _aware(r["end_ts"])) for r in rows]
    blocks = [b for b in blocks if b.end <= now]
    if not blocks:
        return {"judged": 0, "accepted": 0, "ignored": 0, "unknown": 0}
    found = judge(blocks, seen_for(db, blocks), now, tz)
    with db.transaction():
        stored.replace_judgements(db, [b.id for b in blocks], [
            {"recommendation_id": j.recommendation_id, "response": j.response, "source": j.source,
             "evidence": j.evidence, "confidence": j.confidence, "moved": j.moved} for j in found], at=now)
    acc = sum(1 for j in found if j.response == "accept")
    return {"judged": len(found), "accepted": acc, "ignored": len(found) - acc, "unknown": len(blocks) - len(found)}


DOUBTFUL = 0.7  # an implicit answer below this confidence is offered for review


def review(db: Database, lo: date, hi: date, *, tz: tzinfo, now: datetime | None = None) -> list[dict[str, Any]]:
    """The blocks of [lo, hi] whose time has passed, each with what happened and why:
    ``status`` done / not done / unknown, ``why`` (the evidence, or your answer), ``source``
    (explicit, implicit, calendar, or None), ``doubtful`` (no answer, or an implicit one below
    ``DOUBTFUL``, and not answered by the person): the ones ``rhythm feedback --review`` asks."""
    now = now or datetime.now(UTC)
    out = []
    for r in stored.answered_blocks(db, lo, hi):
        start, end = _aware(r["start_ts"]), _aware(r["end_ts"])
        if end > now:
            continue
        if r["explicit"]:
            response, source, conf, why = r["explicit"], "explicit", 1.0, ["your answer"]
        elif r["response"]:
            response, source, conf, why = r["response"], r["source"], float(r["confidence"]), list(r["evidence"])
        else:
            response, source, conf, why = None, None, 0.0, ["nothing stored tells"]
        status = {"accept": "done", "ignore": "not done", None: "unknown"}[response]
        out.append({
            "id": int(r["id"]), "local_day": r["local_day"].isoformat(), "slot": r["slot"], "action": r["action"],
            "kind": r["kind"], "start": start.astimezone(tz).isoformat(timespec="minutes"),
            "end": end.astimezone(tz).isoformat(timespec="minutes"), "status": status, "response": response,
            "source": source, "confidence": round(conf, 2), "why": why,
            "moved_to": _aware(r["moved_start_ts"]).astimezone(tz).isoformat(timespec="minutes")
            if r["moved_start_ts"] else None,
            "doubtful": source != "explicit" and conf < DOUBTFUL,
        })
    return out


def review_line(row: dict[str, Any]) -> str:
    """``EXERCISE 17:30: done, whoop workout 17:42-18:20 (implicit, 0.95)``."""
    head = f"{row['action']} {row['start'][11:16]}: {row['status']}"
    why = "; ".join(row["why"])
    src = "" if row["source"] in (None, "explicit") else f" ({row['source']}, {row['confidence']:.2f})"
    return f"{head}, {why}{src}"
