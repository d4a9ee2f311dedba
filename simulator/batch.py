"""``BatchEnv``: N weeks stepped at once with numpy, trajectory-identical to ``RhythmEnv``.

All N episodes advance in lock step (an episode is always 28 steps). Each episode's
randomness comes from its own seed exactly as in ``RhythmEnv`` (same profile RNG, same
draw order, see :mod:`simulator.episode`), and the step evaluates the same sum in the same
order (see :mod:`simulator.dynamics`), so the trajectories match ``RhythmEnv`` bit for bit.

Observations are the ``RhythmEnv`` observation dict with a leading N axis on every entry;
:func:`unbatch_obs` extracts one environment's observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator import episode, spec
from simulator.dynamics import (
    EVENT_EFFECT,
    NEG,
    POS,
    SCL,
    SPIRAL,
    STATIC,
    compact_params,
    effect_tables,
)
from simulator.env import HISTORY, NO_ACTION, resolve_profile
from simulator.grader import grade_batch
from simulator.profiles import Profile, belief_truth_array, sample_profiles_array

_T = spec.EPISODE_STEPS
ProfilesArg = Profile | str | np.ndarray | Sequence[Profile | str] | None


def profiles_array(
    seeds: np.ndarray, condition: str = "in-dist", profiles: ProfilesArg = None
) -> np.ndarray:
    """(N, 15) profile parameters: sampled from each seed under ``condition`` when
    ``profiles`` is None, else the given Profile / name (broadcast), list, or (N, 15) array."""
    n = len(seeds)
    if profiles is None:
        return sample_profiles_array(seeds, condition)
    if isinstance(profiles, np.ndarray) and profiles.dtype != object:
        arr = np.asarray(profiles, dtype=np.float64)
        if arr.ndim == 1:
            arr = np.broadcast_to(arr, (n, spec.N_PARAMS))
        if arr.shape != (n, spec.N_PARAMS):
            raise ValueError(f"profiles array must be ({n}, 15), got {arr.shape}")
        return arr.copy()
    if isinstance(profiles, Profile | str | dict):
        return np.broadcast_to(resolve_profile(profiles).to_array(), (n, spec.N_PARAMS)).copy()
    items = list(profiles)
    if len(items) != n:
        raise ValueError(f"got {len(items)} profiles for {n} seeds")
    return np.stack([resolve_profile(p).to_array() for p in items])


class BatchEnv:
    """N synchronous episodes. ``reset()`` then 28 x ``step(actions, beliefs)``."""

    def __init__(
        self,
        seeds: Sequence[int] | np.ndarray,
        condition: str = "in-dist",
        profiles: ProfilesArg = None,
        progress_drift: float | None = None,
    ):
        """``progress_drift`` overrides ``spec.DRIFT_P`` (calibration only)."""
        if condition not in ("in-dist", "ood"):
            raise ValueError(f"condition must be 'in-dist' or 'ood', got {condition!r}")
        self.condition = condition
        self._profiles_arg = profiles
        self.seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        self.n = len(self.seeds)
        self.progress_drift = progress_drift
        nt = effect_tables(Profile.neutral().to_array()[None, :], progress_drift)
        self._n_const = nt.const[0]
        self._n_scaled = nt.scaled[0]
        self._n_events = nt.events[0]
        self._n_thr = float(nt.spiral_threshold[0])
        self.t: int | None = None

    # -- reset ------------------------------------------------------------------------------
    def reset(
        self, seeds: Sequence[int] | np.ndarray | None = None, profiles: ProfilesArg = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start the N episodes (optionally with new seeds and/or profiles)."""
        if seeds is not None:
            self.seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
            self.n = len(self.seeds)
        if profiles is not None:
            self._profiles_arg = profiles
        n = self.n
        self.profiles = profiles_array(self.seeds, self.condition, self._profiles_arg)
        self.truth = belief_truth_array(self.profiles) if n else np.zeros((0, 3))
        self.compact = compact_params(self.profiles, self.progress_drift)

        u = np.empty((n, episode.N_UNIFORMS))
        z = np.empty((n, _T, spec.N_METERS))
        for i, s in enumerate(self.seeds.tolist()):
            u[i], z[i] = episode.draw(np.random.default_rng(s))
        self.meters, self.events, self.noise = episode.transform(u, z)
        self.meters = np.array(self.meters)
        self.t = 0
        self.rows = np.arange(n)
        self.rewards = np.zeros((n, _T))
        self.crashes = np.zeros(n, dtype=np.int64)
        self.beliefs = np.full((n, 3), np.nan)
        self._hist_a = np.full((n, HISTORY + _T), NO_ACTION, dtype=np.int64)
        self._hist_r = np.zeros((n, HISTORY + _T))
        self._hist_d = np.zeros((n, HISTORY + _T, spec.N_METERS))
        self.deltas = np.zeros((n, spec.N_METERS))
        self.anomalies = np.zeros((n, spec.N_METERS))
        self.last_action = np.full(n, NO_ACTION, dtype=np.int64)
        self.last_reward = np.zeros(n)
        self.active_event = np.zeros(n, dtype=np.int64)
        return self.observation(), {
            "seeds": self.seeds.copy(),
            "profiles": self.profiles.copy(),
            "belief_truth": self.truth.copy(),
        }

    # -- step -------------------------------------------------------------------------------
    def step(
        self,
        actions: np.ndarray | Sequence[int],
        beliefs: np.ndarray | None = None,
        observe: bool = True,
    ):
        """Advance every episode one step.

        ``actions`` (N,) ints 0..9; ``beliefs`` None or (N, 3), a NaN row meaning "no belief
        this step". Returns ``(obs, rewards (N,), terminated (N,), truncated (N,), info)``;
        ``obs`` is None when ``observe`` is False (faster). ``info`` has
        ``reward_breakdown`` (dict of (N,) arrays), ``events`` and ``crashes``; after the last
        step also ``grade`` (dict of (N,) arrays, see :func:`simulator.grader.grade_batch`).
        """
        t = self.t
        if t is None or t >= _T:
            raise RuntimeError("call reset() before step() (the episodes are over or not started)")
        a = np.asarray(actions, dtype=np.int64).reshape(-1)
        if a.shape != (self.n,) or (a.size and (a.min() < 0 or a.max() >= spec.N_ACTIONS)):
            raise ValueError(f"actions must be {self.n} ints in 0..9")
        if beliefs is not None:
            b = np.asarray(beliefs, dtype=np.float64).reshape(self.n, 3)
            emit = np.all(np.isfinite(b), axis=1)
            self.beliefs[emit] = np.clip(b[emit], 0.0, 1.0)

        slot = t & 3
        rows = self.rows
        m = self.meters
        e = self.events[:, t]
        k = self.compact
        fv = np.clip(spec.FV_BASE + spec.FV_SLOPE * m[:, 0] / spec.FV_REF, spec.FV_MIN, spec.FV_MAX)
        fv = fv[:, None]

        # The table entries of dynamics.effect_tables, for the chosen actions only.
        c = k.chrono[:, slot][:, None]
        cs = (STATIC[slot][a] + (POS[a] * c + NEG[a] * (2.0 - c))) + k.md[rows, a]
        sc = SCL[a] * c
        ev = EVENT_EFFECT[e] * k.ev_scale[:, None]
        sp = np.where((m[:, 3] < k.spiral_threshold)[:, None], SPIRAL, 0.0)
        new = np.clip(m + ((((cs + fv * sc) + ev) + sp) + self.noise[:, t]), 0.0, 1.0)
        d = new - m

        ncs = self._n_const[slot, a]
        nsc = self._n_scaled[slot, a]
        nev = self._n_events[e]
        nsp = np.where((m[:, 3] < self._n_thr)[:, None], SPIRAL, 0.0)
        anomalies = d - (np.clip(m + (((ncs + fv * nsc) + nev) + nsp), 0.0, 1.0) - m)

        w = k.w
        crash = (new < spec.CRASH_THRESHOLD).sum(axis=1)
        wd = (
            w[:, 0] * d[:, 0]
            + w[:, 1] * d[:, 1]
            + w[:, 2] * d[:, 2]
            + w[:, 3] * d[:, 3]
            + w[:, 4] * d[:, 4]
        )
        wm = (
            w[:, 0] * new[:, 0]
            + w[:, 1] * new[:, 1]
            + w[:, 2] * new[:, 2]
            + w[:, 3] * new[:, 3]
            + w[:, 4] * new[:, 4]
        )
        r_delta = spec.REWARD_DELTA_SCALE * wd
        r_level = spec.REWARD_LEVEL_SCALE * (wm - spec.REWARD_LEVEL_BASELINE)
        r_prog = spec.REWARD_PROGRESS_BONUS * d[:, 2]
        r_conn = spec.REWARD_CONNECTION_BONUS * d[:, 4]
        r_crash = spec.REWARD_CRASH_PENALTY * crash
        r = (((r_delta + r_level) + r_prog) + r_conn) + r_crash

        self.meters = new
        self.deltas = d
        self.anomalies = anomalies
        self.last_action = a
        self.last_reward = r
        self.active_event = e
        self.rewards[:, t] = r
        self.crashes += crash
        row = HISTORY + t
        self._hist_a[:, row] = a
        self._hist_r[:, row] = r
        self._hist_d[:, row] = d
        self.t = t + 1

        info: dict[str, Any] = {
            "reward_breakdown": {
                "delta": r_delta,
                "level": r_level,
                "progress": r_prog,
                "connection": r_conn,
                "crash": r_crash,
            },
            "events": e,
            "crashes": self.crashes.copy(),
        }
        done = self.t == _T
        if done:
            info["grade"] = self.grade()
        terminated = np.full(self.n, done)
        truncated = np.zeros(self.n, dtype=bool)
        return (self.observation() if observe else None), r, terminated, truncated, info

    # -- views ------------------------------------------------------------------------------
    def observation(self) -> dict[str, np.ndarray]:
        """The batched observation (every ``RhythmEnv`` key with a leading N axis)."""
        t, n = self.t, self.n
        full = lambda v: np.full(n, v, dtype=np.int64)  # noqa: E731
        return {
            "t": full(t),
            "day": full(t >> 2),
            "slot": full(t & 3),
            "remaining_steps": full(_T - t),
            "meters": self.meters.copy(),
            "deltas": self.deltas.copy(),
            "anomalies": self.anomalies.copy(),
            "last_action": self.last_action.copy(),
            "last_reward": self.last_reward[:, None].copy(),
            "active_event": self.active_event.copy(),
            "history_actions": self._hist_a[:, t : t + HISTORY].copy(),
            "history_rewards": self._hist_r[:, t : t + HISTORY].copy(),
            "history_deltas": self._hist_d[:, t : t + HISTORY].copy(),
        }

    def grade(self) -> dict[str, np.ndarray]:
        """Grades of the finished episodes (dict of (N,) arrays, spec 8)."""
        if self.t != _T:
            raise RuntimeError("the episodes are not finished")
        return grade_batch(self.rewards, self.meters, self.crashes, self.beliefs, self.truth)


_SCALAR_KEYS = ("t", "day", "slot", "remaining_steps", "last_action", "active_event")


def unbatch_obs(obs: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Environment ``i``'s observation, in exactly the ``RhythmEnv`` format."""
    return {k: (int(v[i]) if k in _SCALAR_KEYS else v[i].copy()) for k, v in obs.items()}
