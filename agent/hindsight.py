"""What a person's answers say the recommendation should have been (for refining the student).

After a week of answers the belief knows the person better than it did at each decision.
:func:`answer_targets` turns each answered recommendation into a training target for the
student, with that hindsight:

- an **accepted** recommendation keeps its action (the person took it up: what the student
  said worked for them);
- an **ignored** one gets the action with the best expected one-step value for this person
  among the others: under posterior samples of the profile, ``p(accept a) U(a) +
  (1 - p(accept a)) U(habit)``, the spec's answer model (feedback.md 2; ``U`` the person's
  own one-step utility, ``habit`` what they do when they ignore a recommendation);
- every target carries the hindsight belief (social, morning, work).

Pure: plain numbers in, targets out; the product (``rhythm.refine``) and the simulator
measurement (``benchmarks/refine.py``) call the same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator import spec
from simulator.dynamics import compact_params
from simulator.feedback import TAU, utilities_batch
from simulator.policies import heuristic_action

#: Posterior samples for the expected values.
N_SAMPLES = 64
#: A missing meter (real data) is taken at the person's usual level.
USUAL = 0.5


@dataclass(frozen=True)
class Answered:
    """One answered recommendation: the meters when it was made (NaN = not observed), the
    slot (0..3), the recommended action id and the answer."""

    meters: Sequence[float]
    slot: int
    action: int
    accepted: bool


@dataclass(frozen=True)
class Target:
    action: int
    belief: tuple[float, float, float]
    changed: bool  # the target differs from what was recommended
    value_gain: float  # expected one-step value of the target minus the recommendation's


def action_values(params: np.ndarray, meters, slot: int) -> np.ndarray:
    """Expected one-step value of recommending each action (10,), averaged over the profile
    samples ``params`` (K, 15): accepted with the answer model's probability, else the habit."""
    m = np.asarray(meters, dtype=np.float64)
    m = np.where(np.isfinite(m), m, USUAL)
    u = utilities_batch(compact_params(np.atleast_2d(params)), m[None, :], int(slot))  # (K, 10)
    p = 1.0 / (1.0 + np.exp(-(u - np.median(u, axis=-1, keepdims=True)) / TAU))
    habit = heuristic_action(m, int(slot))
    v = p * u + (1.0 - p) * u[:, habit : habit + 1]
    return v.mean(axis=0)


def answer_targets(belief_state, answered: Sequence[Answered], n_samples: int = N_SAMPLES) -> list[Target]:
    """One :class:`Target` per answered recommendation, under ``belief_state`` (a
    :class:`agent.belief.BeliefState` that has seen the meters and every answer)."""
    params = belief_state.sample_params(n_samples)
    b = tuple(round(float(x), 2) for x in np.clip(belief_state.belief(), 0.0, 1.0))
    out = []
    for a in answered:
        if not 0 <= int(a.action) < spec.N_ACTIONS or not 0 <= int(a.slot) < spec.SLOTS_PER_DAY:
            raise ValueError(f"answered recommendation out of range: action {a.action}, slot {a.slot}")
        v = action_values(params, a.meters, a.slot)
        if a.accepted:
            target = int(a.action)
        else:
            others = v.copy()
            others[int(a.action)] = -np.inf
            target = int(np.argmax(others))
        out.append(Target(target, b, target != int(a.action), float(v[target] - v[int(a.action)])))
    return out
