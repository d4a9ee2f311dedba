"""The real day's objective (issue 37), pure: variety, no favour for the never done, habits,
answers by the kind of day and the position in it (moving *when*), recovery gating strain,
block lengths from the person's own events, no short block alone in a long free window, no
reason twice a day."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

import numpy as np
import pytest

from agent.day import Answer, CalendarEvent, DayPlanner, PersonFacts
from agent.day.blocks import DURATIONS, Placement, place
from agent.day.calendar import Window, frame_day, sleep_habits
from agent.day.evidence import Fact
from agent.day.objective import (
    AnswerBook,
    Variety,
    context_of,
    day_kind,
    habit_shares,
    position,
    usual_minutes,
    week_counts,
)
from agent.day.plan import Block, distinct_reasons
from common.records import ACTIONS
from tests.agent.test_day_shape import DAY, NY, after_hours, at, nurse, planner_inputs

FREE = date(2025, 3, 1)  # a Saturday four days after the run: nothing in the calendar


def free_day(**over):
    events, nights = nurse()
    # a free day: no shift the day before, on or after it
    day = over.pop("day", DAY + timedelta(days=3))
    return planner_inputs(events, nights, day=day, **over)


def non_sleep(dp):
    return [b for b in dp.blocks if b.action != "SLEEP"]


# -- variety ---------------------------------------------------------------------------------
def test_repeats_cost_more_the_more_often_and_the_week_counts():
    ex, med = ACTIONS.index("EXERCISE"), ACTIONS.index("MEDITATE")
    v = Variety(np.array([0, 0, 0, -1]), np.zeros((1, 10)), np.zeros(10))
    plans = np.array([[ex, med, ACTIONS.index("LEARN"), ex], [ex, ex, med, ex], [ex, ex, ex, ex]])
    c = v.cost(plans)
    assert c[0] == 0.0 < c[1] < c[2]  # the forced last position never counts
    week = np.zeros(10)
    week[ex] = 5
    vw = Variety(v.day_of, v.prior_day, week)
    assert vw.cost(plans[:1])[0] > 0 and vw.cost(plans[:1])[0] == v.w_week * 5  # one exercise, five before
    blocks = [(FREE - timedelta(days=k), "afternoon", "EXERCISE", "block") for k in range(1, 9)]
    blocks += [(FREE - timedelta(days=1), "night", "SLEEP", "bedtime"), (FREE - timedelta(days=2), "night", "SLEEP",
                                                                          "early_night")]
    counts = week_counts(blocks, FREE)
    assert counts[ex] == 6  # six days back, not eight; bedtimes are no offer, an early night is
    assert counts[ACTIONS.index("SLEEP")] == 1


def test_a_free_day_repeats_no_action_and_a_full_week_of_one_moves_on():
    dp = DayPlanner(free_day()).plan()
    acts = [b.action for b in non_sleep(dp)]
    assert len(acts) >= 2 and len(set(acts)) == len(acts)
    # the same action offered every day of the last week: today offers something else there
    top = acts[0]
    slot = non_sleep(dp)[0].slot
    recent = [(dp.day - timedelta(days=k), slot, top, "block") for k in range(1, 7)]
    again = DayPlanner(free_day(recent_blocks=recent)).plan()
    assert top not in [b.action for b in non_sleep(again) if b.slot == slot]


# -- novelty and habit -------------------------------------------------------------------------
def test_a_never_done_action_says_it_is_a_try_and_one_done_does_not():
    dp = DayPlanner(free_day()).plan()
    novel = [b for b in non_sleep(dp) if "(a try" in b.rationale]
    assert novel, "nothing in her history: every first suggestion is a try"
    b = novel[0]
    assert any(e.startswith(f"no {b.action.lower().replace('_', ' ')} in your last 28 days") for e in b.evidence)
    done = [(dp.day - timedelta(days=k), b.slot, b.action) for k in range(1, 6)]
    again = DayPlanner(free_day(recent_actions=done)).plan()
    assert not any("(a try" in x.rationale for x in again.blocks if x.action == b.action)


def test_a_block_judged_done_counts_as_done_in_the_plans_facts():
    """A block of Rhythm's the person was judged to have done (an accept, typed or from their
    data: tasks completed in a deep-work block) is something they did: the next plan does not
    call it a try nor say "no deep work in your last 28 days" beside yesterday's "done"."""
    dp = DayPlanner(free_day()).plan()
    b = next(b for b in non_sleep(dp) if "(a try" in b.rationale)
    word = b.action.lower().replace("_", " ")
    did = [Answer(dp.day - timedelta(days=2), b.slot, b.action, "accept", None, 0.5)]
    again = DayPlanner(free_day(answers=did)).plan()
    same = [x for x in again.blocks if x.action == b.action]
    assert same, "accepted once, it is offered again"
    assert not any("(a try" in x.rationale for x in same)
    assert not any(e.startswith(f"no {word} in your last") for x in same for e in x.evidence)
    assert any(e.startswith(f"last {word} 2 days ago") for x in same for e in x.evidence)


def test_habits_are_the_share_of_days_per_slot_with_enough_days():
    recent = [(FREE - timedelta(days=k), "evening", "FAMILY_TIME" if k % 4 else "SOCIALIZE") for k in range(1, 13)]
    recent += [(FREE - timedelta(days=1), "morning", "EXERCISE")]
    h = habit_shares(recent, FREE)
    assert set(h) == {"evening"}  # one morning is no habit
    assert abs(h["evening"]["FAMILY_TIME"] - 9 / 12) < 1e-9


# -- answers by the kind of day and the position ------------------------------------------------
@dataclass
class Ans:
    slot: str
    action: str
    response: str
    context: str | None = None
    confidence: float = 1.0


def test_answers_on_unlike_days_count_little_and_old_answers_in_full():
    book = AnswerBook([Ans("morning", "EXERCISE", "ignore", "after_night_shift/first_hours")] * 4
                      + [Ans("morning", "EXERCISE", "accept", "free_day/open")] * 2)
    assert book.penalty("after_night_shift", "morning", "EXERCISE") > 1.0  # ignored there
    assert book.penalty("free_day", "morning", "EXERCISE") < 0  # ... accepted on free mornings
    assert not book.avoided("after_night_shift", "morning", "first_hours")  # "not exercise", not "not then"
    book = AnswerBook([*book.answers, *[Ans("morning", "MEDITATE", "ignore", "after_night_shift/first_hours")] * 2])
    assert book.avoided("after_night_shift", "morning", "first_hours")  # whatever it offers: "not then"
    assert not book.avoided("free_day", "morning", "first_hours")
    legacy = AnswerBook([Ans("morning", "EXERCISE", "ignore")] * 3)  # stored before contexts
    assert legacy.penalty("free_day", "morning", "EXERCISE") == legacy.penalty("work_day", "morning", "EXERCISE") > 1
    # an implicit answer counts its confidence
    soft = AnswerBook([Ans("morning", "EXERCISE", "ignore", "free_day/open", 0.5)] * 2)
    assert 0 < soft.penalty("free_day", "morning", "EXERCISE") < AnswerBook(
        [Ans("morning", "EXERCISE", "ignore", "free_day/open")] * 2).penalty("free_day", "morning", "EXERCISE")


def test_ignores_on_unlike_days_count_only_where_nothing_was_said_on_days_like_today():
    """Where the person answered on days of today's kind, ignores on unlike days do not count
    (they say as much about that day as about the action); accepts there count a quarter."""
    from agent.day.objective import UNLIKE_WEIGHT

    shifts = [Ans("afternoon", "ADMIN_WORK", "ignore", "after_night_shift/open")] * 3
    free = [Ans("afternoon", "ADMIN_WORK", "accept", "free_day/open")] * 2
    book = AnswerBook(shifts + free)
    assert book.counts("free_day", "afternoon", "ADMIN_WORK") == (2.0, 0.0)  # no spill onto a free day
    assert book.counts("after_night_shift", "afternoon", "ADMIN_WORK") == (pytest.approx(2 * UNLIKE_WEIGHT), 3.0)
    only = AnswerBook(shifts)  # nothing said on free days: the unlike days speak, softly
    assert only.counts("free_day", "afternoon", "ADMIN_WORK") == (0.0, pytest.approx(3 * UNLIKE_WEIGHT))
    assert 0 < only.penalty("free_day", "afternoon", "ADMIN_WORK") < only.penalty("after_night_shift", "afternoon",
                                                                                 "ADMIN_WORK")


def test_an_action_ignored_in_every_slot_costs_in_a_new_one_and_a_slot_of_its_own_outweighs_the_rest():
    """Answers on the same action in other slots count OTHER_SLOT_WEIGHT: a person who ignores
    meditation in the morning and afternoon is not offered it in the evening as if unknown;
    one who ignores morning runs and does evening ones keeps the evening run."""
    from agent.day.objective import OTHER_SLOT_WEIGHT

    never = AnswerBook([Ans("morning", "MEDITATE", "ignore", "free_day/open"),
                        Ans("afternoon", "MEDITATE", "ignore", "free_day/open")] * 2)
    assert never.counts("free_day", "evening", "MEDITATE") == (0.0, pytest.approx(4 * OTHER_SLOT_WEIGHT))
    assert never.penalty("free_day", "evening", "MEDITATE") > 0
    runner = AnswerBook([Ans("morning", "EXERCISE", "ignore", "work_day/first_hours")] * 3
                        + [Ans("evening", "EXERCISE", "accept", "work_day/open")] * 3)
    assert runner.penalty("work_day", "morning", "EXERCISE") > 0 > runner.penalty("work_day", "evening", "EXERCISE")
    # SLEEP is a different ask in each slot: bedtimes kept do not make a nap welcome
    sleeper = AnswerBook([Ans("night", "SLEEP", "accept", "work_day/late")] * 5)
    assert sleeper.counts("work_day", "afternoon", "SLEEP") == (0.0, 0.0)


def test_ignored_first_hours_after_night_shifts_stop_being_offered_and_ordinary_days_keep_theirs():
    events, nights = nurse(sleep_h=3.5)  # a short day sleep: the afternoon starts soon after it
    # she never naps after her day sleep (so the afternoon gets a block in her waking time)
    no_naps = [Answer(DAY - timedelta(days=7 * k), "afternoon", "SLEEP", "ignore", "after_night_shift/open")
               for k in (1, 2, 3)]
    base = DayPlanner(planner_inputs(events, nights, answers=no_naps)).plan()
    assert day_kind(base.frame) == "after_night_shift"
    early = [b for b in non_sleep(base) if b.context == "after_night_shift/first_hours"]
    assert early, "a short day sleep leaves the first hours after it open"
    # ... and she ignored whatever was offered in those hours, three runs running
    answers = no_naps + [Answer(DAY - timedelta(days=7 * k), b.slot, a, "ignore", b.context)
                         for k in (1, 2, 3) for b in early for a in ("MEDITATE", "ME_TIME", b.action)]
    dp = DayPlanner(planner_inputs(events, nights, answers=answers)).plan()
    assert not [b for b in non_sleep(dp) if b.context == "after_night_shift/first_hours"]
    later = [b for b in non_sleep(dp) if b.slot == early[0].slot]
    assert later or any("none offered then" in n for n in dp.notes)
    for b in later:  # the time moved, not only the action
        assert position(dp.frame, b.start, b.end) != "first_hours" and b.start > early[0].start
    # an ordinary free day where she accepted what was offered: the ignores after night shifts
    # (the same slots and actions) do not spill onto it
    plain = DayPlanner(free_day(answers=no_naps)).plan()
    liked = [Answer(plain.day - timedelta(days=7 * k), b.slot, b.action, "accept", b.context)
             for k in (1, 2) for b in non_sleep(plain)]
    before = DayPlanner(free_day(answers=no_naps + liked)).plan()
    free = DayPlanner(free_day(answers=answers + liked)).plan()
    assert [(b.slot, b.action, b.start) for b in non_sleep(free)] == [(b.slot, b.action, b.start)
                                                                     for b in non_sleep(before)]


def test_context_is_kind_of_day_and_position():
    events, nights = nurse()
    habits = sleep_habits(nights, NY)
    frame = frame_day(FREE, NY, [], habits)
    assert day_kind(frame) == "free_day"
    assert context_of(frame, at(FREE, 7, 30), at(FREE, 8, 15)) == "free_day/first_hours"
    assert context_of(frame, at(FREE, 13, 0), at(FREE, 14, 0)) == "free_day/open"
    assert context_of(frame, at(FREE, 21, 30), at(FREE, 22, 0)) == "free_day/late"
    meeting = CalendarEvent(at(FREE, 15, 0), at(FREE, 16, 0), "Dentist", "ADMIN_WORK")
    f2 = frame_day(FREE, NY, [meeting], habits)
    assert position(f2, at(FREE, 13, 30), at(FREE, 14, 30)) == "before_commitment"


# -- recovery ------------------------------------------------------------------------------------
@dataclass
class Dyn:
    """Fitted personal dynamics as plain data (the shape of rhythm.personal's)."""

    helps: bool
    fitted: bool = True

    def departures(self):
        return [{"action": ACTIONS.index("EXERCISE"), "meter": 0, "fitted": 0.2 if self.helps else -0.1,
                 "table": 0.08, "n": 30}]

    def plan_residual(self):
        return np.zeros((10, 5))


def test_a_poor_recovery_day_plans_no_workout_unless_her_data_says_it_helps():
    day = DAY + timedelta(days=3)
    week = {day - timedelta(days=k): 60.0 + k % 5 for k in range(1, 20)}
    good = PersonFacts(recovery_pct={**week, day: 72.0})
    poor = PersonFacts(recovery_pct={**week, day: 12.0})
    # a person for whom exercise is the action of choice on a free day
    recent = [(day - timedelta(days=k), s, "EXERCISE") for k in range(1, 10) for s in ("morning",)]
    ok = DayPlanner(free_day(facts=good, recent_actions=recent)).plan()
    assert "EXERCISE" in [b.action for b in ok.blocks]
    rest = DayPlanner(free_day(facts=poor, recent_actions=recent)).plan()
    assert "EXERCISE" not in [b.action for b in rest.blocks]
    assert any(n.startswith("recovery 12% today") and "no workout" in n for n in rest.notes)
    helps = DayPlanner(free_day(facts=poor, recent_actions=recent, dynamics=Dyn(helps=True))).plan()
    assert "EXERCISE" in [b.action for b in helps.blocks]


def test_the_day_after_a_long_night_shift_is_for_rest():
    events, nights = nurse()
    dp = DayPlanner(planner_inputs(events, nights)).plan()  # 13 h shift ended this morning
    assert "EXERCISE" not in [b.action for b in dp.blocks]
    assert any("13 h 00 night shift" in n and "no workout" in n for n in dp.notes)


# -- lengths, short blocks, reasons --------------------------------------------------------------
def test_block_lengths_follow_the_persons_own_events():
    runs = [CalendarEvent(at(FREE - timedelta(days=k), 7), at(FREE - timedelta(days=k), 8, 15), "Long run", "EXERCISE")
            for k in (2, 5, 9)]
    hold = CalendarEvent(at(FREE - timedelta(days=3), 7), at(FREE - timedelta(days=3), 9), "run?", "EXERCISE",
                         done=False)
    declined = CalendarEvent(at(FREE - timedelta(days=4), 7), at(FREE - timedelta(days=4), 10), "Club run",
                             "EXERCISE", self_response="declined")
    lengths = usual_minutes([*runs, hold, declined], FREE, DURATIONS)
    assert lengths == {"EXERCISE": 75}  # holds and declined invitations are no evidence
    assert usual_minutes([*runs[:2], hold, declined], FREE, DURATIONS) == {}  # under three events: nothing
    # her watch's workouts count with her calendar's events
    assert usual_minutes(runs[:1], FREE, DURATIONS, sessions={"EXERCISE": [40.0, 42.0, 38.0]}) == {"EXERCISE": 40}
    habits = sleep_habits(nurse()[1], NY)
    frame = frame_day(FREE, NY, [], habits)
    assert place(frame, 0, "EXERCISE").minutes == DURATIONS["EXERCISE"][1]
    assert place(frame, 0, "EXERCISE", lengths=lengths).minutes == 75


def test_no_short_block_alone_in_a_long_free_window():
    dp = DayPlanner(free_day()).plan()
    for b in non_sleep(dp):
        window = next(w for w in dp.frame.free if w.start <= b.start and b.end <= w.end)
        assert not ((b.end - b.start) <= timedelta(minutes=20) and window.minutes >= 120), b


def test_no_reason_twice_a_day():
    def block(h, facts):
        p = Placement(at(FREE, h), at(FREE, h + 1), "block", Window(at(FREE, h), at(FREE, h + 2)))
        b = Block("morning", "LEARN", p.start, p.end, "block", "", [f.text for f in facts], {"cognition": 0.1})
        b._parts = (p, facts, {"cognition": 0.1}, "", False)
        return b

    shared = [Fact("hrv", "HRV 34 ms vs your 27-day median 54", 2.0), Fact("sleep", "slept 5 h 00 last night", 1.0)]
    own = [Fact("free", "free 10:00-12:00", 0.1)]
    out = distinct_reasons([block(8, shared), block(10, shared + own)])
    assert out[0].rationale.split(": ", 1)[1].startswith("HRV 34 ms")
    assert "HRV 34" not in out[1].rationale and "free 10:00-12:00" in out[1].rationale
    assert set(out[1].evidence) == {f.text for f in shared + own}  # nothing dropped from the evidence


def test_plans_of_generated_days_never_repeat_a_reason_in_a_day():
    events, nights = nurse()
    for k in range(7):
        day = DAY + timedelta(days=k)
        dp = DayPlanner(planner_inputs(events, nights, day=day)).plan()
        shown = [e for b in dp.blocks for e in b.evidence if e in b.rationale]
        assert len(shown) == len(set(shown)), (day, shown)


def test_shift_end_helper_is_elapsed_time():
    assert after_hours(at(DAY, 19), 13) == datetime.combine(DAY + timedelta(days=1), time(8), tzinfo=NY)


# -- the objective line a v6 model reads ----------------------------------------------------------
def test_the_objective_facts_are_the_slots_actions_below_the_best_one_and_answers_move_them():
    from agent.day import objective_facts, slot_actions, with_model_pick

    planner = DayPlanner(free_day())
    plain = planner.plan()
    block = non_sleep(plain)[0]
    facts = objective_facts(plain, block.slot)
    assert sorted(facts) == sorted(slot_actions(plain, block.slot)) and len(facts) >= 2
    assert max(facts.values()) == 0.0 and facts[block.action] == 0.0  # the planner's pick is the best
    # the numbers are the ones a model's pick is vetted by: the worst is refused, the best stands
    worst = min(facts, key=facts.get)
    assert facts[worst] < -0.1
    assert not with_model_pick(planner, plain, block.slot, worst, "llm:test")[0]
    assert with_model_pick(planner, plain, block.slot, block.action, "llm:test")[0]
    # the person ignored this block's action in this slot on days of this kind, three weeks running
    ignored = [Answer(plain.day - timedelta(days=7 * k), block.slot, block.action, "ignore", block.context)
               for k in (1, 2, 3)]
    after = objective_facts(DayPlanner(free_day(answers=ignored)).plan(), block.slot)
    assert after[block.action] < facts[block.action] - 0.5
    assert objective_facts(plain, "no such slot") == {}


def test_the_belief_sentences_read_as_english():
    """"your data say you are ..." takes an adjective or a noun phrase in every direction."""
    from agent.day.evidence import belief_facts

    for b in ((0.9, 0.9, 0.9), (0.1, 0.1, 0.1)):
        for f in belief_facts(b, (0.05, 0.05, 0.05)).values():
            said = f.text.split("your data say you are ", 1)[1]
            assert said.split(" (")[0] in ("outgoing", "someone who recharges alone", "a morning person",
                                           "an evening person", "energised by work", "drained by work"), f.text
