"""lab.answer_rules: each hidden rule on crafted blocks, the habits a creature of habit
keeps, the seeded base rule, and the person's day read back from a real DuckDB."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from lab.answer_rules import (
    RULES,
    Block,
    PersonDay,
    answer,
    creature_of_habit,
    day_sleeper,
    habits,
    late_starter,
    no_morning_exercise,
    no_repeat,
    person_day,
)

TZ = ZoneInfo("Europe/Madrid")
DAY = date(2025, 3, 12)


def at(h: float, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(hours=h)


def blk(i: int, action: str, h0: float, h1: float, slot: str = "morning", kind: str = "block") -> Block:
    return Block(i, action, slot, at(h0), at(h1), kind)


def test_no_morning_exercise_ignores_exercise_before_noon_local_time_only():
    d = PersonDay(DAY, TZ)
    assert not no_morning_exercise(blk(1, "EXERCISE", 11.5, 12.25), d)  # starts 11:30
    assert no_morning_exercise(blk(2, "EXERCISE", 12, 13, "afternoon"), d)
    assert no_morning_exercise(blk(3, "MEDITATE", 7, 7.25), d)
    # 11:30 in Madrid is 10:30 UTC: the rule reads the local clock
    utc_block = Block(4, "EXERCISE", "afternoon", datetime(2025, 3, 12, 11, 30, tzinfo=UTC),
                      datetime(2025, 3, 12, 12, 30, tzinfo=UTC))
    assert no_morning_exercise(utc_block, d)  # 12:30 in Madrid


def test_late_starter_ignores_whatever_starts_before_ten_local_time():
    d = PersonDay(DAY, TZ)
    assert not late_starter(blk(1, "DEEP_WORK", 9.75, 11), d)  # 09:45: a time, not an action
    assert not late_starter(blk(2, "MEDITATE", 7, 7.25), d)
    assert late_starter(blk(3, "DEEP_WORK", 10, 11.5), d)
    assert late_starter(blk(4, "SLEEP", 7, 8.5, kind="sleep_in"), d)  # sleeping in is no block to do
    assert RULES["late_starter"] is late_starter


def test_no_repeat_ignores_the_second_block_of_an_action_but_not_a_second_sleep():
    plan = (blk(1, "MEDITATE", 8, 8.25), blk(2, "LEARN", 13, 14, "afternoon"), blk(3, "MEDITATE", 19, 19.25, "evening"),
            blk(4, "SLEEP", 9, 13, kind="day_sleep"), blk(5, "SLEEP", 22, 30, "night", "bedtime"))
    d = PersonDay(DAY, TZ, plan)
    assert [no_repeat(b, d) for b in plan] == [True, True, False, True, True]


def test_day_sleeper_ignores_awake_blocks_in_the_eight_hours_after_a_night_shift():
    end = at(8)  # last night's shift ended 08:00
    d = PersonDay(DAY, TZ, shift_ends=(end,))
    assert not day_sleeper(blk(1, "EXERCISE", 9, 10), d)
    assert not day_sleeper(blk(2, "MEDITATE", 15.75, 16.25, "afternoon"), d)  # overlaps 16:00
    assert day_sleeper(blk(3, "MEDITATE", 16, 16.25, "afternoon"), d)  # from 16:00 on: awake
    assert day_sleeper(blk(4, "SLEEP", 9, 15, kind="day_sleep"), d)
    assert day_sleeper(blk(5, "EXERCISE", 6, 7), d)  # before the shift ended
    assert day_sleeper(blk(6, "EXERCISE", 9, 10), PersonDay(DAY, TZ))  # no night shift: accepts


def test_habits_are_the_most_frequent_slot_actions_and_those_of_a_quarter_of_the_days():
    rows = [(DAY - timedelta(days=k), "morning", a) for k, a in
            enumerate(["EXERCISE"] * 5 + ["DEEP_WORK"] * 3 + ["LEARN"] * 2 + [None] * 6, start=1)]
    rows += [(DAY - timedelta(days=k), "evening", "MEDITATE") for k in (1, 2)]
    rows += [(DAY, "morning", "LEARN"), (DAY - timedelta(days=29), "evening", "SOCIALIZE")]  # outside 28 days before
    h = habits(rows, DAY)
    assert h == {"morning": frozenset({"EXERCISE", "DEEP_WORK"}), "evening": frozenset({"MEDITATE"})}
    d = PersonDay(DAY, TZ, habits=h)
    assert creature_of_habit(blk(1, "DEEP_WORK", 9, 10), d)
    assert not creature_of_habit(blk(2, "LEARN", 9, 10), d)
    assert not creature_of_habit(blk(3, "MEDITATE", 9, 9.25), d)  # an evening habit, offered in the morning
    assert not creature_of_habit(blk(4, "SLEEP", 22, 30, "night", "bedtime"), d)  # no night habit seen


def test_answer_applies_the_rule_then_the_seeded_base_rule():
    d = PersonDay(DAY, TZ)
    morning_run = blk(1, "EXERCISE", 7, 8)
    assert answer(RULES["no_morning_exercise"], morning_run, d) == "ignore"
    assert answer(RULES["no_morning_exercise"], blk(2, "LEARN", 9, 10), d) == "accept"
    offered = [blk(i, "LEARN", 9 + i / 60, 10) for i in range(200)]
    said = [answer(RULES["no_repeat"], b, PersonDay(DAY, TZ, (b,)), base=0.7, seed=3) for b in offered]
    assert 0.6 < said.count("accept") / len(said) < 0.8
    assert said == [answer(RULES["no_repeat"], b, PersonDay(DAY, TZ, (b,)), base=0.7, seed=3) for b in offered]
    assert said != [answer(RULES["no_repeat"], b, PersonDay(DAY, TZ, (b,)), base=0.7, seed=4) for b in offered]
    assert answer(RULES["no_morning_exercise"], morning_run, d, base=0.0) == "ignore"


def test_person_day_reads_the_plan_and_the_slot_actions_before_the_day(tmp_path):
    from lab.plan_check import stored_blocks
    from storage import open_db, plans
    from storage.derived import replace_mapped

    created = datetime(2025, 3, 12, 5, tzinfo=UTC)
    rows = [{"created_at": created, "local_day": DAY, "slot": s, "action": a, "rationale": "", "model": "day-planner",
             "start_ts": at(h0), "end_ts": at(h1), "kind": k}
            for s, a, h0, h1, k in [("morning", "EXERCISE", 9, 10, "block"), ("night", "SLEEP", 22, 30, "bedtime")]]
    acts = [{"local_day": DAY - timedelta(days=k), "slot": "morning", "action": "EXERCISE", "confidence": 0.9,
             "evidence": [], "computed_at": created} for k in range(1, 4)]
    acts.append({"local_day": DAY, "slot": "morning", "action": "LEARN", "confidence": 0.9, "evidence": [],
                 "computed_at": created})  # the day itself: not the past
    with open_db(tmp_path / "r.duckdb") as db:
        plans.insert_recommendations(db, rows)
        replace_mapped(db, None, [], acts, {})
    with open_db(tmp_path / "r.duckdb", read_only=True) as db:
        d = person_day(db, DAY, TZ, stored_blocks(db, DAY), [at(3)])
    assert [(b.action, b.kind) for b in d.blocks] == [("EXERCISE", "block"), ("SLEEP", "bedtime")]
    assert d.habits == {"morning": frozenset({"EXERCISE"})}
    assert d.shift_ends == (at(3),)
    assert [answer(RULES["creature_of_habit"], b, d) for b in d.blocks] == ["accept", "ignore"]
    assert [answer(RULES["day_sleeper"], b, d) for b in d.blocks] == ["ignore", "accept"]  # 03:00 + 8 h > 09:00
