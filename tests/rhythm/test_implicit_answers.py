"""Answers without typing (issue 38), through the real product: the busy week's person, a
stored plan, what her devices and calendar then stored, `rhythm map`, and the loopback
Google Calendar for the blocks pushed with `rhythm plan push google`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.rhythm_blocks import is_rhythm_event_id
from rhythm import jobs
from rhythm.settings import load_settings
from storage import implicit, open_db, plans
from tests.rhythm import test_plan_writeback as writeback
from tests.rhythm.test_plan_writeback import NOW, PRIMARY, WEDNESDAY, q, rhythm_events

person = writeback.person  # the busy week's person, mapped (a fixture)
google = writeback.google  # ... with her loopback Google Calendar (a fixture)

LATER = NOW + timedelta(days=2)
START = (NOW + timedelta(days=1)).replace(hour=7, minute=0)  # Thursday 07:00: nothing else then


def block_of(plan, action: str | None = None):
    slots = [s for s in plan.slots if s.start is not None and (action is None or s.action == action)]
    return slots[0] if slots else None


def add_exercise_block(settings, start, minutes: int = 45) -> int:
    with open_db(settings.database) as db, db.transaction():
        (rid,) = plans.insert_recommendations(db, [{
            "created_at": NOW + timedelta(days=5), "local_day": start.date(), "slot": "evening", "action": "EXERCISE",
            "belief_social": None, "belief_morning": None, "belief_work": None, "belief_sd_social": None,
            "belief_sd_morning": None, "belief_sd_work": None, "rationale": "", "model": "day-planner",
            "start_ts": start, "end_ts": start + timedelta(minutes=minutes), "kind": "block"}])
    return rid


def add_workout(settings, wid: str, start, minutes: int) -> None:
    with open_db(settings.database) as db, db.transaction():
        db.upsert("workouts", [{"source": "whoop", "workout_id": wid, "start_ts": start,
                                "end_ts": start + timedelta(minutes=minutes), "local_day": start.date(),
                                "sport": "running", "duration_min": float(minutes)}])


def stored(settings) -> dict[int, tuple]:
    return {r[0]: r[1:] for r in q(settings, "SELECT recommendation_id, response, source, confidence, evidence, "
                                             "moved_start_ts FROM answers_implicit")}


def test_a_workout_near_the_block_is_an_accept_stored_beside_explicit_answers(person):
    start = START
    rid = add_exercise_block(person, start)
    add_workout(person, "w-earlier", start - timedelta(days=3), 40)  # her strap logs workouts
    add_workout(person, "w-run", start + timedelta(minutes=12), 38)
    summary = jobs.map_data(person, now=LATER)
    assert summary["answers"]["accepted"] >= 1
    response, source, conf, evidence, _ = stored(person)[rid]
    assert (response, source) == ("accept", "implicit") and conf >= 0.9
    assert "whoop workout 07:12-07:50" in evidence
    with open_db(person.database, read_only=True) as db:
        mine = [a for a in plans.answers(db) if a["id"] == rid]
        assert [(a["response"], a["source"]) for a in mine] == [("accept", "implicit")]
        assert [a for a in plans.answers(db, implicit=False) if a["id"] == rid] == []
    jobs.map_data(person, now=LATER)  # re-running never duplicates
    assert len([r for r in stored(person) if r == rid]) == 1

    # an explicit answer always wins over what the data said
    jobs.feedback(person, rid, "ignore")
    with open_db(person.database, read_only=True) as db:
        mine = [a for a in plans.answers(db) if a["id"] == rid]
    assert [(a["response"], a["source"], a["confidence"]) for a in mine] == [("ignore", "explicit", 1.0)]


def test_no_workout_after_a_block_is_an_ignore_and_a_far_one_is_not_the_blocks(person):
    offsite = add_exercise_block(person, NOW.replace(hour=17, minute=15))  # inside her offsite: doing that instead
    start = START
    rid = add_exercise_block(person, start)
    add_workout(person, "w-earlier", start - timedelta(days=3), 40)
    add_workout(person, "w-late", start + timedelta(hours=3), 30)  # 2 h 15 after its end: not the block's
    jobs.map_data(person, now=LATER)
    assert stored(person)[rid][:2] == ("ignore", "implicit")
    assert offsite not in stored(person)  # another useful action instead is no rejection


def test_with_the_setting_off_nothing_is_stored(person, monkeypatch):
    monkeypatch.setenv("RHYTHM_IMPLICIT_ANSWERS", "false")
    settings = load_settings()
    assert settings.implicit_answers is False
    start = START
    add_exercise_block(settings, start)
    add_workout(settings, "w-run", start + timedelta(minutes=12), 38)
    assert "answers" not in jobs.map_data(settings, now=LATER)
    assert q(settings, "SELECT count(*) FROM answers_implicit") == [(0,)]


# -- the calendar as the answer surface ---------------------------------------------------------
def _move(g, ev: dict, minutes: int) -> None:
    from datetime import datetime

    moved = dict(ev)
    for part in ("start", "end"):
        t = datetime.fromisoformat(ev[part]["dateTime"]) + timedelta(minutes=minutes)
        moved[part] = {**ev[part], "dateTime": t.isoformat()}
    g.put(PRIMARY, moved)


def test_deleted_block_is_an_ignore_and_a_moved_one_a_time_preference(google):
    g, settings = google
    plan = jobs.recommend(settings, WEDNESDAY, now=NOW)
    blocks = [s for s in plan.slots if s.start is not None and s.action != "SLEEP"]
    assert len(blocks) >= 2
    jobs.push_google(settings, WEDNESDAY, now=NOW)
    assert jobs.sync(settings, ["google"])["ok"]
    mine = rhythm_events(g)
    # delete a block her own events say nothing about (a deep-work block under her "Focus time"
    # hold would be read as done anyway), move another
    gone = next(s for s in blocks if s.action not in ("DEEP_WORK", "ADMIN_WORK", "LEARN"))
    moved = next(s for s in blocks if s is not gone)
    gone_ev, moved_ev = mine[f"{WEDNESDAY.isoformat()}-{gone.slot}"], mine[f"{WEDNESDAY.isoformat()}-{moved.slot}"]
    g.cancel(PRIMARY, gone_ev["id"])  # the person deletes one block ...
    _move(g, moved_ev, 90)  # ... and drags another 90 minutes later
    assert jobs.sync(settings, ["google"])["ok"]
    jobs.map_data(settings, now=LATER)
    got = stored(settings)
    assert got[gone.id][:2] == ("ignore", "calendar") and "deleted" in got[gone.id][3]
    response, source, _, evidence, moved_start = got[moved.id]
    assert (response, source) == ("accept", "calendar")
    assert moved_start == moved.start + timedelta(minutes=90) and "moved" in evidence
    # ... learned as a time preference: the next plan places that action at the new time
    from rhythm.plan_day import preferred_times

    with open_db(settings.database, read_only=True) as db:
        prefs = preferred_times(plans.answers(db), moved.start.tzinfo)
    assert prefs[moved.action] == (moved.start + timedelta(minutes=90)).time()
    # the person's own events (one even titled "Exercise (Rhythm)") are never read as Rhythm's
    with open_db(settings.database, read_only=True) as db:
        assert {p["event_id"] for p in implicit.pushed(db)} == {e["id"] for e in mine.values()}
    assert not is_rhythm_event_id("lookalike01")
    assert q(settings, "SELECT count(*) FROM answers_implicit WHERE source = 'calendar'") == [(2,)]


def test_an_unsynced_calendar_says_nothing_about_a_missing_block(google):
    g, settings = google
    plan = jobs.recommend(settings, WEDNESDAY, now=NOW)
    jobs.push_google(settings, WEDNESDAY, now=NOW)
    for ev in rhythm_events(g).values():
        g.cancel(PRIMARY, ev["id"])  # deleted, but Rhythm never synced the calendar back
    jobs.map_data(settings, now=LATER)
    assert q(settings, "SELECT count(*) FROM answers_implicit WHERE source = 'calendar'") == [(0,)]
    assert plan.slots


def _their_calendar(exported, tmp_path, name: str, drop: str | None = None, move: tuple[str, int] | None = None):
    """The exported plan as it comes back in the person's own calendar export: imported into
    their calendar "Mine", block ``drop`` deleted, block ``move`` dragged by minutes, and an
    event of their own beside them."""
    import icalendar

    cal = icalendar.Calendar.from_ical(exported.read_bytes())
    out = icalendar.Calendar()
    for k in ("prodid", "version"):
        out.add(k, cal.get(k))
    out.add("x-wr-calname", "Mine")
    for ev in cal.walk("VEVENT"):
        uid = str(ev.get("uid"))
        if drop and uid.startswith(f"rhythm-{drop}@"):
            continue
        if move and uid.startswith(f"rhythm-{move[0]}@"):
            for k in ("dtstart", "dtend"):
                t = ev.decoded(k) + timedelta(minutes=move[1])
                del ev[k]
                ev.add(k, t)
        out.add_component(ev)
    own = icalendar.Event()
    own.add("uid", "own-1@example.org")
    own.add("summary", "Exercise (Rhythm)")  # hers, whatever its title says
    own.add("dtstart", (NOW + timedelta(days=1)).replace(hour=7, minute=15))
    own.add("dtend", (NOW + timedelta(days=1)).replace(hour=8, minute=0))
    out.add_component(own)
    path = tmp_path / name
    path.write_bytes(out.to_ical())
    return path


def test_an_exported_block_deleted_or_moved_in_the_persons_calendar_is_read_back_from_ics(person, tmp_path):
    """`rhythm plan export --ics`, the file imported into her calendar app, her calendar
    exported again and `rhythm import ics`: a block deleted there is an ignore, a moved one an
    accept at the new time (a time preference); the first import still had the deleted block,
    the second has not (a calendar file is a snapshot)."""
    from rhythm.plan_export import export_ics

    plan = jobs.recommend(person, WEDNESDAY, now=NOW)
    blocks = [s for s in plan.slots if s.start is not None and s.action not in ("SLEEP", "DEEP_WORK", "ADMIN_WORK")]
    assert len(blocks) >= 1
    gone = blocks[0]
    moved = next(s for s in plan.slots if s.start is not None and s is not gone and s.kind == "block")
    exported = tmp_path / "plan.ics"
    export_ics(person, exported, WEDNESDAY, plan=jobs.recommend, now=NOW)
    day = WEDNESDAY.isoformat()
    jobs.import_file(person, "ics", _their_calendar(exported, tmp_path, "mine-1.ics"))
    jobs.map_data(person, now=LATER)
    assert not {r for r, v in stored(person).items() if v[1] == "calendar"}  # all there: nothing to read yet
    move = (f"{day}-{moved.slot}", 90)
    jobs.import_file(person, "ics", _their_calendar(exported, tmp_path, "mine-2.ics", drop=f"{day}-{gone.slot}",
                                                    move=move))
    jobs.map_data(person, now=LATER)
    got = stored(person)
    assert got[gone.id][:2] == ("ignore", "calendar") and "deleted" in got[gone.id][3]
    response, source, _, evidence, moved_start = got[moved.id]
    assert (response, source) == ("accept", "calendar") and "moved" in evidence
    assert moved_start == moved.start + timedelta(minutes=90)
    # her own event is never read as Rhythm's, and nothing of hers was changed
    assert q(person, "SELECT status FROM events WHERE event_id = 'own-1@example.org'") == [("confirmed",)]


def test_a_calendar_file_without_rhythms_blocks_says_nothing_about_them(person, tmp_path):
    """Exported, but the calendar imported is one the plan never went into: no block reads as
    deleted."""
    from rhythm.plan_export import export_ics

    jobs.recommend(person, WEDNESDAY, now=NOW)
    export_ics(person, tmp_path / "plan.ics", WEDNESDAY, plan=jobs.recommend, now=NOW)
    other = tmp_path / "other.ics"
    other.write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\nX-WR-CALNAME:Work\r\n"
                     "BEGIN:VEVENT\r\nUID:w1@example.org\r\nDTSTAMP:20251118T080000Z\r\n"
                     "DTSTART:20251120T080000Z\r\nDTEND:20251120T090000Z\r\nSUMMARY:Standup\r\nEND:VEVENT\r\n"
                     "END:VCALENDAR\r\n")
    jobs.import_file(person, "ics", other)
    jobs.map_data(person, now=LATER)
    assert not [v for v in stored(person).values() if v[1] == "calendar"]


@pytest.mark.parametrize("flag", ["false", "0"])
def test_the_setting_reads_as_a_bool(monkeypatch, rhythm_home, flag):
    monkeypatch.setenv("RHYTHM_IMPLICIT_ANSWERS", flag)
    assert load_settings().implicit_answers is False


# -- one place to see and correct yesterday -----------------------------------------------------
def test_review_walks_the_unknown_blocks_and_stores_explicit_answers(person, run_cli, monkeypatch):
    import io

    known = add_exercise_block(person, START)
    add_workout(person, "w-earlier", START - timedelta(days=3), 40)
    add_workout(person, "w-run", START + timedelta(minutes=12), 38)
    unknown = add_exercise_block(person, START.replace(hour=12))  # no data after it: unknown
    with open_db(person.database) as db, db.transaction():
        db.con.execute("UPDATE recommendations SET slot = 'afternoon' WHERE id = ?", [unknown])
    jobs.map_data(person, now=LATER)
    monkeypatch.setattr("sys.stdin", io.StringIO("x\ni\n"))  # a wrong key is asked again
    code, out, err = run_cli("feedback", "--review")
    assert code == 0, err
    assert f"#{unknown}" in out and f"#{known} " not in out  # the sure one is not asked
    assert "1 answer stored" in out
    assert q(person, "SELECT recommendation_id, response FROM feedback") == [(unknown, "ignore")]
    code, out, _ = run_cli("feedback", "--review")
    assert "nothing to review" in out
    code, _, err = run_cli("feedback")
    assert code != 0 and "--review" in err


def test_review_lines_say_what_happened_and_why(person):
    from rhythm.implicit import review, review_line

    rid = add_exercise_block(person, START)
    add_workout(person, "w-earlier", START - timedelta(days=3), 40)
    add_workout(person, "w-run", START + timedelta(minutes=12), 38)
    jobs.map_data(person, now=LATER)
    with open_db(person.database, read_only=True) as db:
        rows = review(db, START.date(), START.date(), tz=START.tzinfo)
    line = review_line(next(r for r in rows if r["id"] == rid))
    assert line.startswith("EXERCISE 07:00: done, whoop workout 07:12-07:50") and "implicit" in line


def test_recommend_shows_yesterdays_blocks_with_what_happened(person, run_cli):
    rid = add_exercise_block(person, NOW.replace(hour=21, minute=15))  # after choir, Wednesday
    add_workout(person, "w-earlier", NOW - timedelta(days=3), 40)
    add_workout(person, "w-run", NOW.replace(hour=21, minute=20), 30)
    jobs.map_data(person, now=LATER)
    code, out, err = run_cli("recommend", "--date", (WEDNESDAY + timedelta(days=1)).isoformat())
    assert code == 0, err
    assert "Yesterday" in out and f"#{rid} EXERCISE 21:15: done, whoop workout 21:20-21:50" in out


def test_the_mcp_review_lists_the_blocks_with_their_answers(person):
    from rhythm.mcp import tools

    rid = add_exercise_block(person, START)
    add_workout(person, "w-earlier", START - timedelta(days=3), 40)
    add_workout(person, "w-run", START + timedelta(minutes=12), 38)
    unknown = add_exercise_block(person, START.replace(hour=12))
    with open_db(person.database) as db, db.transaction():
        db.con.execute("UPDATE recommendations SET slot = 'afternoon' WHERE id = ?", [unknown])
    jobs.map_data(person, now=LATER)
    got = tools.review_answers(person, START.date().isoformat())
    by_id = {b.id: b for b in got.blocks}
    assert (by_id[rid].status, by_id[rid].source, by_id[rid].doubtful) == ("done", "implicit", False)
    assert (by_id[unknown].status, by_id[unknown].source, by_id[unknown].doubtful) == ("unknown", None, True)
    assert [b.id for b in tools.review_answers(person, START.date().isoformat(), doubtful_only=True).blocks] == [unknown]


def test_rhythm_map_says_how_many_answers_it_read(person, run_cli):
    add_exercise_block(person, START)
    add_workout(person, "w-earlier", START - timedelta(days=3), 40)
    add_workout(person, "w-run", START + timedelta(minutes=12), 38)
    code, out, err = run_cli("map")
    assert code == 0, err
    assert "answers from your data: 1 done, 0 not done" in out


def test_config_set_turns_implicit_answers_off(rhythm_home, run_cli):
    code, _, err = run_cli("config", "set", "implicit_answers", "false")
    assert code == 0, err
    assert load_settings().implicit_answers is False


def _bench(monkeypatch):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "implicit.py"
    spec = importlib.util.spec_from_file_location("bench_implicit", path)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_implicit", bench)  # its dataclasses look themselves up
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_the_benchmark_runs_a_person_through_the_product(monkeypatch):
    bench = _bench(monkeypatch)
    got = bench.main(bench.Args(people=1, days=4, history_days=21, seed=3, modes=("implicit",), google_every=0))
    classes = got["implicit"]["classes"]
    assert sum(c["blocks"] for c in classes.values()) >= 8
    judged = [c for c in classes.values() if c["judged"]]
    assert judged and all(c["precision"] >= 0.5 for c in judged)


@pytest.mark.slow
def test_the_benchmark_person_acts_on_her_blocks_in_the_loopback_google_calendar(monkeypatch):
    """Plans pushed each morning, blocks deleted and dragged there, the calendar synced before
    `rhythm map`: the deletions and moves come back as answers from the calendar."""
    bench = _bench(monkeypatch)
    got = bench.main(bench.Args(people=1, days=5, history_days=21, seed=1, modes=("implicit",), google_every=1))
    g = got["implicit"]["google"]
    assert g["people"] == 1 and g["deleted"] + g["moved"] >= 2
    judged = [c for c in g["classes"].values() if c["judged"]]
    assert judged and all(c["precision"] >= 0.8 for c in judged)
    # a deleted block is judged: recall is not bounded by what devices see
    assert sum(c["judged"] for c in judged) >= sum(c["blocks"] for c in g["classes"].values()) * 0.6
