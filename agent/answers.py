"""The likelihood of accept / ignore answers (../shared/specs/feedback.md 2-3), integrated
over a set of weighted profiles.

An answer to recommendation ``a`` in slot ``s``, when the meters were ``m``, has probability
``p(accept | profile, m, s, a)``: the spec's logistic answer model, computed by
:func:`simulator.feedback.utilities_batch` and :func:`simulator.feedback.accept_probability`
(the simulator's own code, never re-typed). It is not Gaussian in the profile, so the belief
treats answers by importance weights over profile samples (:class:`agent.belief.BeliefState`
draws the samples from its meter posterior and multiplies in these likelihoods).

The meters at the time of an answer are not always known:

- the product passes them (5 floats, NaN where unknown); a NaN is replaced by
  :data:`TYPICAL_METERS` (the spec's initial meters);
- in the simulator every sample carries its own estimate of the week's meters
  (:func:`track_states`): observed meters where there are any (exact when clean, a
  per-meter Kalman blend with the sample's prediction when noisy), else the sample's own
  prediction from the previous state with the action that was applied (the sample's habit,
  the spec 9 heuristic, where the applied action is unknown: an ignored answer in the
  answers-only condition) and the event if seen, else the expected event.

Pure functions of arrays; :func:`weighted_quantile` and :func:`answer_information` serve the
belief and the planner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator import spec
from simulator.dynamics import EVENT_EFFECT, Compact, expected_delta_batch
from simulator.feedback import accept_probability, utilities_batch
from simulator.policies import heuristic_actions

#: Meters assumed where the product gives none (NaN): the spec's initial meters.
TYPICAL_METERS = np.array(spec.INITIAL_METERS)
#: Expected event effect per step (0.12 x the mean event), before the resilience scale.
EVENT_MEAN = spec.EVENT_PROBABILITY * EVENT_EFFECT[1:].mean(axis=0)
#: Per-step variance the events add to a meter when the event is not seen.
EVENT_VAR = spec.EVENT_PROBABILITY * (EVENT_EFFECT[1:] ** 2).mean(axis=0) - EVENT_MEAN**2
#: Variance of the initial meters (uniform jitter +-0.05).
INITIAL_VAR = (2 * spec.INITIAL_JITTER) ** 2 / 12.0
_P_FLOOR = 1e-9


@dataclass(frozen=True)
class Answer:
    """One answer. ``step``: its index in the current simulated week (the state then comes
    from the sample's track), or None with ``meters`` (5 floats, NaN allowed) from the
    product. ``slot`` None: unknown (the likelihood averages the four slots)."""

    action: int
    accepted: bool
    slot: int | None
    step: int | None = None
    meters: tuple[float, ...] | None = None
    weight: float = 1.0  # how much the answer counts: 1 typed; an implicit one its confidence (tempered)


@dataclass
class TrackStep:
    """What the agent saw of one step of the week: the meters before it (NaN = missing),
    its slot, the action applied (-1 = unknown) and its event (-1 = unknown)."""

    meters: np.ndarray
    slot: int
    applied: int = -1
    event: int = -1


def fill_meters(meters) -> np.ndarray:
    """``meters`` with NaN (or a missing vector) replaced by :data:`TYPICAL_METERS`."""
    if meters is None:
        return TYPICAL_METERS.copy()
    m = np.asarray(meters, dtype=np.float64).reshape(spec.N_METERS)
    return np.where(np.isfinite(m), np.clip(m, 0.0, 1.0), TYPICAL_METERS)


def accept_probabilities(compact: Compact, states: np.ndarray, slot: int) -> np.ndarray:
    """(M, 10): p(accept b) for each of M profiles (``compact``) in its own state (M, 5)."""
    u = utilities_batch(compact, states, slot)
    return np.stack([accept_probability(u, a) for a in range(spec.N_ACTIONS)], axis=1)


def answer_log_likelihood(
    compact: Compact, states, slot: int | None, action: int, accepted: bool
) -> np.ndarray:
    """log p(answer | profile) for M profiles, each in its state ((M, 5) or (5,)).
    ``slot`` None averages the probability over the four slots."""
    n = compact.w.shape[0]
    m = np.broadcast_to(np.asarray(states, dtype=np.float64), (n, spec.N_METERS))
    slots = range(spec.SLOTS_PER_DAY) if slot is None else (int(slot),)
    p = np.zeros(n)
    for s in slots:
        p += accept_probability(utilities_batch(compact, m, s), int(action))
    p /= len(slots)
    p = np.clip(p if accepted else 1.0 - p, _P_FLOOR, 1.0)
    return np.log(p)


def track_states(
    compact: Compact,
    track: Sequence[TrackStep],
    upto: int,
    obs_var: float,
    process_var: float = spec.NOISE_SD**2,
    resume: tuple[int, np.ndarray, np.ndarray] | None = None,
) -> tuple[list[np.ndarray], tuple[int, np.ndarray, np.ndarray]]:
    """Each sample's estimate of the meters before each step of ``track`` up to ``upto``.

    Returns ``(states, resume)``: the (M, 5) estimates for steps 0..upto (or, given a
    ``resume`` point ``(j, state, var)`` from an earlier call, for steps j+1..upto), and the
    point to resume from. ``obs_var``: variance of an observed meter (0 = exact)."""
    n = compact.w.shape[0]
    rows = np.arange(n)
    out: list[np.ndarray] = []
    if resume is None:
        first, state, var = 0, np.broadcast_to(TYPICAL_METERS, (n, spec.N_METERS)).copy(), None
        var = np.full(spec.N_METERS, INITIAL_VAR)
    else:
        first, state, var = resume[0] + 1, resume[1], resume[2]
    for j in range(first, upto + 1):
        if j > 0:  # predict step j - 1
            prev = track[j - 1]
            if prev.applied >= 0:
                actions = np.full(n, prev.applied, dtype=np.int64)
            else:
                actions = heuristic_actions(state, prev.slot)
            if prev.event >= 0:
                d = expected_delta_batch(compact, state, prev.slot, actions, np.full(n, prev.event))
                var = var + process_var
            else:
                d = expected_delta_batch(compact, state, prev.slot, actions)
                d = d + EVENT_MEAN[None, :] * compact.ev_scale[rows, None]
                var = var + process_var + EVENT_VAR
            state = np.clip(state + d, 0.0, 1.0)
        seen = np.isfinite(track[j].meters)
        if seen.any():
            gain = np.where(seen, var / (var + obs_var) if obs_var > 0 else 1.0, 0.0)
            obs = np.where(seen, track[j].meters, 0.0)
            state = np.where(seen, state + gain * (obs - state), state)
            var = (1.0 - gain) * var
        out.append(state)
    return out, (upto, state, var)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float = 0.5) -> np.ndarray:
    """Per column of ``values`` (M, D), the weighted ``q``-quantile (weights sum to 1)."""
    order = np.argsort(values, axis=0, kind="stable")
    v = np.take_along_axis(values, order, axis=0)
    c = np.cumsum(weights[order], axis=0)
    idx = np.argmax(c >= q * c[-1:] - 1e-12, axis=0)
    return v[idx, np.arange(values.shape[1])]


def expected_abs_error(values: np.ndarray, weights: np.ndarray) -> float:
    """Posterior expected belief_mae of the weighted median (mean over the D columns)."""
    med = weighted_quantile(values, weights)
    return float((weights[:, None] * np.abs(values - med[None, :])).sum(axis=0).mean())


def _expected_abs_errors(truth: np.ndarray, order: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Expected belief_mae of the weighted median for each row of ``weights`` (R, M), each
    row normalised; ``order`` is ``argsort(truth, axis=0)``. Returns (R,)."""
    out = np.zeros(len(weights))
    for d in range(truth.shape[1]):
        col = truth[:, d]
        ws = weights[:, order[:, d]]
        c = np.cumsum(ws, axis=1)
        idx = np.argmax(c >= 0.5 * c[:, -1:] - 1e-12, axis=1)
        med = col[order[idx, d]]
        out += (weights * np.abs(col[None, :] - med[:, None])).sum(axis=1)
    return out / truth.shape[1]


def answer_information(
    truth: np.ndarray, weights: np.ndarray, p_accept: np.ndarray
) -> np.ndarray:
    """Expected reduction of the posterior expected belief_mae from one answer, per action.

    ``truth`` (M, 3): each sample's belief truth; ``weights`` (M,) normalised; ``p_accept``
    (M, A): each sample's probability of accepting each action now. For each action the
    preposterior: both answers, each reweighting the samples, each with its predictive
    probability. Returns (A,), >= 0 up to sampling error."""
    order = np.argsort(truth, axis=0, kind="stable")
    now = _expected_abs_errors(truth, order, weights[None, :])[0]
    pa = weights @ p_accept  # (A,)
    acc = (weights[:, None] * p_accept).T  # (A, M)
    ign = (weights[:, None] * (1.0 - p_accept)).T
    rows = np.concatenate([acc, ign])
    mass = rows.sum(axis=1, keepdims=True)
    safe = np.where(mass > 1e-12, mass, 1.0)
    errs = _expected_abs_errors(truth, order, rows / safe)
    errs = np.where(mass[:, 0] > 1e-12, errs, 0.0)
    a = p_accept.shape[1]
    return now - (pa * errs[:a] + (1.0 - pa) * errs[a:])
