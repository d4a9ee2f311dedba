"""lab.plan_check's issue-37 judges on small hand-built plans stored in a real DuckDB (the
storage writer for events and sleeps, storage.plans for the blocks, storage.runs for the
recommend run): the most frequent action's share, a reason given twice, a short block alone
in a wide free window, and whether the local model's pick stood or was vetoed."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from common.records import Event, SleepSession
from lab.plan_check import check_day, model_ask, reason_text, top_action
from storage import open_db, plans, runs, write_records

TZ = ZoneInfo("America/New_York")
DAY = date(2025, 3, 4)
NOW = datetime(2025, 3, 4, 6, tzinfo=TZ)
CREATED = datetime(2025, 3, 4, 11, tzinfo=UTC)


def at(h: float, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(hours=h)


def block(action: str, h0: float, h1: float, rationale: str = "", evidence: tuple[str, ...] = (),
          model: str = "day-planner", slot: str = "morning") -> dict:
    return {"created_at": CREATED, "local_day": DAY, "slot": slot, "action": action, "rationale": rationale,
            "model": model, "start_ts": at(h0), "end_ts": at(h1), "kind": "bedtime" if action == "SLEEP" else "block",
            "evidence": json.dumps(list(evidence)), "expected_effect": "{}"}


def night(h0: float, h1: float, day: date = DAY) -> SleepSession:
    return SleepSession("whoop", f"s{h0}", at(h0, day), at(h1, day), day, sleep_min=(h1 - h0) * 55.0,
                        tz_offset_min=-300)


def meeting(eid: str, h0: float, h1: float) -> Event:
    return Event("calendar", "primary", eid, at(h0), at(h1), False, DAY, title="Team meeting")


def store(tmp_path, blocks: list[dict], records=()) -> tuple:
    path = tmp_path / "r.duckdb"
    with open_db(path) as db:
        write_records(db, list(records))
        ids = plans.insert_recommendations(db, blocks)
    return path, ids


def check(path, sleeps=None):
    with open_db(path, read_only=True) as db:
        return check_day(db, TZ, DAY, NOW, sleeps=sleeps)


def test_top_action_is_the_most_frequent_non_sleep_action_and_its_share():
    assert top_action(["MEDITATE", "EXERCISE", "MEDITATE", "LEARN"]) == ("MEDITATE", 0.5, 4)
    assert top_action([]) == (None, 0.0, 0)
    # a tie goes to the action first in ACTIONS (DEEP_WORK before MEDITATE)
    assert top_action(["MEDITATE", "DEEP_WORK"])[0] == "DEEP_WORK"


def test_check_day_lists_the_non_sleep_actions_of_the_stored_plan(tmp_path):
    path, _ = store(tmp_path, [block("MEDITATE", 9, 9.25), block("EXERCISE", 13, 14),
                               block("SLEEP", 22.5, 30.5, slot="night")])
    assert check(path, sleeps=[]).actions == ["MEDITATE", "EXERCISE"]


def test_the_same_rationale_without_the_times_is_a_repeated_reason(tmp_path):
    why = "no family time in your last 14 days; connection 0.25 overnight (below your usual, 0.50)"
    path, _ = store(tmp_path, [
        block("FAMILY_TIME", 13, 14.5, f"Family time 13:00-14:30: {why}. Expected: connection +0.14",
              ("no family time in your last 14 days",)),
        block("FAMILY_TIME", 19, 20.5, f"Family time 19:00-20:30: {why}. Expected: connection +0.17",
              ("no family time in your last 14 days",), slot="evening"),
    ])
    c = check(path, sleeps=[])
    assert len(c.repeated) == 1
    assert "the same rationale" in c.repeated[0] and "13:00" in c.repeated[0] and "19:00" in c.repeated[0]


def test_the_same_lead_evidence_sentence_is_a_repeated_reason_and_different_reasons_are_not(tmp_path):
    lead = "HRV 55 ms vs your 28-day median 49"
    path, _ = store(tmp_path, [
        block("MEDITATE", 9, 9.25, f"Meditate 09:00-09:15: {lead}; serenity 0.40", (lead, "serenity 0.40")),
        block("EXERCISE", 13, 14, f"Exercise 13:00-14:00: {lead}; 4,000 steps yesterday", (lead, "4,000 steps")),
        block("LEARN", 15, 16, "Learn 15:00-16:00: no learn in your last 14 days",
              ("no learn in your last 14 days", lead)),  # the same sentence, not as the lead reason
    ])
    c = check(path, sleeps=[])
    assert len(c.repeated) == 1
    assert c.repeated[0].startswith("MEDITATE") and "EXERCISE" in c.repeated[0] and "lead reason" in c.repeated[0]


def test_reason_text_drops_times_ranges_and_the_expected_tail():
    b = {"rationale": "Meditate 09:45-10:00: free 09:45-12:00 (then 12:00); HRV 55. Expected: serenity +0.1"}
    assert reason_text(b) == "free (then ); HRV 55"


def test_a_short_block_alone_in_a_three_hour_window_counts(tmp_path):
    # up at 06:30, meetings 07:00-09:00 and 12:00-13:00: the 15-minute meditation is alone in 09:00-12:00
    recs = [night(-1.5, 6.5), meeting("m0", 7, 9), meeting("m1", 12, 13)]
    path, _ = store(tmp_path, [block("MEDITATE", 10, 10.25), block("EXERCISE", 17, 18, slot="afternoon"),
                               block("SLEEP", 22.5, 30.5, slot="night")], recs)
    c = check(path)
    assert len(c.short_alone) == 1
    assert "MEDITATE" in c.short_alone[0] and "09:00-12:00" in c.short_alone[0] and "(15 min)" in c.short_alone[0]


def test_a_short_block_in_a_forty_minute_window_or_beside_another_block_does_not_count(tmp_path):
    recs = [night(-1.5, 6.5), meeting("m0", 7, 10), meeting("m1", 10 + 40 / 60, 12)]
    path, _ = store(tmp_path, [
        block("MEDITATE", 10.1, 10.35),  # free 10:00-10:40 only
        block("MEDITATE", 14, 14.25, slot="afternoon"),  # a 4 h window, but not alone in it:
        block("LEARN", 15, 16, slot="afternoon"),
        block("EXERCISE", 19, 19.5, slot="evening"),  # 30 minutes: not short
        block("SLEEP", 22.5, 30.5, slot="night"),
    ], recs)
    assert check(path).short_alone == []


def test_the_sleep_and_the_plans_bedtime_bound_the_free_window(tmp_path):
    # up at 06:30; the plan's bedtime at 22:00; a 10-minute block at 21:00 in a free 19:00-22:00
    recs = [night(-1.5, 6.5), meeting("m0", 7, 19)]
    path, _ = store(tmp_path, [block("MEDITATE", 21, 21 + 10 / 60, slot="evening"),
                               block("SLEEP", 22, 30, slot="night")], recs)
    c = check(path)
    assert len(c.short_alone) == 1 and "19:00-22:00" in c.short_alone[0]
    # meetings until 20:15 and from 21:30: the window 20:15-21:30 is not wide
    (tmp_path / "b").mkdir()
    recs2 = [night(-1.5, 6.5), meeting("m0", 7, 20.25), meeting("m1", 21.5, 22)]
    path2, _ = store(tmp_path / "b", [block("MEDITATE", 21, 21 + 10 / 60, slot="evening"),
                                      block("SLEEP", 22, 30, slot="night")], recs2)
    assert check(path2).short_alone == []


def _recommend_run(db, ids, picks, model="day-planner", day=DAY):
    summary = {"day": day.isoformat(), "recommendations": ids, "model": model}
    if picks is not None:
        summary["picks"] = picks
    runs.record_run(db, "recommend", None, day.isoformat(), CREATED, True, summary)


@pytest.mark.parametrize(("models", "picks", "asked", "stood", "vetoed"), [
    (["llm:student-real-q8_0.gguf", "day-planner"], {"planner": "SLEEP", "model": "MEDITATE"}, True, True, False),
    (["day-planner", "day-planner"], {"planner": "DEEP_WORK", "model": "EXERCISE"}, True, False, True),
    (["day-planner", "day-planner"], {"planner": "DEEP_WORK", "model": None}, True, False, False),  # no valid answer
    (["day-planner", "day-planner"], {}, False, False, False),  # not asked (bayes, or no open slot now)
])
def test_model_ask_reads_the_picks_and_who_chose_each_block_from_the_stored_rows(tmp_path, models, picks, asked,
                                                                                 stood, vetoed):
    path, ids = store(tmp_path, [block("MEDITATE", 9, 9.25, model=models[0]),
                                 block("EXERCISE", 13, 14, model=models[1], slot="afternoon")])
    with open_db(path) as db:
        _recommend_run(db, ids, picks, model=models[0])
    with open_db(path, read_only=True) as db:
        ask = model_ask(db, DAY)
    assert (ask.asked, ask.stood, ask.vetoed) == (asked, stood, vetoed)
    assert ask.model == (picks or {}).get("model")


def test_model_ask_takes_the_latest_run_of_the_day_and_knows_when_runs_say_nothing(tmp_path):
    path, ids = store(tmp_path, [block("MEDITATE", 9, 9.25)])
    with open_db(path) as db:
        assert model_ask(db, DAY) is None  # no recommend run for the day
        _recommend_run(db, ids, None)  # a run before issue 37: no picks recorded
        assert model_ask(db, DAY) is None
        _recommend_run(db, ids, {"planner": "MEDITATE", "model": "LEARN"})
        assert model_ask(db, DAY).vetoed
        assert model_ask(db, DAY + timedelta(days=1)) is None
        (later,) = plans.insert_recommendations(db, [block("LEARN", 9, 10, model="llm:x.gguf")])
        _recommend_run(db, [later], {"planner": "MEDITATE", "model": "LEARN"}, model="llm:x.gguf")
        ask = model_ask(db, DAY)
    assert ask.stood and not ask.vetoed
