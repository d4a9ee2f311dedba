"""The person who answers (../shared/specs/feedback.md): the answer model and the
observation conditions, as pure functions and constants.

- **How the person values an action** (feedback.md 2): for the true profile, the meters
  ``m`` before the step and the slot, ``U(b)`` is the spec 5 reward of the *expected* step
  (``simulator.md`` 3, steps 1-4 and 6: no event, no noise), clipped at the meter bounds.
  :func:`utilities_batch` computes the ten ``U(b)`` of N states at once.
- **The answer** (feedback.md 3): ``p(accept a) = 1 / (1 + exp(-(U(a) - median_b U(b)) / TAU))``
  (:func:`accept_probability`), drawn from its own generator
  ``default_rng([seed, ANSWER_SALT])``, one uniform a step (:func:`answer_uniforms`).
- **Observation conditions** (feedback.md 5): ``clean``, ``noisy`` (sd 0.08 on every
  reported meter and delta, each meter missing with probability 0.3, from
  ``default_rng([seed, NOISE_SALT])``, see :func:`noise_draws`) and ``answers-only``.

The environment (:mod:`simulator.env`) and the agent's likelihood (``agent.answers``) call
these same functions, so the likelihood is the spec's answer model, never a re-typing of it.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from simulator import spec
from simulator.dynamics import Compact, expected_delta_batch, neutral_delta

# --- numbers of feedback.md --------------------------------------------------------------------
#: Temperature of the logistic answer (feedback.md 3).
TAU = 0.10
#: The answer generator: ``default_rng([seed, ANSWER_SALT])`` ("ANS").
ANSWER_SALT = 0x414E53
#: The observation-noise generator: ``default_rng([seed, NOISE_SALT])`` ("NOIS").
NOISE_SALT = 0x4E4F4953
#: Extra Gaussian noise on every reported meter and delta in the ``noisy`` condition.
OBS_NOISE_SD = 0.08
#: Probability that a meter is missing (NaN) in one observation, ``noisy`` condition.
MISSING_PROBABILITY = 0.3
OBSERVE_CONDITIONS: tuple[str, ...] = ("clean", "noisy", "answers-only")

#: ``last_answer`` values in the observation.
ANSWER_NONE, ANSWER_ACCEPTED, ANSWER_IGNORED = 0, 1, 2
ANSWERS: tuple[str, ...] = ("none", "accepted", "ignored")

_ALL_ACTIONS = np.arange(spec.N_ACTIONS)
_T = spec.EPISODE_STEPS


def check_observe(observe: str) -> str:
    if observe not in OBSERVE_CONDITIONS:
        raise ValueError(f"observe must be one of {OBSERVE_CONDITIONS}, got {observe!r}")
    return observe


# --- the answer model --------------------------------------------------------------------------


def utilities_batch(compact: Compact, meters, slot: int) -> np.ndarray:
    """``U(b)`` for the ten actions of N states: (N, 10).

    ``compact`` holds N profiles (one per state) or one (shared); ``meters`` (N, 5) are the
    meters before the step (or one row, shared by the N profiles). U is the spec 5 reward of ``d = clip(m + delta, 0, 1) - m`` and
    ``m' = m + d``, ``delta`` the expected delta without event or noise (the stress spiral
    included), with the profile's own reward weights."""
    m = np.atleast_2d(np.asarray(meters, dtype=np.float64))
    n = max(m.shape[0], compact.w.shape[0])
    m = np.broadcast_to(m, (n, spec.N_METERS))
    d = expected_delta_batch(compact, m, int(slot), np.broadcast_to(_ALL_ACTIONS, (n, spec.N_ACTIONS)))
    new = np.clip(m[:, None, :] + d, 0.0, 1.0)
    return reward_of(compact.w, m, new)


def reward_of(w, meters, new) -> np.ndarray:
    """Spec 5 reward of moving from ``meters`` (N, 5) to ``new`` (N, A, 5) with weights ``w``
    ((N, 5) or (1, 5)): (N, A)."""
    m = np.asarray(meters, dtype=np.float64)
    d = new - m[:, None, :]
    w = np.broadcast_to(np.asarray(w, dtype=np.float64), (m.shape[0], spec.N_METERS))
    return (
        spec.REWARD_DELTA_SCALE * np.einsum("nk,nak->na", w, d)
        + spec.REWARD_LEVEL_SCALE * (np.einsum("nk,nak->na", w, new) - spec.REWARD_LEVEL_BASELINE)
        + spec.REWARD_PROGRESS_BONUS * d[..., spec.P]
        + spec.REWARD_CONNECTION_BONUS * d[..., spec.N]
        + spec.REWARD_CRASH_PENALTY * (new < spec.CRASH_THRESHOLD).sum(axis=-1)
    )


def accept_probability(utilities, action) -> np.ndarray:
    """``p(accept action)`` from the ten utilities (..., 10); ``action`` broadcasts against
    the leading axes (an int, or an array of ids). Logistic in ``U(a) - median U`` / TAU."""
    u = np.asarray(utilities, dtype=np.float64)
    a = np.asarray(action, dtype=np.int64)
    ua = np.take_along_axis(u, np.broadcast_to(a, u.shape[:-1])[..., None], axis=-1)[..., 0]
    return 1.0 / (1.0 + np.exp(-(ua - np.median(u, axis=-1)) / TAU))


def answer_uniforms(seed: int) -> np.ndarray:
    """The episode's 28 answer draws: ``default_rng([seed, ANSWER_SALT]).random(28)``; step
    ``t``'s recommendation is accepted iff ``u[t] < p`` (drawn every step, used or not)."""
    return np.random.default_rng([int(seed), ANSWER_SALT]).random(_T)


# --- observation conditions --------------------------------------------------------------------


def noise_draws(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``noisy`` condition's draws from ``default_rng([seed, NOISE_SALT])``, in order:

    1. ``missing = random((29, 5)) < 0.3``: row 0 is the reset observation, row ``t + 1`` the
       observation after step ``t``; a missing meter is NaN with its delta and anomaly;
    2. ``meter_noise = 0.08 * standard_normal((29, 5))``, same rows;
    3. ``delta_noise = 0.08 * standard_normal((28, 5))``: row ``t`` for step ``t``'s reported
       delta.

    The reported anomaly is derived from what is reported (:func:`observed_anomalies`).
    """
    rng = np.random.default_rng([int(seed), NOISE_SALT])
    missing = rng.random((_T + 1, spec.N_METERS)) < MISSING_PROBABILITY
    meter_noise = OBS_NOISE_SD * rng.standard_normal((_T + 1, spec.N_METERS))
    delta_noise = OBS_NOISE_SD * rng.standard_normal((_T, spec.N_METERS))
    return missing, meter_noise, delta_noise


def observed_anomalies(reported_before, slot: int, action: int, event: int, reported_delta):
    """The anomalies a product computes from its readings: the reported delta minus the
    neutral profile's clipped delta at the *reported* meters before the step (spec 6 with
    what is seen). NaN where the delta or that meter's reading is missing, and everywhere
    when vitality or serenity (which the neutral delta depends on) is missing."""
    m = np.asarray(reported_before, dtype=np.float64)
    d = np.asarray(reported_delta, dtype=np.float64)
    if not np.isfinite(m[[spec.V, spec.S]]).all():
        return np.full(spec.N_METERS, np.nan)
    neutral = neutral_delta(np.nan_to_num(m), slot, action, event)
    out = d - neutral
    out[~np.isfinite(m)] = np.nan
    return np.clip(out, -2.0, 2.0)


def observed_reward(w, deltas, meters) -> float:
    """The spec 5 reward computed from reported (noisy) deltas and meters; NaN when any is
    missing (feedback.md 5: rewards shown to the agent are NaN where a meter is missing)."""
    d = np.asarray(deltas, dtype=np.float64)
    m = np.asarray(meters, dtype=np.float64)
    if not (np.isfinite(d).all() and np.isfinite(m).all()):
        return float("nan")
    w = np.asarray(w, dtype=np.float64)
    return float(
        spec.REWARD_DELTA_SCALE * (w @ d)
        + spec.REWARD_LEVEL_SCALE * ((w @ m) - spec.REWARD_LEVEL_BASELINE)
        + spec.REWARD_PROGRESS_BONUS * d[spec.P]
        + spec.REWARD_CONNECTION_BONUS * d[spec.N]
        + spec.REWARD_CRASH_PENALTY * int((m < spec.CRASH_THRESHOLD).sum())
    )


class MaybeMissingBox(spaces.Box):
    """A Box whose entries may also be NaN (a missing reading, feedback.md 5)."""

    def contains(self, x) -> bool:
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError):
                return False
        if x.shape != self.shape or not np.can_cast(x.dtype, self.dtype):
            return False
        filled = np.where(np.isnan(x), self.low, x)
        return bool(np.all(filled >= self.low) and np.all(filled <= self.high))

    def __repr__(self) -> str:
        return "MaybeMissing" + super().__repr__()
