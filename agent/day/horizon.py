"""A rolling-horizon planner for real days: no end of the week, calendar slots forced.

The simulator's planner maximises the grade of a week that ends on Sunday night; a person's
week does not end, so on real days nothing may come from the simulated week's last step.
Here a plan covers the next ``length`` slots (the rest of today and tomorrow) and is scored
by the expected spec-5 rewards of its steps (level terms included, so the meters' level
counts at every step) plus a *continuation value* for the meters it leaves behind: what the
same levels would earn over ``CONTINUATION_STEPS`` more steps. Slots the calendar decides
are *forced* (the look-ahead knows what the person will do there); a slot may *allow* only
the actions its free time can hold; an answer history may make an action less attractive in
a slot (``penalty``). Search: best single substitution, as the simulator's planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from agent.world import INFO, PlanModel, expected_belief_accuracy
from simulator import spec
from simulator.policies import heuristic_action

CONTINUATION_STEPS = 4.0
ROUNDS = 8
#: What the meters left at the end of the horizon are worth beyond their level, in reward
#: units per unit of meter: the grade's lasting terms (progress and connection, spec 8),
#: valued at the end of *every* horizon instead of once at the end of a simulated week.
#: Set by measurement (docs/agent.md, "No end of the week").
TERMINAL_SCALE = 20.0
#: Weight (reward units) of the belief accuracy a plan is expected to leave: what trying an
#: action teaches about the person is worth something on a real day too. Set by measurement.
INFO_WEIGHT = 20.0
TERMINAL = TERMINAL_SCALE * np.array(
    [0.0, 0.0, spec.GRADER_WEIGHTS["progress"], 0.0, spec.GRADER_WEIGHTS["connection"]]
)


def _score(
    model: PlanModel,
    plans: np.ndarray,
    meters: np.ndarray,
    slot0: int,
    penalty: np.ndarray | None,
    terminal: np.ndarray | None = None,
    info: tuple[np.ndarray, float] | None = None,
    variety: Any = None,
) -> np.ndarray:
    sim = model.simulate(plans, meters, slot0)
    r = sim["rewards"].sum(axis=-1)  # (B, K)
    end = sim["meters"]  # (B, K, 5)
    cont = CONTINUATION_STEPS * spec.REWARD_LEVEL_SCALE * (end @ model.w - spec.REWARD_LEVEL_BASELINE)
    cont = cont + end @ (TERMINAL if terminal is None else terminal)
    s = (r + cont).mean(axis=1) - model.risk_cost * sim["risk"].mean(axis=1)
    return s + objective_terms(plans, slot0, penalty, info, variety)


def objective_terms(
    plans: np.ndarray,
    slot0: int,
    penalty: np.ndarray | None,
    info: tuple[np.ndarray, float] | None = None,
    variety: Any = None,
) -> np.ndarray:
    """(B,) the part of each plan's score that is not the meters' expected rewards: the
    answers, habit and novelty ``penalty``, what the plan would teach about the person
    (``info``) and the cost of repeats (``variety``)."""
    s = np.zeros(plans.shape[0])
    if penalty is not None:
        s = s - penalty[np.arange(plans.shape[1])[None, :], plans].sum(axis=1)
    if info is not None:  # what the plan would teach about the person (the belief's precision)
        precision, weight = info
        slots = (slot0 + np.arange(plans.shape[1])) & 3
        prec = precision + INFO[slots[None, :], plans].sum(axis=1)
        s = s + weight * expected_belief_accuracy(prec)
    if variety is not None:  # diminishing returns for repeats (agent.day.objective.Variety)
        s = s - variety.cost(plans)
    return s


def plan_horizon(
    model: PlanModel,
    meters: np.ndarray,
    slot0: int,
    length: int,
    forced: Mapping[int, int] | None = None,
    allowed: Mapping[int, set[int]] | None = None,
    penalty: np.ndarray | None = None,
    rounds: int = ROUNDS,
    terminal: np.ndarray | None = None,
    info: tuple[np.ndarray, float] | None = None,
    variety: Any = None,
) -> tuple[np.ndarray, float]:
    """The best plan found for the next ``length`` slots from ``slot0`` (0 morning .. 3
    night) and its score. ``forced``: position -> action; ``allowed``: position -> actions
    (others never chosen); ``penalty``: (length, 10) subtracted from the score; ``variety``:
    the cost of repeats (``agent.day.objective.Variety``)."""
    forced = dict(forced or {})
    allowed = {p: set(a) for p, a in (allowed or {}).items()}
    meters = np.asarray(meters, dtype=np.float64)
    options = []
    for p in range(length):
        if p in forced:
            options.append([forced[p]])
        else:
            opts = sorted(allowed.get(p, set(range(spec.N_ACTIONS))))
            options.append(opts or [spec.SLEEP])
    plan = np.empty(length, dtype=np.int64)
    m = meters
    for p in range(length):  # start from the heuristic, inside the constraints
        h = heuristic_action(m, (slot0 + p) & 3)
        plan[p] = h if h in options[p] else options[p][0]
    best = float(_score(model, plan[None, :], meters, slot0, penalty, terminal, info, variety)[0])
    for _ in range(rounds):
        cands = [plan]
        for p in range(length):
            for a in options[p]:
                if a != plan[p]:
                    c = plan.copy()
                    c[p] = a
                    cands.append(c)
        if len(cands) == 1:
            break
        arr = np.stack(cands)
        s = _score(model, arr, meters, slot0, penalty, terminal, info, variety)
        i = int(np.argmax(s))
        if s[i] <= best + 1e-12:
            break
        best, plan = float(s[i]), arr[i]
    return plan, best


def position_values(
    model: PlanModel,
    plan: np.ndarray,
    meters: np.ndarray,
    slot0: int,
    pos: int,
    actions: list[int],
    penalty: np.ndarray | None = None,
    info: tuple[np.ndarray, float] | None = None,
    variety: Any = None,
) -> dict[int, float]:
    """The plan's score with each of ``actions`` at ``pos`` (the rest unchanged)."""
    s = _score(model, with_each(plan, pos, actions), np.asarray(meters, dtype=np.float64), slot0, penalty,
               info=info, variety=variety)
    return {a: float(v) for a, v in zip(actions, s, strict=True)}


def with_each(plan: np.ndarray, pos: int, actions: list[int]) -> np.ndarray:
    """(len(actions), L): the plan with each of ``actions`` at ``pos``."""
    cands = np.repeat(np.asarray(plan, dtype=np.int64)[None, :], len(actions), axis=0)
    cands[:, pos] = actions
    return cands


def expected_effect(model: PlanModel, plan: np.ndarray, meters: np.ndarray, slot0: int, pos: int) -> np.ndarray:
    """The mean meter change (5,) the step at ``pos`` is expected to make, for this person
    (averaged over the belief's samples), after the plan's steps before it."""
    meters = np.asarray(meters, dtype=np.float64)
    plan = np.asarray(plan, dtype=np.int64)
    after = model.simulate(plan[None, : pos + 1], meters, slot0)["meters"][0]  # (K, 5)
    if pos > 0:
        before = model.simulate(plan[None, :pos], meters, slot0)["meters"][0]
    else:
        before = np.broadcast_to(meters, after.shape)
    return (after - before).mean(axis=0)
