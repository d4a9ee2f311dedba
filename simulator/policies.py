"""Policies: the protocol, a registry by name, and the built-in baselines (spec 9).

A policy is any object with ``reset(seed)`` and ``act(observation) -> (action_id, belief or
None)``. Optional hooks, used by :mod:`simulator.evaluate` when present:

- ``observe_truth(info)``: called after each reset with the env's reset ``info`` (privileged:
  ``profile``, ``belief_truth``); only oracle/teacher policies should use it.
- ``reset_batch(seeds)``, ``act_batch(obs) -> (actions (N,), beliefs (N, 3) or None)`` and
  ``observe_truth_batch(info)`` (``info`` from ``BatchEnv.reset``): a policy with these is
  evaluated on the batch engine, with identical results.

Register more with ``register_policy(name, factory)`` (the app shell registers agents this
way; this package never imports them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simulator import spec
from simulator.dynamics import compact_params, expected_delta_batch
from simulator.profiles import Profile

Action = tuple[int, np.ndarray | None]


@runtime_checkable
class Policy(Protocol):
    def reset(self, seed: int) -> None: ...

    def act(self, observation: dict[str, Any]) -> Action: ...


_REGISTRY: dict[str, Callable[[], Policy]] = {}


def register_policy(name: str, factory: Callable[[], Policy], *, overwrite: bool = False) -> None:
    """Make ``factory()`` available as ``get_policy(name)``."""
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = factory


def get_policy(name: str) -> Policy:
    """A fresh instance of the policy registered under ``name``."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(policy_names())}") from None
    return factory()


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


# --- random ----------------------------------------------------------------------------------

RANDOM_POLICY_SALT = 0x52414E44  # "RAND": keeps the policy's stream apart from the episode's


class RandomPolicy:
    """Uniform over the 10 actions, no belief. Its own RNG, ``default_rng([seed, SALT])``,
    draws the week's 28 actions at reset: ``integers(0, 10, 28)``."""

    def reset(self, seed: int) -> None:
        self._actions = _random_actions(seed).tolist()

    def act(self, observation: dict[str, Any]) -> Action:
        return self._actions[int(observation["t"])], None

    def reset_batch(self, seeds) -> None:
        self._batch = np.stack([_random_actions(s) for s in seeds]) if len(seeds) else None

    def act_batch(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, None]:
        return self._batch[:, int(obs["t"][0])], None


def _random_actions(seed: int) -> np.ndarray:
    rng = np.random.default_rng([int(seed), RANDOM_POLICY_SALT])
    return rng.integers(0, spec.N_ACTIONS, spec.EPISODE_STEPS)


# --- heuristic -------------------------------------------------------------------------------

# Rule (1): the action that restores the lowest meter (V depends on the slot, see below).
_RESTORE = np.array([spec.EXERCISE, spec.MEDITATE, spec.DEEP_WORK, spec.MEDITATE, spec.FAMILY_TIME])


def heuristic_action(meters, slot: int) -> int:
    """Spec 9 heuristic, first rule that applies (ties for the lowest meter: V, C, P, S, N)."""
    m = [float(x) for x in meters]
    k = min(range(spec.N_METERS), key=m.__getitem__)
    if m[k] < 0.25:
        if k == spec.V:
            return spec.SLEEP if slot in (spec.EVENING, spec.NIGHT) else spec.EXERCISE
        return int(_RESTORE[k])
    if slot == spec.NIGHT:
        return spec.SLEEP
    if slot == spec.MORNING:
        return spec.DEEP_WORK
    if slot == spec.AFTERNOON:
        return spec.LEARN if m[spec.C] >= 0.5 else spec.ADMIN_WORK
    return spec.FAMILY_TIME if m[spec.N] < 0.6 else spec.EXERCISE


def heuristic_actions(meters: np.ndarray, slot: int) -> np.ndarray:
    """Vectorised :func:`heuristic_action` for (N, 5) meters at one slot."""
    m = np.asarray(meters, dtype=np.float64)
    k = np.argmin(m, axis=1)
    low = m[np.arange(len(m)), k] < 0.25
    restore = _RESTORE[k]
    if slot in (spec.EVENING, spec.NIGHT):
        restore = np.where(k == spec.V, spec.SLEEP, restore)
    if slot == spec.NIGHT:
        default = np.full(len(m), spec.SLEEP)
    elif slot == spec.MORNING:
        default = np.full(len(m), spec.DEEP_WORK)
    elif slot == spec.AFTERNOON:
        default = np.where(m[:, spec.C] >= 0.5, spec.LEARN, spec.ADMIN_WORK)
    else:
        default = np.where(m[:, spec.N] < 0.6, spec.FAMILY_TIME, spec.EXERCISE)
    return np.where(low, restore, default).astype(np.int64)


class HeuristicPolicy:
    """The spec 9 heuristic, no belief."""

    def reset(self, seed: int) -> None:
        pass

    def act(self, observation: dict[str, Any]) -> Action:
        return heuristic_action(observation["meters"], int(observation["slot"])), None

    def reset_batch(self, seeds) -> None:
        pass

    def act_batch(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, None]:
        return heuristic_actions(obs["meters"], int(obs["slot"][0])), None


# --- one-step greedy planner -----------------------------------------------------------------

_ALL_ACTIONS = np.arange(spec.N_ACTIONS)


def greedy_actions(
    params: np.ndarray, meters: np.ndarray, slot: int, progress_drift: float | None = None
) -> np.ndarray:
    """One-step greedy: for each of N states, the action maximising the expected reward (spec 5)
    of the next step under the assumed profiles ``params`` ((N, 15) or (1, 15)): their
    dynamics without event or noise, clipped, and their reward weights. Ties: lowest id."""
    m = np.atleast_2d(np.asarray(meters, dtype=np.float64))
    n = m.shape[0]
    p = np.atleast_2d(params)
    k = compact_params(p, progress_drift)
    d = expected_delta_batch(k, m, slot, np.broadcast_to(_ALL_ACTIONS, (n, spec.N_ACTIONS)))
    new = np.clip(m[:, None, :] + d, 0.0, 1.0)
    d = new - m[:, None, :]
    w = np.broadcast_to(k.w, (n, 5))[:, None, :]
    wd = (
        w[..., 0] * d[..., 0]
        + w[..., 1] * d[..., 1]
        + w[..., 2] * d[..., 2]
        + w[..., 3] * d[..., 3]
        + w[..., 4] * d[..., 4]
    )
    wm = (
        w[..., 0] * new[..., 0]
        + w[..., 1] * new[..., 1]
        + w[..., 2] * new[..., 2]
        + w[..., 3] * new[..., 3]
        + w[..., 4] * new[..., 4]
    )
    r = (
        spec.REWARD_DELTA_SCALE * wd
        + spec.REWARD_LEVEL_SCALE * (wm - spec.REWARD_LEVEL_BASELINE)
        + spec.REWARD_PROGRESS_BONUS * d[:, :, spec.P]
        + spec.REWARD_CONNECTION_BONUS * d[:, :, spec.N]
        + spec.REWARD_CRASH_PENALTY * (new < spec.CRASH_THRESHOLD).sum(axis=2)
    )
    return np.argmax(r, axis=1).astype(np.int64)


class GreedyPolicy:
    """One-step greedy planner assuming a profile.

    ``use_truth=True``: the true profile, read from the privileged reset info
    (``observe_truth``); otherwise ``profile`` (default: the neutral one). ``emit_truth``
    also emits the true belief (an upper reference, not a fair agent). ``progress_drift``:
    the planner's model of the P drift when the env's is overridden (calibration only).
    """

    def __init__(
        self,
        use_truth: bool = False,
        profile: Profile | None = None,
        emit_truth: bool = False,
        progress_drift: float | None = None,
    ):
        self.use_truth = use_truth
        self.progress_drift = progress_drift
        self.emit_truth = emit_truth
        self._assumed = (profile or Profile.neutral()).to_array()[None, :]
        self._params = self._assumed
        self._belief = None

    def reset(self, seed: int) -> None:
        self._params = self._assumed
        self._belief = None

    def observe_truth(self, info: dict[str, Any]) -> None:
        if self.use_truth:
            self._params = Profile.from_dict(info["profile"]).to_array()[None, :]
        if self.emit_truth:
            self._belief = np.asarray(info["belief_truth"], dtype=np.float64)

    def act(self, observation: dict[str, Any]) -> Action:
        a = greedy_actions(
            self._params, observation["meters"], int(observation["slot"]), self.progress_drift
        )
        return int(a[0]), (None if self._belief is None else self._belief.copy())

    def reset_batch(self, seeds) -> None:
        self._batch_params = self._assumed
        self._batch_belief = None

    def observe_truth_batch(self, info: dict[str, Any]) -> None:
        if self.use_truth:
            self._batch_params = np.asarray(info["profiles"])
        if self.emit_truth:
            self._batch_belief = np.asarray(info["belief_truth"])

    def act_batch(self, obs: dict[str, np.ndarray]):
        a = greedy_actions(
            self._batch_params, obs["meters"], int(obs["slot"][0]), self.progress_drift
        )
        return a, self._batch_belief


register_policy("random", RandomPolicy)
register_policy("heuristic", HeuristicPolicy)
register_policy("greedy-true", lambda: GreedyPolicy(use_truth=True))
register_policy("greedy-neutral", lambda: GreedyPolicy(use_truth=False))
register_policy("greedy-true-belief", lambda: GreedyPolicy(use_truth=True, emit_truth=True))

# The structureless reference of feedback.md 6 (its own module: it learns from answers only).
from simulator.structureless import StructurelessPolicy  # noqa: E402

register_policy("structureless", StructurelessPolicy)
