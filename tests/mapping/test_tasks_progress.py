"""Completed tasks as progress evidence: the task signals (present, real zeros, the 7-day
window, date-only completions) and, end to end through `rhythm import` and `rhythm map`, a
person whose calendar holds no work blocks: progress sat at 0.5 on every day; with their
tasks it moves, above 0.5 on busy days and below on days with none."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from common.records import Sample
from lab.people.watch_calendar import START, ZONE, at, make_db
from mapping.features import day_signals, slot_signals
from mapping.rules import default_rules
from rhythm.derive import bundle_for, rebuild

MODEL = default_rules().model
TASK_SIGNALS = {"tasks_done", "tasks_so_far", "tasks_7d"}


def done(t: datetime, n: int = 1) -> Sample:
    return Sample("tasks", "task_completed", t, t, float(n), "count", t.date(), "tasks",
                  tz_offset_min=int(t.utcoffset().total_seconds() // 60), detail="csv")


def done_on(d: date, n: int) -> Sample:
    lo = datetime(d.year, d.month, d.day, tzinfo=ZONE)
    return Sample("tasks", "task_completed_day", lo, lo + timedelta(days=1), float(n), "count", d, "tasks",
                  tz_offset_min=60, detail="csv")


def signals(tmp_path, records, day, slot):
    db = make_db(tmp_path / "t.duckdb", records)
    b = bundle_for(db, day - timedelta(days=30), day + timedelta(days=1), ZONE)
    out = slot_signals(b, day, slot, {}, MODEL)
    db.close()
    return out, b


def test_no_tasks_no_task_signals_and_old_tasks_are_not_a_zero(tmp_path):
    d = START + timedelta(days=30)
    out, _ = signals(tmp_path, [done(at(d - timedelta(days=MODEL.tasks_coverage_days + 1), 10))], d, 0)
    assert not TASK_SIGNALS & set(out)  # a task list last used 15 days ago says nothing today
    out, b = signals(tmp_path / "b", [done(at(d - timedelta(days=MODEL.tasks_coverage_days), 10))], d, 0)
    assert out["tasks_done"] == 0 and out["tasks_so_far"] == 0 and out["tasks_7d"] == 0  # a real zero
    assert b.wearable_days == set() and "exercise_min" not in out  # tasks are not a wearable


def test_slots_so_far_and_the_seven_days_that_end_with_the_slot(tmp_path):
    d = START + timedelta(days=20)
    week_ago = d - timedelta(days=7)
    recs = [
        done(at(week_ago, 17.99)),  # 17:59 a week ago: before the afternoon's 7-day window
        done(at(week_ago, 18.0)),  # 18:00 a week ago: inside it
        done(at(d, 9), 2),  # two ticked off at 09:00
        done(at(d, 17.99)),
        done(at(d, 18.0)),  # the evening
        done(at(d, 26.0)),  # 02:00 the next day: this day's night
        done_on(d - timedelta(days=1), 4),  # yesterday, time unknown
        done_on(d, 5),  # today, time unknown: counts once the day is over (the night slot)
    ]
    db = make_db(tmp_path / "w.duckdb", recs)
    b = bundle_for(db, d - timedelta(days=10), d + timedelta(days=1), ZONE)
    got = {s: {k: v for k, v in slot_signals(b, d, s, {}, MODEL).items() if k in TASK_SIGNALS} for s in range(4)}
    db.close()
    assert got[0] == {"tasks_done": 2, "tasks_so_far": 2, "tasks_7d": 1 + 1 + 4 + 2}  # a week ago from 12:00
    assert got[1] == {"tasks_done": 1, "tasks_so_far": 3, "tasks_7d": 1 + 4 + 3}  # from 18:00 a week ago
    assert got[2] == {"tasks_done": 1, "tasks_so_far": 4, "tasks_7d": 4 + 4}
    assert got[3] == {"tasks_done": 1, "tasks_so_far": 4 + 1 + 5, "tasks_7d": 4 + 4 + 1 + 5}
    assert day_signals(b, d, MODEL).keys().isdisjoint(TASK_SIGNALS)


def test_no_weekly_count_before_the_list_is_a_week_old(tmp_path):
    d = START + timedelta(days=20)
    out, _ = signals(tmp_path, [done(at(d - timedelta(days=5), 10), 3)], d, 2)
    assert out["tasks_so_far"] == 0 and "tasks_7d" not in out  # 3 tasks in 6 days is not a week
    out, _ = signals(tmp_path / "b", [done(at(d - timedelta(days=6), 10), 3)], d, 2)
    assert out["tasks_7d"] == 3


def test_tasks_alone_make_progress_and_nothing_else(tmp_path):
    recs = [done(at(START + timedelta(days=i), 10 + i % 8)) for i in range(20)]
    db = make_db(tmp_path / "a.duckdb", recs)
    rebuild(db, tz=ZONE, today=START + timedelta(days=19))
    _, rows = db.query("SELECT vitality, cognition, progress, serenity, connection FROM meters")
    db.close()
    assert rows and all(r[2] is not None for r in rows)
    assert all(r[0] is None and r[1] is None and r[3] is None and r[4] is None for r in rows)


# -- end to end ---------------------------------------------------------------------------------
def social_calendar(first: date, days: int, tz: ZoneInfo) -> str:
    """A calendar with people and appointments in it, but no work blocks."""
    def utc(d: date, h: float) -> str:
        t = datetime(d.year, d.month, d.day, tzinfo=tz) + timedelta(hours=h)
        return t.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")

    events = []
    for i in range(days):
        d = first + timedelta(days=i)
        for wd, h0, h1, title in ((1, 18.5, 20, "Climbing with Sam"), (4, 19, 21.5, "Dinner with friends"),
                                  (6, 12.5, 14.5, "Lunch with my parents"), (2, 8, 8.5, "Dentist")):
            if d.weekday() == wd:
                events.append(f"BEGIN:VEVENT\r\nUID:{d.isoformat()}-{wd}@rhythm.test\r\nDTSTAMP:20240101T000000Z\r\n"
                              f"SUMMARY:{title}\r\nDTSTART:{utc(d, h0)}\r\nDTEND:{utc(d, h1)}\r\nEND:VEVENT\r\n")
    return ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Rhythm tests//social//EN\r\n"
            + "".join(events) + "END:VCALENDAR\r\n")


def tasks_csv(first: date, days: int, tz: ZoneInfo, seed: int) -> tuple[str, dict[date, int]]:
    """A generic tasks CSV: each day 0 to 9 tasks (about one day in five with none)."""
    rng = random.Random(seed)
    per_day: dict[date, int] = {}
    lines = ["title,completed_at,list"]
    for i in range(days):
        d = first + timedelta(days=i)
        n = 0 if rng.random() < 0.2 else rng.choice([1, 2, 2, 3, 3, 4, 5, 6, 8, 9])
        per_day[d] = n
        for k in range(n):
            t = datetime(d.year, d.month, d.day, tzinfo=tz) + timedelta(minutes=rng.randrange(8 * 60, 22 * 60))
            lines.append(f'"Task {i}-{k}, private",{t.isoformat()},Work')
    return "\n".join(lines) + "\n", per_day


@pytest.mark.parametrize("seed, zone", [(1, "Europe/Berlin"), (2, "America/Chicago"), (3, "Asia/Kolkata")])
def test_progress_moves_with_the_tasks_of_a_person_without_work_blocks(rhythm_home, run_cli, tmp_path, seed, zone):
    tz = ZoneInfo(zone)
    first, days = date(2024, 2, 5), 56
    assert run_cli("config", "set", "timezone", zone)[0] == 0
    ics = tmp_path / "social.ics"
    ics.write_text(social_calendar(first, days, tz))
    assert run_cli("import", "ics", ics)[0] == 0
    assert run_cli("map")[0] == 0

    def day_progress() -> dict[date, float]:
        code, out, err = run_cli("sql", "--json", "SELECT local_day AS d, avg(progress) AS p, count(progress) AS n "
                                                  "FROM meters GROUP BY 1 ORDER BY 1")
        assert code == 0, err
        return {date.fromisoformat(r["d"]): r["p"] for r in json.loads(out) if r["n"] == 4}

    before = day_progress()
    settled = [p for d, p in before.items() if d >= first + timedelta(days=7)]
    assert len(settled) > 40 and all(p == pytest.approx(0.5) for p in settled)  # the issue: flat

    text, per_day = tasks_csv(first, days, tz, seed)
    path = tmp_path / "tasks.csv"
    path.write_text(text)
    code, out, err = run_cli("import", "tasks", path, "--json")
    assert code == 0, err
    assert run_cli("map")[0] == 0
    after = day_progress()
    judged = [d for d in per_day if d >= first + timedelta(days=10) and d in after]
    busy = sorted(per_day[d] for d in judged)[int(0.75 * len(judged))]
    many = [d for d in judged if per_day[d] >= max(busy, 3)]
    none = [d for d in judged if per_day[d] == 0]
    assert len(many) >= 5 and len(none) >= 4
    assert all(after[d] > 0.5 for d in many), {d: (per_day[d], after[d]) for d in many}
    assert all(after[d] < 0.5 for d in none), {d: (per_day[d], after[d]) for d in none}
    counts = np.array([per_day[d] for d in judged], dtype=float)
    progress = np.array([after[d] for d in judged])
    assert np.corrcoef(np.argsort(np.argsort(counts)), np.argsort(np.argsort(progress)))[0, 1] > 0.8

    code, out, _ = run_cli("sql", "--json", f"SELECT evidence FROM meters WHERE local_day = '{many[0]}' "
                                            "AND slot = 'evening'")
    evidence = json.loads(out)[0]["evidence"]
    ev = json.loads(evidence) if isinstance(evidence, str) else evidence
    assert TASK_SIGNALS <= set(ev["progress"]["signals"]) and "focus_min" in ev["progress"]["signals"]
    assert "private" not in json.dumps(ev)  # task titles never reach the meters
