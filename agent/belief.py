"""Bayesian inference of the hidden profile from simulator observations (spec 3-5, 4.2).

The model (exact for the simulator, see ../shared/specs/simulator.md):

- **Reward weights** ``w``. The reward (spec 5) is linear in ``w`` and noise-free, so every
  step gives one exact equation ``sum_k w_k (10 d_k + m'_k) = r - 0.5 dP - 0.4 dN
  + 0.5 n_crash + 0.5``. With ``w`` on the simplex, five diverse steps pin it; we solve the
  simplex-constrained least squares exactly (all 31 supports, keep the best feasible one),
  with a tiny ridge towards the uniform weights while the system is still rank-deficient.
- **Modifiers.** Given the step's state, slot, action and observed event, the expected delta
  is *linear* in the nine continuous modifiers ``THETA_NAMES`` (the chronotype enters through
  ``chrono``, which is linear in ``morning``, also inside the ``fv``-scaled terms; event
  resilience through the event scale), plus Gaussian noise (sd 0.012 per meter). The
  stress spiral is a step function of serenity against ``0.40 - 0.25 stress_tolerance``. The
  posterior is therefore a grid over ``stress_tolerance`` (``ST_GRID``) times a Gaussian over
  the nine others (Bayesian linear regression, one shared precision matrix, one mean per grid
  point, each grid point weighted by its marginal likelihood). Meter components that ended
  at a bound (0 or 1) are censored and skipped. The linear design is derived numerically
  from :func:`simulator.dynamics.expected_delta_batch` (neutral point plus unit
  perturbations), never re-typed.
- **Prior**: Gaussian per modifier, centred on the middle of its range with the in-dist
  (uniform on the middle 70%) standard deviation times ``prior_scale`` (default 1.3, a
  little wider to stay honest on out-of-distribution people); samples are clipped to the
  full range.
- **Belief** (spec 4.2): the per-dimension posterior *median* (it minimises the expected
  absolute error) of the truth function over posterior samples, with the posterior sd.
- **Feedback** (:meth:`BeliefState.observe_feedback`): the product's accept / ignore answers
  are weak pseudo-observations, see the method.

Everything is a pure function of the observation dicts (the real-data side feeds the same
dicts from mapping/).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from simulator import spec
from simulator.dynamics import compact_params, expected_delta_batch
from simulator.profiles import Profile, belief_truth_array

#: The nine modifiers with a linear-Gaussian posterior, in this order.
THETA_NAMES: tuple[str, ...] = (
    "social_vitality",
    "social_serenity",
    "morning",
    "work_vitality_recovery",
    "progress_serenity_bonus",
    "leisure_guilt",
    "solo_recharge",
    "metabolic_rate",
    "event_resilience",
)
N_THETA = len(THETA_NAMES)
THETA_COLS = np.array([spec.COL[k] for k in THETA_NAMES])
ST_COL = spec.COL["stress_tolerance"]
#: Grid over stress_tolerance (its effect is a step function, not linear).
ST_GRID = np.linspace(0.0, 1.0, 21)
NOISE_VAR = spec.NOISE_SD**2
#: The stress spiral's effect (spec 3.6).
SPIRAL = np.zeros(spec.N_METERS)
SPIRAL[spec.V] = spec.SPIRAL_V
SPIRAL[spec.C] = spec.SPIRAL_C

_RANGES = np.array([spec.MODIFIER_RANGES[k] for k in THETA_NAMES])
THETA_LO, THETA_HI = _RANGES[:, 0], _RANGES[:, 1]
THETA_MID = (THETA_LO + THETA_HI) / 2.0
#: sd of the in-distribution prior (uniform on the middle 70% of each range).
THETA_SD_INDIST = spec.MIDDLE_FRACTION * (THETA_HI - THETA_LO) / np.sqrt(12.0)

# Indices (into theta) of the belief-relevant parameters.
I_SV, I_SS, I_MORNING, I_WVR, I_PSB = 0, 1, 2, 3, 4

#: Feedback model: pseudo-observation sd on the parameter(s) of an accepted/ignored action.
FEEDBACK_SD = 1.0
FEEDBACK_TARGET = 0.5


def _basis_compact():
    """Compact tables of the origin (theta = 0) and the nine unit profiles, no spiral."""
    base = Profile.neutral().to_array()
    rows = np.tile(base, (N_THETA + 1, 1))
    rows[:, THETA_COLS] = 0.0
    for j in range(N_THETA):
        rows[j + 1, THETA_COLS[j]] = 1.0
    k = compact_params(rows)
    return replace(k, spiral_threshold=np.full(N_THETA + 1, -np.inf))


_BASIS = _basis_compact()
_BASIS_ROWS = N_THETA + 1


def linear_design(
    meters_before, slot: int, action: int, event: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(f0 (5,), J (5, 9))`` with ``expected_delta = f0 + J @ theta + spiral`` (no noise,
    before clipping), for any profile whose nine ``THETA_NAMES`` values are ``theta``. The
    spiral term (``_SPIRAL`` if serenity < threshold) is not included."""
    m = np.broadcast_to(np.asarray(meters_before, dtype=np.float64), (_BASIS_ROWS, spec.N_METERS))
    d = expected_delta_batch(
        _BASIS, m, int(slot), np.full(_BASIS_ROWS, int(action)), np.full(_BASIS_ROWS, int(event))
    )
    f0 = d[0]
    return f0, (d[1:] - f0).T


def reward_equation(obs: dict[str, Any]) -> tuple[np.ndarray, float]:
    """The exact linear equation ``row @ w = rhs`` that one step's reward gives (spec 5)."""
    m1 = np.asarray(obs["meters"], dtype=np.float64)
    d = np.asarray(obs["deltas"], dtype=np.float64)
    r = float(np.asarray(obs["last_reward"]).reshape(-1)[0])
    crashes = float((m1 < spec.CRASH_THRESHOLD).sum())
    row = spec.REWARD_DELTA_SCALE * d + spec.REWARD_LEVEL_SCALE * m1
    rhs = (
        r
        - spec.REWARD_PROGRESS_BONUS * d[spec.P]
        - spec.REWARD_CONNECTION_BONUS * d[spec.N]
        - spec.REWARD_CRASH_PENALTY * crashes
        + spec.REWARD_LEVEL_SCALE * spec.REWARD_LEVEL_BASELINE
    )
    return row, rhs


def step_rows(meters_before, slot: int, action: int, event: int, delta, meters_after):
    """One step's regression rows: ``(keep (5,) bool, J (k, 9), r (G, k))`` with
    ``r[g] = delta - f0 - spiral at ST_GRID[g]`` on the k kept meter components (components
    that ended at 0 or 1 are censored, non-finite ones skipped), or None if nothing is kept."""
    m0 = np.asarray(meters_before, dtype=np.float64)
    m1 = np.asarray(meters_after, dtype=np.float64)
    y = np.asarray(delta, dtype=np.float64)
    keep = (m1 > 0.0) & (m1 < 1.0) & np.isfinite(y)  # clipped components are censored
    if not keep.any() or not np.isfinite(m0[[spec.V, spec.S]]).all():
        return None
    f0, j = linear_design(np.nan_to_num(m0), slot, action, event)
    resid = (y - f0)[keep]
    spiral = m0[spec.S] < spec.SPIRAL_THRESHOLD_BASE - spec.SPIRAL_THRESHOLD_TOLERANCE * ST_GRID
    rg = resid[None, :] - np.where(spiral[:, None], SPIRAL[keep][None, :], 0.0)  # (G, k)
    return keep, j[keep], rg


_SUPPORTS = [np.array(s) for k in range(1, 6) for s in itertools.combinations(range(5), k)]


def solve_simplex_lsq(a: np.ndarray, b: np.ndarray, ridge: float = 1e-9) -> np.ndarray:
    """argmin ``|a w - b|^2 + ridge |w - 0.2|^2`` over the simplex, exactly (every support)."""
    g = a.T @ a + ridge * np.eye(5)
    h = a.T @ b + ridge * 0.2
    best, best_val = np.full(5, 0.2), np.inf
    for s in _SUPPORTS:
        k = len(s)
        kkt = np.zeros((k + 1, k + 1))
        kkt[:k, :k] = g[np.ix_(s, s)]
        kkt[:k, k] = 1.0
        kkt[k, :k] = 1.0
        rhs = np.append(h[s], 1.0)
        try:
            sol = np.linalg.solve(kkt, rhs)
        except np.linalg.LinAlgError:
            continue
        ws = sol[:k]
        if ws.min() < -1e-12:
            continue
        w = np.zeros(5)
        w[s] = np.maximum(ws, 0.0)
        w /= w.sum()
        r = a @ w - b
        val = r @ r + ridge * ((w - 0.2) @ (w - 0.2))
        if val < best_val:
            best, best_val = w, val
    return best


class BeliefState:
    """Posterior over the 15 profile parameters given observations. See the module docstring.

    Feed it the observation dicts of :class:`simulator.env.RhythmEnv` (or the same dicts
    built from real data) with :meth:`update_from_observation`, in order; the observation
    alone carries the step (pre-step meters = meters - deltas, slot = (t - 1) % 4,
    ``last_action``, ``active_event``, ``last_reward``).
    """

    def __init__(
        self,
        prior_scale: float = 1.3,
        n_samples: int = 256,
        seed: int = 0,
        noise_sd: float = spec.NOISE_SD,
    ):
        """``noise_sd``: per-meter noise of an observed delta. The simulator's is
        ``spec.NOISE_SD``; meters computed from real wearable data are far noisier (the
        real-data path passes a larger value so the belief does not overfit them)."""
        self.prior_scale = float(prior_scale)
        self.noise_var = float(noise_sd) ** 2
        self.n_samples = int(n_samples)
        self._seed = int(seed)
        self.reset(seed)

    # -- state ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._seed = int(seed)
        sd = THETA_SD_INDIST * self.prior_scale
        self.prior_mean = THETA_MID.copy()
        self.prior_prec = np.diag(1.0 / sd**2)
        self._prec = np.zeros((N_THETA, N_THETA))  # data precision (J' J / sigma^2)
        g = len(ST_GRID)
        self._b = np.zeros((g, N_THETA))  # J' (y - f0 - spiral_g) / sigma^2
        self._c = np.zeros(g)  # |y - f0 - spiral_g|^2 / sigma^2
        self._log_prior_st = np.zeros(g)
        self._w_rows: list[np.ndarray] = []
        self._w_rhs: list[float] = []
        self._w = np.full(5, 0.2)
        self.n_steps = 0
        self._cache: dict[str, Any] | None = None
        # Fixed standard normals: the same draws every call (smooth across steps).
        z_rng = np.random.default_rng([self._seed, 0xBE11EF])
        self._z = z_rng.standard_normal((self.n_samples, N_THETA))
        self._u = (np.arange(self.n_samples) + 0.5) / self.n_samples

    def update_from_observation(self, obs: dict[str, Any]) -> None:
        """Absorb the step the observation describes (no-op for the reset observation).

        Missing pieces are tolerated (real-data observations): no ``last_reward`` (or a
        non-finite one) skips the reward-weight equation, a missing ``active_event`` means
        none, and non-finite meter or delta components are skipped like censored ones."""
        a = int(obs.get("last_action", spec.N_ACTIONS))
        t = int(obs["t"])
        if a >= spec.N_ACTIONS or t < 1 or "deltas" not in obs:
            return
        m1 = np.asarray(obs["meters"], dtype=np.float64)
        d = np.asarray(obs["deltas"], dtype=np.float64)
        m0 = m1 - d
        event = int(obs.get("active_event", 0) or 0)
        self.update(m0, (t - 1) % spec.SLOTS_PER_DAY, a, event, d, m1)
        r = obs.get("last_reward")
        if r is None or not np.all(np.isfinite(m1)) or not np.all(np.isfinite(d)):
            return
        if not np.isfinite(np.asarray(r, dtype=np.float64).reshape(-1)[0]):
            return
        row, rhs = reward_equation(obs)
        self._w_rows.append(row)
        self._w_rhs.append(rhs)
        self._w = solve_simplex_lsq(np.array(self._w_rows), np.array(self._w_rhs))

    def update_many(self, observations: Iterable[dict[str, Any]]) -> None:
        """:meth:`update_from_observation` for a sequence of observations, in order."""
        for o in observations:
            self.update_from_observation(o)

    def update(
        self, meters_before, slot: int, action: int, event: int, delta, meters_after
    ) -> None:
        """Absorb one step's modifier evidence (the reward-weight equation is separate)."""
        rows = step_rows(meters_before, slot, action, event, delta, meters_after)
        if rows is None:
            return
        _, j, rg = rows
        self._prec += j.T @ j / self.noise_var
        self._b += rg @ j / self.noise_var
        self._c += (rg * rg).sum(axis=1) / self.noise_var
        self.n_steps += 1
        self._cache = None

    def observe_feedback(self, action: int, accepted: bool) -> None:
        """Weak evidence from the product's accept / ignore answers.

        Model: accepting a social action (SOCIALIZE, FAMILY_TIME) is one pseudo-observation
        ``social_vitality = +0.5`` and ``social_serenity = +0.5`` with sd ``FEEDBACK_SD``
        (1.0, i.e. worth about a fifth of the prior); ignoring it the same at ``-0.5``. Work
        actions (DEEP_WORK, ADMIN_WORK, LEARN) do the same for work_vitality_recovery and
        progress_serenity_bonus. Other actions carry no evidence here.
        """
        a = int(action)
        if a in spec.SOCIAL_ACTIONS:
            idx = (I_SV, I_SS)
        elif a in spec.WORK_ACTIONS:
            idx = (I_WVR, I_PSB)
        else:
            return
        target = FEEDBACK_TARGET if accepted else -FEEDBACK_TARGET
        prec = 1.0 / FEEDBACK_SD**2
        for i in idx:
            self._prec[i, i] += prec
            self._b[:, i] += prec * target
            self._c += prec * target**2
        self._cache = None

    # -- posterior --------------------------------------------------------------------------
    def _posterior(self) -> dict[str, Any]:
        if self._cache is not None:
            return self._cache
        prec = self.prior_prec + self._prec
        cov = np.linalg.inv(prec)
        cov = (cov + cov.T) / 2.0
        p0m = self.prior_prec @ self.prior_mean
        means = (self._b + p0m[None, :]) @ cov  # (G, 9)
        quad = np.einsum("gi,ij,gj->g", means, prec, means)
        logml = -0.5 * (self._c + self.prior_mean @ p0m - quad) + self._log_prior_st
        wts = np.exp(logml - logml.max())
        wts /= wts.sum()
        mean = wts @ means
        self._cache = {"cov": cov, "prec": prec, "means": means, "weights": wts, "mean": mean}
        return self._cache

    @property
    def w(self) -> np.ndarray:
        """Point estimate of the reward weights (exact after a handful of diverse steps)."""
        return self._w.copy()

    def theta_mean(self) -> np.ndarray:
        """Posterior mean of the nine linear modifiers (clipped to their ranges)."""
        return np.clip(self._posterior()["mean"], THETA_LO, THETA_HI)

    def theta_cov(self) -> np.ndarray:
        """Posterior covariance of the nine linear modifiers (shared by the grid points)."""
        return self._posterior()["cov"].copy()

    def data_precision(self) -> np.ndarray:
        """Precision added by the data so far (prior excluded)."""
        return self._prec.copy()

    def stress_tolerance_weights(self) -> np.ndarray:
        """Posterior weights of ``ST_GRID``."""
        return self._posterior()["weights"].copy()

    def profile_estimate(self) -> Profile:
        """Posterior-mean profile (reward weights from the exact solve)."""
        post = self._posterior()
        arr = Profile.neutral().to_array()
        arr[:5] = self._w
        arr[THETA_COLS] = np.clip(post["mean"], THETA_LO, THETA_HI)
        arr[ST_COL] = float(post["weights"] @ ST_GRID)
        return Profile.from_array(arr)

    def sample_params(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """(n, 15) posterior samples (fixed quasi-random draws when ``rng`` is None)."""
        post = self._posterior()
        chol = np.linalg.cholesky(post["cov"] + 1e-12 * np.eye(N_THETA))
        if rng is None:
            z = self._z[:n] if n <= self.n_samples else np.resize(self._z, (n, N_THETA))
            u = (np.arange(n) + 0.5) / n
        else:
            z = rng.standard_normal((n, N_THETA))
            u = rng.random(n)
        cdf = np.cumsum(post["weights"])
        g = np.minimum(np.searchsorted(cdf, u), len(ST_GRID) - 1)
        theta = post["means"][g] + z @ chol.T
        out = np.tile(Profile.neutral().to_array(), (n, 1))
        out[:, :5] = self._w
        out[:, THETA_COLS] = np.clip(theta, THETA_LO, THETA_HI)
        out[:, ST_COL] = ST_GRID[g]
        return out

    def sample_profiles(self, n: int, rng: np.random.Generator | None = None) -> list[Profile]:
        """``n`` posterior samples as :class:`Profile` objects."""
        return [Profile.from_array(p) for p in self.sample_params(n, rng)]

    def _belief_samples(self) -> np.ndarray:
        post = self._posterior()
        if "belief_samples" not in post:
            post["belief_samples"] = belief_truth_array(self.sample_params(self.n_samples))
        return post["belief_samples"]

    def belief(self) -> np.ndarray:
        """Posterior median of (social, morning, work), each in [0, 1]."""
        return np.median(self._belief_samples(), axis=0)

    def belief_sd(self) -> np.ndarray:
        """Posterior sd of (social, morning, work)."""
        return self._belief_samples().std(axis=0)
