"""The ideal-posterior reference (issue 20): the limit a belief can approach.

:class:`IdealPosterior` is the exact posterior, by importance weights, over ``n`` (20,000)
profiles drawn once from the in-distribution prior (spec 4.1), given a week's answers and,
under the ``clean`` and ``noisy`` conditions, its meters (not the reward equations):

- ``clean``: the meters before every step are observed exactly, so each profile's weight is
  the product of its answer probabilities at those meters and the Gaussian likelihood
  (sd 0.012) of the observed deltas, given the applied action and the observed event
  (components that ended at a bound are censored and skipped);
- ``answers-only`` and ``noisy``: the meters are not known, so each particle is a profile
  *and* a week of its own (initial jitter, events and noise drawn from the episode prior):
  the particle plays the week with the actions that were applied (the recommendation when
  accepted; when ignored the particle's own habit, unless the applied action is observed),
  and its weight is the product of its answer probabilities at its own meters (and, when
  noisy, the likelihood of the noisy readings: sd 0.08, censored at 0 and 1). This is exact
  importance sampling from the prior over (profile, week); the belief marginalises the week.

The belief is the weighted median of the spec 4.2 truth (it minimises the expected absolute
error). :attr:`IdealPosterior.ess` tells how many particles carry the weight: in ``clean``
and ``noisy`` the meters make it collapse quickly (a reference for answers-only mainly).

:class:`IdealPolicy` plays another policy's recommendations (by default the Bayesian agent)
and emits the ideal belief: the same episodes, the same answers, exact inference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agent.answers import weighted_quantile
from simulator import spec
from simulator.dynamics import compact_params, expected_delta_batch
from simulator.feedback import OBS_NOISE_SD, accept_probability, check_observe, utilities_batch
from simulator.policies import heuristic_actions
from simulator.profiles import belief_truth_array, transform_profile

N_PARTICLES = 20_000
PRIOR_SALT = 0x1DEA
WEEK_SALT = 0x1DEB
_P_FLOOR = 1e-12
_INITIAL = np.array(spec.INITIAL_METERS)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def log_ndtr(x: np.ndarray) -> np.ndarray:
    """log of the standard normal CDF, accurate in the far left tail too."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    tail = x < -8.0
    xt = x[tail]
    out[tail] = -0.5 * xt**2 - np.log(-xt) - 0.5 * math.log(2 * math.pi)
    out[~tail] = np.log(np.maximum(0.5 * _ERFC(-x[~tail] / math.sqrt(2.0)).astype(np.float64), 1e-300))
    return out


def prior_profiles(n: int = N_PARTICLES, seed: int = 0) -> np.ndarray:
    """(n, 15) profiles from the in-distribution prior (its own generator)."""
    rng = np.random.default_rng([int(seed), PRIOR_SALT])
    g = rng.standard_gamma(spec.IN_DIST_DIRICHLET, (n, 5))
    u = rng.random((n, len(spec.MODIFIERS)))
    return transform_profile(g, u, "in-dist")


class IdealPosterior:
    """Importance weights over fixed profiles (see the module docstring). ``params``: the
    profiles (default: ``n`` from the in-dist prior); ``observe``: the condition."""

    def __init__(
        self,
        observe: str = "answers-only",
        n: int = N_PARTICLES,
        seed: int = 0,
        params: np.ndarray | None = None,
    ):
        self.observe = check_observe(observe)
        self.params = prior_profiles(n, seed) if params is None else np.atleast_2d(params)
        self.n = len(self.params)
        self.compact = compact_params(self.params)
        self.truth = belief_truth_array(self.params)
        self.reset(0)

    def reset(self, seed: int) -> None:
        """A new week (episode ``seed`` only seeds the particles' own weeks)."""
        self.logw = np.zeros(self.n)
        self._t = 0
        self._prev: dict[str, Any] | None = None
        rng = np.random.default_rng([int(seed), WEEK_SALT])
        n, t = self.n, spec.EPISODE_STEPS
        self._m = _INITIAL + rng.uniform(-spec.INITIAL_JITTER, spec.INITIAL_JITTER, (n, 5))
        fires = rng.random((n, t)) < spec.EVENT_PROBABILITY
        which = 1 + rng.integers(0, spec.N_EVENTS, (n, t))
        self._events = np.where(fires, which, 0)
        self._noise = spec.NOISE_SD * rng.standard_normal((n, t, spec.N_METERS))

    @property
    def weights(self) -> np.ndarray:
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    @property
    def ess(self) -> float:
        w = self.weights
        return float(1.0 / (w**2).sum())

    def belief(self) -> np.ndarray:
        return weighted_quantile(self.truth, self.weights)

    def update(self, obs: dict[str, Any]) -> None:
        """Absorb one observation of the stream (the reset observation first)."""
        t = int(obs["t"])
        if t == 0 or self._prev is None:
            self.reset_week_start(obs)
            return
        if t != self._t + 1:
            raise ValueError(f"observations must be consecutive: got t={t} after t={self._t}")
        prev = self._prev
        j, slot = t - 1, (t - 1) % spec.SLOTS_PER_DAY
        answer = int(obs.get("last_answer", 0) or 0)
        applied = int(obs.get("last_action", spec.N_ACTIONS))
        rec = int(obs.get("last_recommendation", applied))
        event = int(obs.get("active_event", 0) or 0)
        if self.observe == "clean":
            m0 = np.asarray(prev["meters"], dtype=np.float64)
            if answer in (1, 2):
                p = accept_probability(utilities_batch(self.compact, m0[None, :], slot), rec)
                self.logw += np.log(np.clip(p if answer == 1 else 1.0 - p, _P_FLOOR, 1.0))
            if 0 <= applied < spec.N_ACTIONS:
                m1 = np.asarray(obs["meters"], dtype=np.float64)
                y = np.asarray(obs["deltas"], dtype=np.float64)
                d = expected_delta_batch(
                    self.compact, np.broadcast_to(m0, (self.n, 5)), slot,
                    np.full(self.n, applied), np.full(self.n, event),
                )
                keep = (m1 > 0.0) & (m1 < 1.0)
                r = (y[None, :] - d)[:, keep]
                self.logw += -0.5 * (r**2).sum(axis=1) / spec.NOISE_SD**2
        else:
            m = self._m
            if answer in (1, 2):
                p = accept_probability(utilities_batch(self.compact, m, slot), rec)
                self.logw += np.log(np.clip(p if answer == 1 else 1.0 - p, _P_FLOOR, 1.0))
            if 0 <= applied < spec.N_ACTIONS:
                actions = np.full(self.n, applied)
            elif answer == 1:
                actions = np.full(self.n, rec)
            else:
                actions = heuristic_actions(m, slot)
            ev = self._events[:, j] if self.observe == "answers-only" else np.full(self.n, event)
            d = expected_delta_batch(self.compact, m, slot, actions, ev) + self._noise[:, j]
            new = np.clip(m + d, 0.0, 1.0)
            if self.observe == "noisy":
                self._reading_loglik(obs["meters"], new)
                self._reading_loglik(obs["deltas"], new - m, bounded=False)
            self._m = new
        self._t = t
        self._prev = obs

    def reset_week_start(self, obs: dict[str, Any]) -> None:
        self.logw[:] = 0.0
        self._t = int(obs["t"])
        self._prev = obs
        if self.observe == "noisy":
            self._reading_loglik(obs["meters"], self._m)

    def _reading_loglik(self, reading, truth: np.ndarray, bounded: bool = True) -> None:
        """log N(reading; truth, 0.08^2) per seen component; at 0 or 1 (clipped) censored."""
        x = np.asarray(reading, dtype=np.float64)
        seen = np.isfinite(x)
        sd = OBS_NOISE_SD
        for k in np.flatnonzero(seen):
            if bounded and x[k] >= 1.0:
                self.logw += log_ndtr((truth[:, k] - 1.0) / sd)
            elif bounded and x[k] <= 0.0:
                self.logw += log_ndtr(-truth[:, k] / sd)
            else:
                self.logw += -0.5 * ((x[k] - truth[:, k]) / sd) ** 2


class IdealPolicy:
    """Another policy's recommendations with the ideal posterior's belief (a reference)."""

    def __init__(self, inner: Any, n: int = N_PARTICLES, seed: int = 0):
        self.inner = inner
        self._n, self._seed = int(n), int(seed)
        self.ideal = IdealPosterior("clean", n, seed)

    def configure(self, feedback: bool = False, observe: str = "clean") -> None:
        if hasattr(self.inner, "configure"):
            self.inner.configure(feedback=feedback, observe=observe)
        self.ideal.observe = check_observe(observe)

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self.ideal.reset(seed)

    def act(self, observation: dict[str, Any]) -> tuple[int, np.ndarray]:
        self.ideal.update(observation)
        a, _ = self.inner.act(observation)
        return a, self.ideal.belief()

    def final_belief(self, observation: dict[str, Any]) -> np.ndarray:
        self.ideal.update(observation)
        return self.ideal.belief()
