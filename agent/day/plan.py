"""Plan a real day: the person's belief and physiology, fitted into the day they have. Pure.

``DayPlanner(inputs).plan()`` returns a ``DayPlan``:

1. the day as it is (``calendar.frame_day``): commitments, waking hours from the person's
   own nights, free windows, and the slots the calendar decides (*fixed*: no suggestion,
   only a note; the look-ahead knows what the person will do there);
2. a rolling-horizon plan over the rest of today and tomorrow (``horizon.plan_horizon``)
   with the belief's sampled profiles, fixed slots forced, the night slept, each of
   today's other slots limited to the actions its free time can hold, and the person's
   answers making an action they keep ignoring in a kind of slot less attractive there;
3. one time block per open slot of today (``blocks.place``; the night: a bedtime);
4. for each block: ``evidence`` (the person's numbers against their own baseline, the day's
   meeting load, the free window, the belief, the answers behind it), ``expected_effect``
   (the meter changes the belief's samples expect) and a rationale sentence built from
   them by template (never free text from a model; calendar titles only ever appear as
   the commitments' own titles in the calendar facts' times, never in a rationale).

``with_model_pick(plan, slot, action, model)`` puts a local model's choice through the same
checks: refused (the plan keeps the planner's block and says why) when the slot cannot hold
it or the belief's model rates it clearly worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any

import numpy as np

from agent.belief import BeliefState
from agent.day.blocks import DURATIONS, Placement, bedtime, place, prefer_time
from agent.day.calendar import (
    CalendarEvent,
    DayFrame,
    Night,
    SleepSpan,
    elapsed_min,
    frame_day,
    habits_for,
    shift_patterns,
    shifted,
    slot_of_time,
    slot_window,
)
from agent.day.evidence import (
    AGAINST,
    Fact,
    PersonFacts,
    belief_facts,
    calendar_facts,
    dynamics_facts,
    facts_for,
    person_facts,
    since_fact,
    sleep_fact,
)
from agent.day.horizon import (
    INFO_WEIGHT,
    expected_effect,
    plan_horizon,
    position_values,
)
from agent.day.objective import (
    HABIT_WEIGHT,
    NOVEL_COST,
    AnswerBook,
    Variety,
    context_of,
    day_kind,
    done_actions,
    habit_shares,
    position,
    recovery,
    usual_minutes,
    week_counts,
)
from agent.world import PlanModel
from common.records import ACTIONS, METERS, SLOTS
from simulator import spec

SLEEP = ACTIONS.index("SLEEP")
TABLE = np.array(spec.EFFECT)  # the simulator's base effects, the plan's units
WORK = ("DEEP_WORK", "ADMIN_WORK", "LEARN")
# Between work commitments (a morning or afternoon that holds work), a block is what a
# working day can hold: more work, a walk or workout, a few quiet minutes.
AT_WORK = ("DEEP_WORK", "ADMIN_WORK", "LEARN", "EXERCISE", "MEDITATE")
CLEARLY_WORSE = 0.25  # a model's pick is refused below this share of the best-to-worst range
MIN_EFFECT = 0.01
FACTS_PER_BLOCK = 5  # the facts a block's evidence carries (its rationale says two)
SHORT_MIN = 20  # a block this short ...
LONE_WINDOW_MIN = 120  # ... alone in a free window this long is not a plan (a 15-minute meditation in a free morning)
POSITIONS = ("first_hours", "before_commitment", "late", "open")
POSITION_WORDS = {"first_hours": "in the first hours after you wake", "before_commitment": "just before a commitment",
                  "late": "late in the evening", "open": "in open time"}
KIND_WORDS = {"after_night_shift": "on days after a night shift", "night_shift": "on days with a night shift",
              "work_day": "on work days", "free_day": "on free days", "?": "on earlier days"}
PHRASES = {
    "DEEP_WORK": "Deep work",
    "ADMIN_WORK": "Admin and email",
    "LEARN": "Learning",
    "EXERCISE": "Exercise",
    "MEDITATE": "Meditate",
    "FAMILY_TIME": "Family time",
    "SOCIALIZE": "Time with friends",
    "ME_TIME": "Time for yourself",
    "BINGE_WATCH": "Watch something, guilt-free",
}


@dataclass(frozen=True)
class Answer:
    day: date
    slot: str
    action: str
    response: str  # accept | ignore
    context: str | None = None  # "<kind of day>/<position>" of the block (objective.context_of)
    confidence: float = 1.0  # an implicit answer: how sure the data is


@dataclass
class DayInputs:
    day: date
    tz: tzinfo
    events: Sequence[CalendarEvent]  # of the day and the next (commitments of both)
    nights: Sequence[Night]  # the person's recent main sleeps (night and day sleeps)
    facts: PersonFacts
    meters: Sequence[float]  # the current meters (0.5 = usual), as the belief last saw them
    belief: BeliefState  # updated with the person's observations (and answers)
    now: datetime | None = None  # only when planning today: slots and free time before it are past
    answers: Sequence[Answer] = ()
    recent_actions: Sequence[tuple[date, str, str]] = ()  # (day, slot, action) of past slots
    wake_override: time | None = None
    bed_override: time | None = None
    n_samples: int = 8
    seed: int = 0
    # the person's own dynamics fitted from their history (agent.personal.PersonalDynamics):
    # their departures from the table enter the plan's model; None or unfitted: the table
    dynamics: Any = None
    # the calendar of the weeks before (what the person did around past night shifts, and
    # when they last did an action by their calendar)
    past_events: Sequence[CalendarEvent] = ()
    # (action, meter) of the person's fitted effects that their insights contradict (opposite
    # sign, significant): the plan neither uses nor shows them
    contradicted: frozenset[tuple[str, str]] = frozenset()
    # action -> the clock time the person moved Rhythm's block of it to in their calendar
    # (the latest; issue 38): the block is placed as near it as the free time allows
    preferred_times: Any = None
    # (day, slot, action, kind) of the blocks of each earlier day's latest plan (the last week):
    # the week's diminishing returns
    recent_blocks: Sequence[tuple[date, str, str, str]] = ()
    # Rhythm's bedtimes of the last two weeks' latest plans (a bedtime's or an early night's
    # start): nights that kept one are Rhythm's, not the person's (blocks.meet_where_they_are)
    recent_bedtimes: Sequence[datetime] = ()
    # action -> minutes of the person's recorded sessions of it in the last four weeks (their
    # devices' workouts): with their calendar's events, how long a block of it lasts
    sessions: Any = None


@dataclass
class Block:
    slot: str
    action: str
    start: datetime
    end: datetime
    kind: str  # block | nap | sleep_in | bedtime | early_night | day_sleep | shift_nap
    rationale: str
    evidence: list[str]
    expected_effect: dict[str, float]
    chosen_by: str = "planner"
    context: str | None = None  # "<kind of day>/<position>" (objective.context_of)
    # (placement, facts, effect, bed reason, novel): what the rationale is built from
    _parts: Any = field(default=None, repr=False, compare=False)


@dataclass
class DayPlan:
    day: date
    tz: tzinfo
    frame: DayFrame
    blocks: list[Block]
    fixed: dict[str, str]  # slot -> the commitments' action
    notes: list[str]
    belief: tuple[float, float, float]
    belief_sd: tuple[float, float, float]
    horizon: list[tuple[str, str, str]]  # (day, slot, action) of the look-ahead
    score: float
    _ctx: dict[str, Any] = field(default_factory=dict, repr=False)


def _ok(frame: DayFrame, avoid: set[str]) -> Any:
    """A placement predicate: not at a position of the day the person keeps ignoring."""
    if not avoid:
        return None
    return lambda start, end: position(frame, start, end) not in avoid


def _short_alone(p: Placement) -> bool:
    """A short block alone in a long free window: no plan for a free morning."""
    return p.minutes <= SHORT_MIN and p.window.minutes >= LONE_WINDOW_MIN


def _exercise_helps(dynamics: Any, contradicted: frozenset[tuple[str, str]]) -> bool:
    """Whether this person's own fitted dynamics say exercise raises their vitality (then a
    poor-recovery day does not rule a workout out)."""
    if dynamics is None or not getattr(dynamics, "fitted", False):
        return False
    return any(ACTIONS[d["action"]] == "EXERCISE" and METERS[d["meter"]] == "vitality" and d["fitted"] > 0
               and ("EXERCISE", "vitality") not in contradicted for d in dynamics.departures())


def _first_slot(day: date, now: datetime | None, tz: tzinfo) -> int:
    if now is None:
        return 0
    d, s = slot_of_time(now.astimezone(tz))
    if d < day:
        return 0
    return s if d == day else len(SLOTS)


class DayPlanner:
    def __init__(self, inputs: DayInputs):
        self.x = inputs
        # what the person did, as the product says it: their slot actions and Rhythm's blocks
        # they were judged to have done (an accept, typed or from their data): "last deep work
        # 12 days ago" never stands beside yesterday's "DEEP_WORK 09:05: done"
        done_blocks = {(a.day, a.slot, a.action) for a in inputs.answers if a.response == "accept"}
        self.did: list[tuple[date, str, str]] = [*inputs.recent_actions,
                                                 *sorted(done_blocks - set(inputs.recent_actions))]

    def plan(self) -> DayPlan:
        x = self.x
        # only what is known at planning time: sleeps that ended before now (or the day's start)
        cutoff = x.now if x.now is not None else slot_window(x.day, 0, x.tz)[0]
        nights = [n for n in x.nights if n.wake <= cutoff]
        calendar = [*x.past_events, *x.events]
        habits = habits_for(x.day, nights, calendar, x.tz, x.wake_override, x.bed_override)
        patterns = shift_patterns([e for e in calendar if e.end <= cutoff], nights, x.tz)
        today = frame_day(x.day, x.tz, x.events, habits, now=x.now, patterns=patterns)
        tomorrow_habits = habits_for(x.day + timedelta(days=1), nights, calendar, x.tz, x.wake_override,
                                     x.bed_override)
        tomorrow = frame_day(x.day + timedelta(days=1), x.tz, x.events, tomorrow_habits, patterns=patterns)
        first = _first_slot(x.day, x.now, x.tz)
        notes: list[str] = []
        if habits.source == "default":
            notes.append("no sleep history yet: waking hours 07:00-23:00 (set wake_time / bed_time to change)")

        # positions: today's remaining slots, then tomorrow's four
        slots = [(x.day, s) for s in range(first, len(SLOTS))] + [(x.day + timedelta(days=1), s) for s in range(4)]
        kind_today, kind_tomorrow = day_kind(today), day_kind(tomorrow)
        book = AnswerBook(x.answers)
        lengths = usual_minutes(calendar, x.day, DURATIONS, sessions=x.sessions)
        rec = recovery(today, x.day, x.facts.recovery_pct, x.facts.hrv_ms, x.facts.hrv_kind, x.facts.sleep_min)
        gate = rec.poor and not _exercise_helps(x.dynamics, x.contradicted)
        if gate and rec.fact is not None:
            notes.append(f"{rec.fact.text}: no workout planned today")
        forced: dict[int, int] = {}
        allowed: dict[int, set[int]] = {}
        open_slots: list[int] = []  # positions of today that get a recommendation
        habit = habit_shares(x.recent_actions, x.day)
        # the positions of today's slots the person keeps ignoring, whatever is offered there
        avoided = {s: {pos for pos in POSITIONS if book.avoided(kind_today, SLOTS[s], pos)} for s in range(len(SLOTS))}
        for p, (d, s) in enumerate(slots):
            frame = today if d == x.day else tomorrow
            if s in frame.fixed:
                forced[p] = ACTIONS.index(frame.fixed[s])
                continue
            if s == 3:
                forced[p] = SLEEP  # the night is for sleeping
                if d == x.day:
                    open_slots.append(p)  # ... at the right time: a bedtime
                continue
            if d != x.day:
                continue  # tomorrow's free time is not known in detail: any action
            candidates = ACTIONS
            if s in (0, 1) and any(c.action in WORK for c in frame.commitments_in(s)):
                candidates = AT_WORK
            if gate:
                candidates = tuple(c for c in candidates if c != "EXERCISE")
            avoid = avoided[s]
            holds, short = set(), set()
            for name in candidates:
                pl = place(frame, s, name, lengths=lengths, ok=_ok(frame, avoid))
                if pl is None:
                    continue
                (short if _short_alone(pl) else holds).add(ACTIONS.index(name))
            if holds:
                allowed[p] = holds
                open_slots.append(p)
            elif avoid and any(place(frame, s, name, lengths=lengths) is not None for name in candidates):
                # free time, but only where the person keeps ignoring what is offered
                mine = max(habit.get(SLOTS[s], {}).items(), key=lambda kv: kv[1], default=("ME_TIME", 0.0))[0]
                forced[p] = ACTIONS.index(mine)
                where = sorted(avoid)[0]
                _p, acc, ign = book.time_p(kind_today, SLOTS[s], where)
                notes.append(f"{SLOTS[s]}: you ignored {ign:.0f} of {acc + ign:.0f} suggestions "
                             f"{POSITION_WORDS[where]} {KIND_WORDS[kind_today]}: none offered then")
            elif short:  # only a short block fits: it is not alone in a long free window
                allowed[p] = short
                open_slots.append(p)
            else:
                # no free half hour in the slot: the person does what they have to
                busiest = [c.action for c in frame.commitments_in(s) if c.action]
                forced[p] = ACTIONS.index(busiest[0]) if busiest else ACTIONS.index("ADMIN_WORK")
                notes.append(f"{SLOTS[s]}: no free half hour between commitments, no suggestion")
        for s, action in today.fixed.items():
            if s in today.asleep:
                continue  # the day sleep's own block says when and why
            if s == 3 and today.tonight is not None:
                c = today.tonight
                notes.append(f"night: {c.title} {c.start:%H:%M}-{c.end:%H:%M} "
                             f"({elapsed_min(c.start, c.end) / 60:.1f} h): no bedtime tonight")
                continue
            if s >= first:
                held = today.commitments_in(s)
                titles = ", ".join(f"{c.title} {c.start:%H:%M}-{c.end:%H:%M}" for c in held[:3])
                how = " (titles not recognised: planned as a work-like commitment)" if s in today.fixed_unclassified else ""
                notes.append(f"{SLOTS[s]}: your calendar decides ({titles}): no suggestion, planned as {action}{how}")

        # the terms a person would sign (agent.day.objective): answers by the kind of day, the
        # habit prior, no favour for what the person has never done, diminishing returns
        done = done_actions(self.did, calendar, x.day)
        penalty = np.zeros((len(slots), len(ACTIONS)))
        for p, (d, s) in enumerate(slots):
            if p in forced:
                continue
            kind = kind_today if d == x.day else kind_tomorrow
            for a, name in enumerate(ACTIONS):
                penalty[p, a] = (book.penalty(kind, SLOTS[s], name)
                                 - HABIT_WEIGHT * habit.get(SLOTS[s], {}).get(name, 0.0)
                                 + (NOVEL_COST if name not in done and name != "SLEEP" else 0.0))
        day_of = np.array([-1 if p in forced else (d - x.day).days for p, (d, _s) in enumerate(slots)])
        variety = Variety(day_of, np.zeros((2, len(ACTIONS))), week_counts(x.recent_blocks, x.day),
                          scale=book.repeat_scale())

        bs = x.belief
        params = bs.sample_params(x.n_samples, rng=np.random.default_rng(x.seed))
        params[0] = bs.profile_estimate().to_array()
        residual = None
        departures: list[dict[str, Any]] = []
        if x.dynamics is not None and x.dynamics.fitted:
            r = np.array(x.dynamics.plan_residual(), dtype=np.float64)
            for action, meter in x.contradicted:
                r[ACTIONS.index(action), METERS.index(meter)] = 0.0
            if np.any(r != 0.0):
                residual = np.broadcast_to(r, (len(params), *r.shape))
            # in the plan's units (the table's effect plus the person's departure), as the
            # blocks' expected effects
            departures = [{**d, "action": ACTIONS[d["action"]], "meter": METERS[d["meter"]],
                           "table": TABLE[d["action"], d["meter"]],
                           "fitted": TABLE[d["action"], d["meter"]] + r[d["action"], d["meter"]]}
                          for d in x.dynamics.departures()
                          if (ACTIONS[d["action"]], METERS[d["meter"]]) not in x.contradicted]
        model = PlanModel(params, bs.w, residual=residual)
        meters = np.clip(np.asarray(x.meters, dtype=np.float64), 0.0, 1.0)
        slot0 = slots[0][1] if slots else 0
        info = (bs.prior_prec + bs.data_precision(), INFO_WEIGHT)
        plan, score = plan_horizon(model, meters, slot0, len(slots), forced, allowed, penalty, info=info,
                                   variety=variety)

        available = person_facts(x.facts, x.day)
        # "last night" is the last main sleep before now, by the person's own sleep records
        if (last_sleep := sleep_fact(x.nights, cutoff, x.tz)) is not None:
            available["sleep"] = last_sleep
        else:
            available.pop("sleep", None)
        available.update(belief_facts(bs.belief(), bs.belief_sd()))
        nxt_first = min((c.start for c in tomorrow.commitments if c.start >= tomorrow.wake - timedelta(hours=3)),
                        default=None)
        bed, bed_reason = bedtime(today, nxt_first, habits, tomorrow.wake,
                                  recent_beds=[n.bed for n in sorted(x.nights, key=lambda n: n.wake)[-14:]],
                                  suggested=x.recent_bedtimes)
        night = (bed, max(tomorrow.wake, shifted(bed, habits.need_min)))
        if nxt_first is not None and nxt_first < tomorrow.wake:
            night = (bed, shifted(nxt_first, -60))
        if tomorrow.sleeps and tomorrow.sleeps[0].start < night[1]:
            night = (bed, max(bed + timedelta(minutes=60), tomorrow.sleeps[0].start))

        dp = DayPlan(
            day=x.day, tz=x.tz, frame=today, blocks=[], notes=notes,
            fixed={SLOTS[s]: a for s, a in today.fixed.items() if s >= first},
            belief=tuple(float(v) for v in bs.belief()), belief_sd=tuple(float(v) for v in bs.belief_sd()),
            horizon=[(d.isoformat(), SLOTS[s], ACTIONS[int(a)]) for (d, s), a in zip(slots, plan, strict=True)],
            score=score,
        )
        dp._ctx = {"model": model, "plan": plan, "meters": meters, "slot0": slot0, "slots": slots,
                   "allowed": allowed, "penalty": penalty, "available": available, "night": night,
                   "bed_reason": bed_reason, "book": book, "kind": kind_today, "info": info, "departures": departures,
                   "variety": variety, "lengths": lengths, "avoid": avoided, "done": done}
        for p in open_slots:
            block = self._block(dp, p, ACTIONS[int(plan[p])], "planner")
            if block is not None:
                dp.blocks.append(block)
        for span in today.sleeps:
            block = self._sleep_block(dp, span)
            if block is not None:
                dp.blocks.append(block)
        dp.blocks = distinct_reasons(_one_at_a_time(dp.blocks, today.commitments))
        return dp

    def _sleep_block(self, dp: DayPlan, span: SleepSpan) -> Block | None:
        """The day sleep after a night shift, or the sleep before the first of a run: a SLEEP
        block where the person's own data says they sleep."""
        ctx = dp._ctx
        if self.x.now is not None and span.end <= self.x.now:
            return None
        lo = slot_window(dp.day, 0, dp.tz)[0]
        _, s = slot_of_time(max(span.start, lo).astimezone(dp.tz))
        pos = next((p for p, (d, sl) in enumerate(ctx["slots"]) if d == dp.day and sl >= s), None)
        effect: dict[str, float] = {}
        if pos is not None:
            plan = np.array(ctx["plan"], dtype=np.int64)
            plan[pos] = SLEEP
            eff = expected_effect(ctx["model"], plan, ctx["meters"], ctx["slot0"], pos)
            effect = {m: round(float(v), 3) for m, v in zip(METERS, eff, strict=True) if abs(v) >= MIN_EFFECT}
        facts = [Fact("pattern", span.reason, 3.0), *facts_for("SLEEP", ctx["available"], limit=1)]
        head = ("Sleep after your night shift" if span.kind == "day_sleep" else "Sleep before tonight's shift")
        exp = ", ".join(f"{m} {v:+.2f}" for m, v in sorted(effect.items(), key=lambda kv: -abs(kv[1]))[:3])
        why = "; ".join(f.text for f in facts[:2])
        text = f"{head} {span.start:%H:%M}-{span.end:%H:%M}: {why}." + (f" Expected: {exp}." if exp else "")
        return Block(SLOTS[s], "SLEEP", span.start, span.end, span.kind, text, [f.text for f in facts], effect)

    # -- blocks ---------------------------------------------------------------------------------
    def _block(self, dp: DayPlan, pos: int, action: str, chosen_by: str) -> Block | None:
        ctx = dp._ctx
        _, s = ctx["slots"][pos]
        placement = place(dp.frame, s, action, night=ctx["night"] if s == 3 else None, lengths=ctx["lengths"],
                          ok=_ok(dp.frame, ctx["avoid"].get(s, set())))
        if placement is None:
            return None
        plan = np.array(ctx["plan"], dtype=np.int64)
        plan[pos] = ACTIONS.index(action)
        eff = expected_effect(ctx["model"], plan, ctx["meters"], ctx["slot0"], pos)
        effect = {m: round(float(v), 3) for m, v in zip(METERS, eff, strict=True) if abs(v) >= MIN_EFFECT}
        if not effect:
            i = int(np.argmax(np.abs(eff)))
            effect = {METERS[i]: round(float(eff[i]), 3)}
        pref = (self.x.preferred_times or {}).get(action)
        moved_to = None
        if pref is not None and placement.kind == "block":
            placement, moved_to = prefer_time(dp.frame, s, placement, action, pref), pref
        novel = action != "SLEEP" and action not in ctx["done"]
        facts = self._facts(dp, s, action, placement, novel)
        if moved_to is not None and placement.start.astimezone(dp.frame.tz).time() == moved_to:
            facts.append(Fact("moved", f"you moved Rhythm's {action.lower().replace('_', ' ')} block to "
                              f"{moved_to:%H:%M} in your calendar", 0.0))
        block = Block(SLOTS[s], action, placement.start, placement.end, placement.kind,
                      _rationale(action, placement, facts, effect, ctx["bed_reason"], novel),
                      [f.text for f in facts], effect, chosen_by,
                      context=context_of(dp.frame, placement.start, placement.end))
        block._parts = (placement, facts, effect, ctx["bed_reason"], novel)
        return block

    def _facts(self, dp: DayPlan, slot: int, action: str, placement: Placement, novel: bool) -> list[Fact]:
        """The facts behind ``action`` in this placement; ``novel``: not done in four weeks
        (its "since" fact looks back 28 days, not 14)."""
        ctx = dp._ctx
        available = dict(ctx["available"])
        window = placement.window if placement.kind in ("block", "nap", "early_night") else None
        available.update(calendar_facts(dp.frame, slot, window))
        cutoff = self.x.now if self.x.now is not None else slot_window(dp.day, 0, dp.tz)[0]
        since = since_fact(action, self.did, dp.day, days=28 if novel else 14,
                           events=[*self.x.past_events, *self.x.events], before=cutoff)
        if since is not None:
            available["since"] = since
        # the person's own effects that speak for the action lead; one against it is said after
        own = dynamics_facts(action, ctx["departures"])
        # more facts than a rationale says (it says two): room for each block of the day to
        # lead with one no other block says (distinct_reasons)
        facts = ([f for f in own if f.key != AGAINST] + facts_for(action, available, limit=FACTS_PER_BLOCK)
                 + [f for f in own if f.key == AGAINST])
        book, kind, name = ctx["book"], ctx["kind"], SLOTS[slot]
        where = f" {KIND_WORDS[kind]}" if (kind, name, action) in book.acts else ""
        acc, ign = book.alike(kind, name, action)
        if acc + ign > 0:
            verb, k = ("ignored", ign) if ign > acc else ("accepted", acc)
            facts.append(Fact("answers", f"you {verb} {k:.0f} of {acc + ign:.0f} {name} {action} suggestions{where}",
                              0.0))
        others = []
        for a in ACTIONS:
            ac, ig = book.alike(kind, name, a)
            if a != action and ig > ac:
                others.append((a, ig))
        if others:
            n = sum(i for _, i in others)
            names = ", ".join(a for a, _ in others[:4])
            facts.append(Fact("answers", f"you ignored {n:.0f} {name} suggestion{'s' if n > 1 else ''} ({names}), "
                              f"so: {action}", 0.0))
        return facts


def distinct_reasons(blocks: list[Block]) -> list[Block]:
    """No reason twice in a day: a block's rationale says only facts no other block of the
    day says, and is rebuilt from them. The blocks with the fewest facts choose first: each
    takes a lead fact of its own, then, in a second round, a second one if one is left (two
    blocks with the same two facts lead with one each); its evidence keeps every fact, those
    it says first; with none left, the block's head and expected effect speak alone."""
    shown: set[str] = set()
    for b in blocks:  # a day sleep says its own sentence
        if getattr(b, "_parts", None) is None:
            shown.update(b.evidence[:2])
    mine = sorted((b for b in blocks if getattr(b, "_parts", None) is not None),
                  key=lambda b: (len(b._parts[1]), b.start))
    said: dict[int, list[Fact]] = {id(b): [] for b in mine}
    for _round in range(2):
        for b in mine:
            fresh = next((f for f in b._parts[1] if f.text not in shown), None)
            if fresh is not None:
                said[id(b)].append(fresh)
                shown.add(fresh.text)
    out = [b for b in blocks if getattr(b, "_parts", None) is None]
    for b in mine:
        placement, facts, effect, bed_reason, novel = b._parts
        lead = said[id(b)]
        order = lead + [f for f in facts if f not in lead]
        nb = replace(b, rationale=_rationale(b.action, placement, lead, effect, bed_reason, novel),
                     evidence=[f.text for f in order])
        nb._parts = (placement, order, effect, bed_reason, novel)
        out.append(nb)
    out.sort(key=lambda b: b.start)
    return out


def _one_at_a_time(blocks: list[Block], held: Sequence[Any]) -> list[Block]:
    """Never two blocks at once, one bedtime a night: an early night becomes the night's
    bedtime, an hour before the usual one (its wind-down from then; dropped when that is over a
    commitment); any other block that overlaps one kept before it (sleep first) goes."""
    early = next((b for b in blocks if b.kind == "early_night"), None)
    bed = next((b for b in blocks if b.kind == "bedtime"), None)
    blocks = [b for b in blocks if b.kind != "early_night"]
    if early is not None and bed is not None and early.start < bed.start:
        merged = replace(bed, start=early.start, kind="early_night", rationale=early.rationale,
                         evidence=early.evidence, expected_effect=early.expected_effect, _parts=None)
        if early._parts is not None:
            placement, facts, effect, _reason, novel = early._parts
            parts = (replace(placement, start=early.start, end=bed.end), facts, effect, f"{bed.start:%H:%M}", novel)
            merged = replace(merged, rationale=_rationale("SLEEP", *parts), _parts=parts)
        if not any(merged.start < c.end and c.start < merged.end for c in held):
            blocks = [merged if b is bed else b for b in blocks]
    out: list[Block] = []
    order = sorted(blocks, key=lambda b: (b.action != "SLEEP", b.start))
    for b in order:
        if any(b.start < o.end and o.start < b.end for o in out):
            continue
        out.append(b)
    out.sort(key=lambda b: b.start)
    return out


def _rationale(action: str, p: Placement, facts: list[Fact], effect: dict[str, float], bed_reason: str,
               novel: bool = False) -> str:
    when = f"{p.start:%H:%M}-{p.end:%H:%M}"
    if action == "SLEEP":
        head = {
            "bedtime": f"In bed by {p.start:%H:%M} ({bed_reason})",
            "sleep_in": f"Sleep in until {p.end:%H:%M}",
            "nap": f"A short nap {when}",
            # an early night is tonight's bedtime an hour early (``_one_at_a_time``); bed_reason
            # is then the bedtime it replaces
            "early_night": f"An early night: in bed by {p.start:%H:%M}, not {bed_reason}",
        }[p.kind]
    else:
        head = f"{PHRASES[action]} {when}" + (" (a try, new for you lately)" if novel else "")
    why = "; ".join(f.text for f in facts[:2]) if facts else ""
    exp = ", ".join(f"{m} {v:+.2f}" for m, v in sorted(effect.items(), key=lambda kv: -abs(kv[1]))[:3])
    return f"{head}: {why}. Expected: {exp}." if why else f"{head}. Expected: {exp}."


def _position_of(dp: DayPlan, slot: str) -> int | None:
    """Today's ``slot``'s position in the plan's horizon (None: it has passed)."""
    return next((p for p, (d, s) in enumerate(dp._ctx["slots"]) if d == dp.day and SLOTS[s] == slot), None)


def slot_actions(dp: DayPlan, slot: str) -> list[str]:
    """The actions today's ``slot`` can hold in this plan (its free time, the kind of slot, the
    day's recovery): what a local model may choose there; [] for a slot with no open time."""
    return [ACTIONS[a] for a in _allowed_at(dp, _position_of(dp, slot))]


def _allowed_at(dp: DayPlan, pos: int | None) -> list[int]:
    """The actions (indices, sorted) the plan's position ``pos`` can hold; [] for none."""
    return [] if pos is None else sorted(dp._ctx["allowed"].get(pos, set()))


def objective_facts(dp: DayPlan, slot: str) -> dict[str, float]:
    """The planner's objective for each action today's ``slot`` can hold, the rest of the plan
    unchanged (``horizon.position_values``: the meters' expected rewards over the horizon
    under the belief's samples, and the person's answers on days of this kind, their habits
    at this time, no favour for what they have never done, what Rhythm offered the last six
    days and what trying it would teach), relative to the action it rates best (0; the others
    below): the numbers ``with_model_pick`` vets a model's pick by, and what a v6 model reads
    ({} for a slot with no open time)."""
    pos = _position_of(dp, slot)
    allowed = _allowed_at(dp, pos)
    if not allowed:
        return {}
    values = _values_at(dp, pos, allowed)
    best = max(values.values())
    return {ACTIONS[a]: v - best for a, v in values.items()}


def _values_at(dp: DayPlan, pos: int, allowed: list[int]) -> dict[int, float]:
    """The plan's objective with each of ``allowed`` at ``pos`` (``horizon.position_values``)."""
    ctx = dp._ctx
    return position_values(ctx["model"], ctx["plan"], ctx["meters"], ctx["slot0"], pos, allowed, ctx["penalty"],
                           ctx["info"], ctx["variety"])


def with_model_pick(planner: DayPlanner, dp: DayPlan, slot: str, action: str, model_name: str) -> tuple[bool, str]:
    """Put a local model's pick for ``slot`` through the planner's checks. Accepted: the
    slot's block becomes the model's (same placement rules, evidence and effect). Refused
    (and the plan says why) when the day cannot hold it or the belief's model rates it
    clearly worse than the planner's choice."""
    ctx = dp._ctx
    pos = _position_of(dp, slot)
    current = next((b for b in dp.blocks if b.slot == slot and b.kind not in ("day_sleep", "shift_nap")), None)
    if pos is None or current is None:
        return False, f"{model_name} chose {action} for the {slot}, which has no open time to plan"
    a = ACTIONS.index(action)
    allowed = sorted(ctx["allowed"].get(pos, {SLEEP} if SLOTS.index(slot) == 3 else set()))
    if a not in allowed:
        return False, (f"{model_name} chose {action} for the {slot}, which the day cannot hold there; "
                       f"the planner's {current.action} stands")
    if action == current.action:
        dp.blocks[dp.blocks.index(current)] = replace(current, chosen_by=model_name)
        return True, f"{model_name} agrees: {action} in the {slot}"
    values = _values_at(dp, pos, allowed)
    best, worst = max(values.values()), min(values.values())
    drop = values[ACTIONS.index(current.action)] - values[a]
    if drop > 0.02 and drop > CLEARLY_WORSE * (best - worst):
        return False, (f"{model_name} chose {action} for the {slot}; the planner's model rates it clearly worse "
                       f"({drop:.2f} less expected reward over the next {len(ctx['slots'])} slots), "
                       f"so {current.action} stands")
    block = planner._block(dp, pos, action, model_name)
    if block is None:
        return False, f"{model_name} chose {action} for the {slot}, which does not fit; {current.action} stands"
    dp.blocks[dp.blocks.index(current)] = block
    dp.blocks = distinct_reasons(dp.blocks)
    return True, f"{action} in the {slot} chosen by {model_name}"
