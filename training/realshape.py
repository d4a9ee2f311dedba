"""Weeks shaped like the product's, for the student's data and for measuring it.

On real days the student reads a week built by ``rhythm.derive.observation_records``: meters
scored from wearable data (noisy, often missing), slot actions classified from data (most
slots unknown), the day's fixed slots from the calendar, and answers. This module makes
simulator weeks look the same, through the product's own observation builder
(``mapping.observations.observations_from_states``), and gives the teacher what the product
gives its Bayesian agent:

- :class:`Shape` and :func:`draw_shape`: one week's conditions (readings missing at random
  and in runs, meters the product cannot measure stuck at one level, unknown actions, how
  often the person follows the recommendation, a calendar, earlier weeks the teacher has
  seen, where the prompt starts);
- :class:`ProductStream`: the simulated person's slots as stored slot states (noisy readings
  with gaps, the action when classified) and the observation of each slot as the product
  builds it;
- :func:`teacher_view` (what ``rhythm.recommend`` feeds the belief: deltas of unobserved
  meters NaN, the reward NaN unless every meter was observed) and
  ``agent.prompting.observed_view`` (what the v4 prompt shows);
- :class:`StreamTeacher`: the Bayesian agent on such a stream, as the product runs it: the
  belief fed every masked observation (earlier weeks too), the rest of the week planned
  afresh at every decision (the person did not follow the last plan);
- :func:`product_week` and :func:`teacher_week` (clean and feedback-mode weeks): one
  labelled week (``rhythm-rollouts/2``).

Used by training/rollouts.py (the data) and benchmarks/student_real.py (the measurement).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import date, timedelta
from typing import Any

import numpy as np

from agent.belief import filter_belief
from agent.prompting import observed_view
from mapping.observations import belief_view
from simulator import spec
from simulator.policies import heuristic_action
from training.weeks import jsonable, teacher_policy

#: Meters computed from real data are noisy: ``rhythm.recommend.REAL_NOISE_SD`` (a test
#: checks the two agree); the product's belief and the teacher of product weeks use it.
REAL_NOISE_SD = 0.08
FORMAT = "rhythm-rollouts/2"
#: Any Monday: the product's observation builder works on dates.
MONDAY = date(2024, 1, 1)
SHAPE_STREAM = 0x534850  # "SHP": the week's shape and readings
UNKNOWN_ACTION = spec.N_ACTIONS


@dataclass(frozen=True)
class Shape:
    """The conditions of one training week."""

    # "clean": the simulator protocol's week; "product": a real-shaped one; "feedback": a week
    # of the simulator's feedback mode
    kind: str = "clean"
    calendar: bool = False  # some slots fixed by commitments (simulator.calendar.CalendarWeek)
    missing_share: float = 0.0  # share of slots with no meter reading at all
    missing_run: float = 1.0  # mean length of a gap, in slots
    meter_missing: float = 0.0  # probability that one meter of a read slot is missing
    unknown_share: float = 0.0  # share of free slots whose action nobody classified
    follow: float = 1.0  # probability that the person does what the teacher recommends
    history_weeks: int = 0  # earlier weeks of the person the teacher's belief has seen
    start: int = 0  # the first step the prompt shows (a week joined mid-week)
    noise_sd: float = 0.0  # extra noise on every reading
    # meters the product cannot measure for this person: reported at one level all week
    # (real connection sits at its usual, 0.35-0.50, without social data), as (meter, level)
    stuck: tuple[tuple[int, float], ...] = ()
    # share of recommendations the person answers in the app (product weeks): accepted when
    # they did it, ignored when not; the teacher reads answers as ``rhythm recommend`` does
    answered: float = 0.0
    # feedback weeks (kind "feedback"): the simulator's feedback mode under this condition
    observe: str = "clean"
    # clean weeks in a misspecified world (simulator.worlds), labelled by the robust teacher
    world: str = "nominal"
    # the week's starting meters instead of the simulator's draw (depleted weeks); () = drawn
    start_meters: tuple[float, ...] = ()


def draw_shape(rng: np.random.Generator, product_share: float, calendar_share: float = 0.5) -> Shape:
    """A week's shape: with probability ``product_share`` real-shaped (noise sd 0.08, 30-60%
    of slots without readings in runs of 1-6, 60-90% of actions unknown in most weeks and
    fewer in some, the person following 0-100% of recommendations, 0-2 earlier weeks, a
    mid-week start in one week of ten), else the simulator protocol's clean week; a
    calendar in ``calendar_share`` of either."""
    calendar = bool(rng.random() < calendar_share)
    if rng.random() >= product_share:
        return Shape(kind="clean", calendar=calendar)
    unknown = rng.uniform(0.6, 0.9) if rng.random() < 0.7 else rng.uniform(0.0, 0.6)
    p_stuck = (0.1, 0.15, 0.2, 0.15, 0.4)  # V C P S N
    stuck = tuple((k, round(float(rng.uniform(0.3, 0.7)), 2)) for k in range(spec.N_METERS) if rng.random() < p_stuck[k])
    return Shape(
        stuck=stuck,
        kind="product",
        calendar=calendar,
        missing_share=float(rng.uniform(0.3, 0.6)),
        missing_run=float(rng.uniform(1.0, 6.0)),
        meter_missing=float(rng.choice([0.0, 0.05, 0.15])),
        unknown_share=float(unknown),
        follow=float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])),
        history_weeks=int(rng.integers(0, 3)),
        start=int(rng.integers(1, spec.EPISODE_STEPS - 4)) if rng.random() < 0.1 else 0,
        noise_sd=REAL_NOISE_SD,
        answered=float(rng.choice([0.0, 0.3, 0.7, 1.0])),
    )


#: Worlds of the robust teacher's weeks: every single departure of the suite and all at once.
TRAINING_WORLDS = ("effects", "timing", "noise", "kind", "drift", "kind+drift", "hidden", "all")
#: Observation conditions of feedback weeks and their shares.
FEEDBACK_OBSERVE = (("noisy", 0.5), ("answers-only", 0.25), ("clean", 0.25))


#: Depleted weeks: the meter emptied (progress half the time) and the range it starts in.
DEPLETED_PROGRESS_SHARE = 0.5
DEPLETED_LEVEL = (0.0, 0.08)


def depleted(shape: Shape, rng: np.random.Generator) -> Shape:
    """``shape`` starting with one meter near empty (progress half the time, else any other)
    and the others anywhere in 0.15-0.85: the state of a person back from a break, a
    pause in work or a bad stretch, which the simulator's own draw almost never starts in."""
    m = rng.uniform(0.15, 0.85, spec.N_METERS)
    k = 2 if rng.random() < DEPLETED_PROGRESS_SHARE else int(rng.choice([0, 1, 3, 4]))
    m[k] = rng.uniform(*DEPLETED_LEVEL)
    return replace(shape, start_meters=tuple(round(float(x), 3) for x in m))


def draw_week_shape(
    seed: int,
    product_share: float,
    calendar_share: float = 0.5,
    feedback_share: float = 0.0,
    world_share: float = 0.0,
    depleted_share: float = 0.0,
) -> Shape:
    """The shape of training week ``seed``: with probability ``feedback_share`` a week of the
    simulator's feedback mode (:func:`teacher_week`; noisy half the time, answers-only and
    clean a quarter each), with probability ``world_share`` a clean week in a misspecified
    world (:data:`TRAINING_WORLDS`) that the robust teacher labels, else
    :func:`draw_shape`'s (with all shares 0 exactly the weeks earlier data had). With
    probability ``depleted_share`` a product or clean week starts :func:`depleted`."""
    shape = draw_shape(np.random.default_rng([int(seed), SHAPE_STREAM, 0]), product_share, calendar_share)
    if depleted_share > 0:
        rng = np.random.default_rng([int(seed), SHAPE_STREAM, 4])
        if rng.random() < depleted_share:
            shape = depleted(shape, rng)
    if feedback_share <= 0 and world_share <= 0:
        return shape
    rng = np.random.default_rng([int(seed), SHAPE_STREAM, 2])
    u = rng.random()
    if u < feedback_share:
        names, p = zip(*FEEDBACK_OBSERVE, strict=True)
        return Shape(kind="feedback", observe=str(rng.choice(names, p=p)))
    if u < feedback_share + world_share:
        return Shape(kind="clean", world=str(rng.choice(TRAINING_WORLDS)))
    return shape


def gaps(rng: np.random.Generator, n: int, share: float, mean_run: float) -> np.ndarray:
    """(n,) bool: slots without readings, a two-state Markov chain whose gaps last
    ``mean_run`` slots on average and cover ``share`` of the slots in the long run."""
    out = np.zeros(n, dtype=bool)
    if share <= 0:
        return out
    leave_gap = 1.0 / max(1.0, mean_run)
    enter_gap = min(1.0, leave_gap * share / max(1e-9, 1.0 - share))
    state = rng.random() < share
    for i in range(n):
        out[i] = state
        state = (rng.random() >= leave_gap) if state else (rng.random() < enter_gap)
    return out


#: What ``rhythm recommend`` feeds the belief (one function for both).
teacher_view = belief_view


class ProductStream:
    """A simulated person's slots as the product stores them, and each slot's observation as
    the product builds it (``mapping.observations.observations_from_states``).

    ``add(meters, action, rng)`` stores the slot that just ended: its meters read with noise
    and gaps, its action if classified. Slot 0 is the one before the week (Sunday night,
    from the reset meters); ``observation(t)`` is the product's (observation, info) for
    step ``t`` of the week (t = 0 .. 28)."""

    def __init__(self, shape: Shape, rng: np.random.Generator, calendar: np.ndarray | None = None):
        self.shape = shape
        self.rng = rng
        n = spec.EPISODE_STEPS + 1
        self.missing = gaps(rng, n, shape.missing_share, shape.missing_run)
        self.unknown = rng.random(n) < shape.unknown_share
        self.calendar = calendar
        self.states: list[Any] = []

    def add(self, meters, action: int | None) -> None:
        from mapping.observations import SlotState

        i = len(self.states)
        m = np.asarray(meters, dtype=np.float64)
        read = np.clip(m + self.rng.normal(0.0, self.shape.noise_sd, spec.N_METERS), 0.0, 1.0)
        for k, level in self.shape.stuck:
            read[k] = level
        lost = self.missing[i] | (self.rng.random(spec.N_METERS) < self.shape.meter_missing)
        values = tuple(None if lost[k] else round(float(read[k]), 4) for k in range(spec.N_METERS))
        t = i - 1  # the step this slot was (-1: the night before the week)
        known = action is not None and 0 <= action < spec.N_ACTIONS
        if known and t >= 0:
            fixed = self.calendar is not None and self.calendar[t] < spec.N_ACTIONS
            night = t % spec.SLOTS_PER_DAY == 3 and action == spec.SLEEP
            # a commitment's action comes from the calendar, a night's sleep from the
            # wearable: both are known more often than a free day slot
            p_unknown = 0.1 if fixed else (0.2 * self.shape.unknown_share if night else None)
            known = not (self.rng.random() < p_unknown if p_unknown is not None else self.unknown[i])
        day = MONDAY + timedelta(days=(t // spec.SLOTS_PER_DAY) if t >= 0 else -1)
        slot = t % spec.SLOTS_PER_DAY
        self.states.append(SlotState(day, slot, values, 0.8, spec.ACTIONS[action] if known else None, 0.8))

    def observation(self, t: int) -> tuple[dict[str, Any], dict[str, Any]]:
        from mapping.observations import observations_from_states

        obs, info = observations_from_states(self.states, MONDAY, MONDAY + timedelta(days=t // spec.SLOTS_PER_DAY))[t]
        # after Sunday night the product is on next Monday (t = 0); the week's view ends at 28
        return ({**obs, "t": t} if t >= spec.EPISODE_STEPS else obs), info


class StreamTeacher:
    """The Bayesian agent on a stream as the product runs it: the belief is fed every
    masked observation in order (:meth:`observe`, earlier weeks too, ``week=False``), and
    every decision (:meth:`decide`) plans the rest of the week afresh from the current
    (filled) meters and this week's rewards (unknown ones as 0): the person did not
    necessarily follow the last plan."""

    def __init__(self, noise_sd: float = REAL_NOISE_SD):
        from agent.teacher import BayesAgent

        self.agent = BayesAgent(noise_sd=noise_sd)
        self.rewards: list[float] = []

    def reset(self, seed: int) -> None:
        self.agent.reset(seed)
        self.rewards = []

    def observe(self, obs: dict[str, Any], week: bool = True) -> None:
        self.agent.belief_state.update_from_observation(obs)
        if week and int(obs["t"]) >= 1:
            r = float(np.asarray(obs["last_reward"], dtype=np.float64).reshape(-1)[0])
            self.rewards.append(r if np.isfinite(r) else 0.0)

    def answer(self, meters, slot: int, action: int, accepted: bool) -> None:
        """An answer to a recommendation, read as ``rhythm recommend`` reads the person's
        (the answer model; ``meters``: the slot's readings then, NaN where unknown)."""
        self.agent.belief_state.observe_answer(meters, slot, action, accepted)

    def decide(self, meters, t: int) -> tuple[int, np.ndarray]:
        t = int(t)
        week = ([0.0] * t + self.rewards)[-t:] if t else []
        plan = self.agent.plan_ahead(np.asarray(meters, dtype=np.float64), t, week)
        return (plan[0][0] if plan else spec.SLEEP), self.agent.belief()


def habit(meters, slot: int, rng: np.random.Generator) -> int:
    """What a person does on their own: the heuristic baseline's action (spec 9) mostly,
    anything now and then."""
    if rng.random() < 0.7:
        return heuristic_action(np.asarray(meters, dtype=np.float64), slot)
    return int(rng.integers(0, spec.N_ACTIONS))


def _reset_options(shape: Shape) -> dict[str, Any] | None:
    return {"meters": list(shape.start_meters)} if shape.start_meters else None


def _week_env(condition: str, calendar: bool, world: str = "nominal"):
    from simulator.calendar import CalendarWeek
    from simulator.env import RhythmEnv

    env = RhythmEnv(condition=condition, world=world)
    return CalendarWeek(env) if calendar else env


def _calendar_context(cal: np.ndarray | None, rng: np.random.Generator | None = None) -> list[dict[str, Any]]:
    """The fixed slots as the prompt's ``cal`` items; with ``rng`` one in ten unclassified
    (the product's commitments whose titles say nothing)."""
    if cal is None:
        return []
    out = []
    for t, a in enumerate(np.asarray(cal).tolist()):
        if a < spec.N_ACTIONS:
            action = None if rng is not None and rng.random() < 0.1 else spec.ACTIONS[a]
            out.append({"day": t // spec.SLOTS_PER_DAY, "slot": t % spec.SLOTS_PER_DAY, "action": action})
    return out


def _record(seed, condition, teacher, shape, views, context, answers, actions, env, info,
            filters) -> dict[str, Any]:
    grade = env.unwrapped.grade().to_dict()
    return {
        "format": FORMAT,
        "seed": int(seed),
        "condition": condition,
        "teacher": teacher,
        "shape": asdict(shape),
        "views": [jsonable(v) for v in views],
        "context": context,
        "answers": answers,
        "actions": actions,
        "filters": filters,
        "belief_truth": [float(x) for x in info["belief_truth"]],
        "profile": info["profile"],
        "grade": grade,
    }


def teacher_week(seed: int, condition: str, shape: Shape, teacher: str = "bayes") -> dict[str, Any]:
    """A week the teacher plays itself (``act``, its plan carried from step to step): the
    simulator protocol's clean week (in ``shape.world``; with a calendar, fixed slots do the
    commitment and carry no target), or for ``shape.kind == "feedback"`` a week of the
    simulator's feedback mode (feedback.md) under ``shape.observe``: the teacher configured
    for the mode, as ``rhythm sim eval --feedback`` runs it, the person answering by the
    answer model and doing their habit when they ignore; the views are what the agent
    observes (``?`` where nothing was), and every answer is a ``fb`` line after its step."""
    from simulator import feedback as fb
    from simulator.env import RhythmEnv
    policy = teacher_policy(teacher)
    feedback = shape.kind == "feedback"
    if feedback:
        policy.configure(feedback=True, observe=shape.observe)
        env = RhythmEnv(condition=condition, feedback=True, observe=shape.observe)
    else:
        env = _week_env(condition, shape.calendar, shape.world)
    obs, info = env.reset(seed=int(seed), options=_reset_options(shape))
    policy.reset(int(seed))
    cal = info.get("calendar")
    views, answers, actions, items, filters = [obs], [], [], [], []
    for t in range(spec.EPISODE_STEPS):
        a, b = policy.act(obs)
        filters.append(policy.filter_state(obs))
        fixed = cal is not None and cal[t] < spec.N_ACTIONS
        belief = None if b is None else [round(float(x), 4) for x in np.asarray(b).reshape(-1)]
        answers.append(None if fixed else {"action": int(a), "belief": belief})
        step = int(a) if b is None else {"action": int(a), "belief": np.asarray(b, dtype=np.float64)}
        obs, _, _, _, info = env.step(step)
        if feedback:  # the applied action even where the agent did not see it (answers-only)
            items.append(_answer_item(t, a, int(obs["last_answer"]) == fb.ANSWER_ACCEPTED))
            actions.append(int(info["answers"][-1]["applied"]))
        else:
            actions.append(int(obs["last_action"]))
        views.append(obs)
    context = {"events": _calendar_context(cal), "feedback": items, "observe": shape.observe}
    return _record(seed, condition, teacher, shape, views, context, answers, actions, env, info, filters)


def _history_week(profile, seed: int, k: int, shape: Shape, teacher: StreamTeacher) -> None:
    """An earlier week of the same person, lived by habit, fed to the teacher's belief as
    the product feeds it (masked readings)."""
    from simulator.env import RhythmEnv

    rng = np.random.default_rng([int(seed), SHAPE_STREAM, 1 + k])
    env = RhythmEnv()
    obs, _ = env.reset(seed=int(seed) * 7 + 1 + k, options={"profile": profile})
    stream = ProductStream(shape, rng)
    stream.add(obs["meters"], None)
    for t in range(spec.EPISODE_STEPS):
        o, i = stream.observation(t)
        teacher.observe(teacher_view(o, i), week=False)
        obs, *_ = env.step(habit(obs["meters"], t % spec.SLOTS_PER_DAY, rng))
        stream.add(obs["meters"], int(obs["last_action"]))
    o, i = stream.observation(spec.EPISODE_STEPS)
    teacher.observe(teacher_view(o, i), week=False)


def product_week(seed: int, condition: str, shape: Shape) -> dict[str, Any]:
    """A real-shaped week: the person lives it (the recommendation with probability
    ``shape.follow``, else their habit; fixed slots the commitment), the product observes
    it (:class:`ProductStream`), the teacher (:class:`StreamTeacher`, fed ``history_weeks``
    earlier weeks first) labels every free step from step ``shape.start`` on."""
    rng = np.random.default_rng([int(seed), SHAPE_STREAM])
    env = _week_env(condition, shape.calendar)
    obs, info = env.reset(seed=int(seed), options=_reset_options(shape))
    cal = info.get("calendar")
    teacher = StreamTeacher(REAL_NOISE_SD)
    teacher.reset(int(seed))
    for k in range(shape.history_weeks):
        _history_week(env.unwrapped.profile, seed, k, shape, teacher)
    stream = ProductStream(shape, rng, cal)
    stream.add(obs["meters"], None)
    answer_rng = np.random.default_rng([int(seed), SHAPE_STREAM, 3])
    views, answers, actions, feedback, filters = [], [], [], [], []
    for t in range(spec.EPISODE_STEPS):
        o, i = stream.observation(t)
        teacher.observe(teacher_view(o, i))
        filters.append(filter_belief(teacher.agent.belief_state, o["meters"]))  # what it plans from
        view = observed_view(o, i["previous"]["observed"] if i.get("previous") else None)
        views.append(view)
        fixed = cal is not None and cal[t] < spec.N_ACTIONS
        if fixed or t < shape.start:
            a, belief = int(cal[t]) if fixed else habit(obs["meters"], t % spec.SLOTS_PER_DAY, rng), None
            answers.append(None)
        else:
            a, b = teacher.decide(o["meters"], t)
            belief = np.asarray(b, dtype=np.float64)
            answers.append({"action": int(a), "belief": [round(float(x), 4) for x in belief]})
            rec = int(a)
            if rng.random() >= shape.follow:
                a = habit(obs["meters"], t % spec.SLOTS_PER_DAY, rng)
            if answer_rng.random() < shape.answered:
                accepted = int(a) == rec
                teacher.answer(view["meters"], t % spec.SLOTS_PER_DAY, rec, accepted)
                feedback.append(_answer_item(t, rec, accepted))
        obs, _, _, _, info = env.step(int(a) if belief is None else {"action": int(a), "belief": belief})
        actions.append(int(obs["last_action"]))
        stream.add(obs["meters"], int(obs["last_action"]))
    o, i = stream.observation(spec.EPISODE_STEPS)
    views.append(observed_view(o, i["previous"]["observed"]))
    views = views[shape.start :]
    answers = answers[shape.start :]
    filters = filters[shape.start :]
    context = {"events": _calendar_context(cal, rng), "feedback": feedback, "observe": "noisy"}
    return _record(seed, condition, "bayes-stream", shape, views, context, answers, actions, env, info, filters)


def _answer_item(t: int, action: int, accepted: bool) -> dict[str, Any]:
    """A prompt context item for the answer to step ``t``'s recommendation."""
    return {
        "day": t // spec.SLOTS_PER_DAY,
        "slot": t % spec.SLOTS_PER_DAY,
        "action": spec.ACTIONS[int(action)],
        "response": "accepted" if accepted else "ignored",
    }
