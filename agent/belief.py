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
- **Answers** (feedback.md; :meth:`BeliefState.observe_answer`, and ``last_answer`` in a
  feedback-mode observation): each answer multiplies in its likelihood
  ``p(accept | profile, meters, slot, action)`` under the spec's answer model
  (:mod:`agent.answers`). Once there is an answer the posterior is represented by
  importance weights over ``n_answer_samples`` draws from the meter posterior above (with
  the reward weights, while the reward equations do not pin them yet, drawn from the
  Dirichlet(1) prior conditioned on the equations so far: uniform on the polytope they
  leave, by hit-and-run); belief, samples and point estimates are weighted. Without answers
  nothing changes.

Everything is a pure function of the observation dicts (the real-data side feeds the same
dicts from mapping/).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from agent.answers import (
    Answer,
    TrackStep,
    answer_log_likelihood,
    fill_meters,
    track_states,
    weighted_quantile,
)
from agent.meter_filter import MeterFilter
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

#: Importance samples once there are answers.
N_ANSWER_SAMPLES = 2048
#: The most importance samples ``min_ess`` may grow the belief to.
MAX_ANSWER_SAMPLES = 65536
#: Hit-and-run steps per sample for ``w`` on the polytope the reward equations leave.
W_HIT_AND_RUN_STEPS = 24
ANSWER_SALT = 0xA115


def sample_simplex_polytope(
    a: np.ndarray, w0: np.ndarray, n: int, rng: np.random.Generator, steps: int = W_HIT_AND_RUN_STEPS
) -> np.ndarray:
    """``n`` draws, uniform (the Dirichlet(1) prior, conditioned) on
    ``{w >= 0, sum w = 1, a w = a w0}``, by ``steps`` of hit-and-run from the feasible
    ``w0`` in ``n`` parallel chains. Returns (n, 5)."""
    cons = np.vstack([np.atleast_2d(a), np.ones(5)]) if len(a) else np.ones((1, 5))
    _, sv, vt = np.linalg.svd(cons)
    rank = int((sv > 1e-9 * sv[0]).sum())
    null = vt[rank:]  # (d, 5) directions that keep every equation
    w = np.broadcast_to(np.clip(w0, 0.0, None), (n, 5)).copy()
    if len(null) == 0:
        return w
    for _ in range(steps):
        d = rng.standard_normal((n, len(null))) @ null  # (n, 5)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            lim = -w / d  # where w + s d hits 0
        lo = np.where(d > 1e-12, lim, -np.inf).max(axis=1)
        hi = np.where(d < -1e-12, lim, np.inf).min(axis=1)
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
        s = lo + (hi - lo) * rng.random(n)
        w = np.clip(w + s[:, None] * d, 0.0, None)
    return w / w.sum(axis=1, keepdims=True)


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
        n_answer_samples: int = N_ANSWER_SAMPLES,
        meter_obs_sd: float = 0.0,
        events_observed: bool = True,
        min_ess: float = 0.0,
    ):
        """``noise_sd``: per-meter noise of an observed delta. The simulator's is
        ``spec.NOISE_SD``; meters computed from real wearable data are far noisier (the
        real-data path passes a larger value so the belief does not overfit them).
        ``n_answer_samples``: importance samples once there are answers.
        ``meter_obs_sd``: noise of a reported meter (0: exact; the ``noisy`` condition 0.08),
        used for the meters at the time of an answer; ``events_observed``: whether
        ``active_event`` is seen (not in the ``answers-only`` condition). ``min_ess``: when
        the answers leave fewer effective samples than this, the belief draws four times as
        many (up to ``MAX_ANSWER_SAMPLES``; 0 = never, as measured in the simulator; the
        product, with weeks of answers, should set it, e.g. 100)."""
        self.prior_scale = float(prior_scale)
        self.noise_var = float(noise_sd) ** 2
        self.n_answer_samples = int(n_answer_samples)
        self.meter_obs_sd = float(meter_obs_sd)
        self.events_observed = bool(events_observed)
        self.min_ess = float(min_ess)
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
        # Answers (feedback.md): records, the week's track, fixed importance draws.
        self._answers: list[Answer] = []
        self._track: list[TrackStep] = []
        self._is: dict[str, Any] | None = None
        self._is_base: dict[str, Any] | None = None
        self._filter: MeterFilter | None = None
        self._week = 0
        self._draw_answer_samples(self.n_answer_samples)

    def _draw_answer_samples(self, m: int) -> None:
        """The fixed draws behind ``m`` importance samples (seeded by the belief's seed)."""
        self._m_answer = int(m)
        grown = [] if m == self.n_answer_samples else [m]
        a_rng = np.random.default_rng([self._seed, ANSWER_SALT, *grown])
        self._za = a_rng.standard_normal((m, N_THETA))
        self._ua = (np.arange(m) + 0.5) / m
        g = a_rng.standard_gamma(1.0, (m, 5))
        self._wa = g / g.sum(axis=1, keepdims=True)
        self._wa_seed = int(a_rng.integers(2**31))
        self._is = self._is_base = None

    def update_from_observation(self, obs: dict[str, Any]) -> None:
        """Absorb the step the observation describes (no-op for the reset observation).

        Missing pieces are tolerated (real-data observations): no ``last_reward`` (or a
        non-finite one) skips the reward-weight equation, a missing ``active_event`` means
        none, and non-finite meter or delta components are skipped like censored ones.
        A feedback-mode observation (``last_answer``) also adds the answer it reports."""
        self._record(obs)
        a = int(obs.get("last_action", spec.N_ACTIONS))
        t = int(obs["t"])
        if self.meter_obs_sd > 0:
            self._filter_observe(obs, t, a)
            if a >= spec.N_ACTIONS or t < 1 or "deltas" not in obs:
                return
            m1 = np.asarray(obs["meters"], dtype=np.float64)
            d = np.asarray(obs["deltas"], dtype=np.float64)
        else:
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
        self._is = None

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
        self._is = None

    # -- answers (feedback.md) ----------------------------------------------------------------
    def observe_answer(self, meters, slot: int, action: int, accepted: bool, weight: float = 1.0) -> None:
        """Absorb one real answer: the person accepted (True) or ignored (False) the
        recommendation ``action`` (id 0..9) for slot ``slot`` (0..3), when the slot's meters
        were ``meters`` (5 floats, order V C P S N, NaN where unknown: replaced by
        :data:`agent.answers.TYPICAL_METERS`). The likelihood is the spec's answer model,
        tempered by ``weight`` (0..1: log-likelihood x weight; an implicit answer's confidence)."""
        a, s = int(action), int(slot)
        if not 0 <= a < spec.N_ACTIONS:
            raise ValueError(f"action {action!r} out of range 0..{spec.N_ACTIONS - 1}")
        if not 0 <= s < spec.SLOTS_PER_DAY:
            raise ValueError(f"slot {slot!r} out of range 0..{spec.SLOTS_PER_DAY - 1}")
        m = tuple(float(x) for x in fill_meters(meters))
        self._answers.append(Answer(a, bool(accepted), s, None, m, min(1.0, max(0.0, float(weight)))))
        self._is = None

    def observe_feedback(self, action: int, accepted: bool, weight: float = 1.0) -> None:
        """An answer whose slot and meters are not known (kept for callers that have only
        the action): :meth:`observe_answer` with the probability averaged over the four
        slots, at the typical meters. Prefer :meth:`observe_answer`."""
        a = int(action)
        if not 0 <= a < spec.N_ACTIONS:
            raise ValueError(f"action {action!r} out of range 0..{spec.N_ACTIONS - 1}")
        self._answers.append(Answer(a, bool(accepted), None, None, None, min(1.0, max(0.0, float(weight)))))
        self._is = None

    @property
    def n_answers(self) -> int:
        return len(self._answers)

    def _record(self, obs: dict[str, Any]) -> None:
        """Keep the week's track (meters seen, applied actions, events) and the answer a
        feedback-mode observation reports."""
        t = int(obs["t"])
        if t == 0 or t != len(self._track):
            self._freeze_answers()
            if t != 0:
                return  # not a consecutive stream (real data): no track
        if t >= 1:
            prev = self._track[t - 1]
            a = int(obs.get("last_action", spec.N_ACTIONS))
            prev.applied = a if 0 <= a < spec.N_ACTIONS else -1
            prev.event = int(obs.get("active_event", 0) or 0) if self.events_observed else -1
        meters = np.asarray(obs.get("meters", [np.nan] * spec.N_METERS), dtype=np.float64)
        self._track.append(TrackStep(meters.reshape(spec.N_METERS).copy(), t % spec.SLOTS_PER_DAY))
        answer = int(obs.get("last_answer", 0) or 0)
        if t >= 1 and answer in (1, 2):
            rec = int(obs["last_recommendation"])
            self._answers.append(Answer(rec, answer == 1, (t - 1) % spec.SLOTS_PER_DAY, t - 1))
            self._is = None

    def _freeze_answers(self) -> None:
        """A new week: answers that pointed into the old track keep the meters seen then."""
        frozen = []
        for ans in self._answers:
            if ans.step is not None:
                seen = self._track[ans.step].meters if ans.step < len(self._track) else None
                m = tuple(float(x) for x in fill_meters(seen))
                ans = Answer(ans.action, ans.accepted, ans.slot, None, m, ans.weight)
            frozen.append(ans)
        self._answers = frozen
        self._track = []
        self._week += 1
        self._is = self._is_base = None

    def _filter_observe(self, obs: dict[str, Any], t: int, action: int) -> None:
        """Noisy readings: the joint filter of modifiers and meters (:mod:`agent.meter_filter`)."""
        if t == 0 or self._filter is None:
            cov = np.linalg.inv(self.prior_prec)
            self._filter = MeterFilter(
                self.prior_mean, cov, ST_GRID, linear_design, self.meter_obs_sd
            )
            if t != 0:
                return  # joined mid-stream: start from the next reading
        elif 0 <= action < spec.N_ACTIONS:
            event = int(obs.get("active_event", 0) or 0)
            self._filter.step((t - 1) % spec.SLOTS_PER_DAY, action, event, obs["deltas"])
        self._filter.observe_meters(obs["meters"])
        self.n_steps += 1
        self._cache = None
        self._is = None

    def meters_estimate(self) -> np.ndarray | None:
        """The filter's estimate of the meters now (noisy readings only), else None."""
        return None if self._filter is None else self._filter.meters()

    def _w_pinned(self) -> bool:
        """Whether the reward equations determine ``w`` on the simplex."""
        if len(self._w_rows) < 4:
            return False
        a = np.vstack([np.array(self._w_rows), np.ones(5)])
        sv = np.linalg.svd(a, compute_uv=False)
        return bool(sv[-1] > 1e-3 * sv[0])

    def _importance(self) -> dict[str, Any]:
        """Importance samples of the posterior with the answers (see the module docstring).

        The proposal (samples, their tracks of the week, each answer's log-likelihood) is
        kept until the meter posterior or the reward equations change; new steps and new
        answers only extend it."""
        if self._is is not None:
            return self._is
        key = (self._week, self.n_steps, len(self._w_rows), self.meter_obs_sd, self.events_observed)
        base = self._is_base
        if base is None or base["key"] != key:
            base = self._is_base = self._proposal(key)
        compact = base["compact"]
        if self._track:
            last = len(self._track) - 1
            done = len(base["states"]) - 1
            if last > done:
                states, resume = track_states(
                    compact, self._track, last, self.meter_obs_sd**2, resume=base["resume"]
                )
                base["states"].extend(states)
                base["resume"] = resume
        for ans in self._answers[len(base["ll"]) :]:
            st = base["states"][ans.step] if ans.step is not None else fill_meters(ans.meters)
            ll = answer_log_likelihood(compact, st, ans.slot, ans.action, ans.accepted)
            base["ll"].append(ll if ans.weight == 1.0 else ll * ans.weight)
        logw = base["logw0"] + (np.sum(base["ll"], axis=0) if base["ll"] else 0.0)
        wts = np.exp(logw - logw.max())
        wts /= wts.sum()
        if 1.0 / (wts**2).sum() < self.min_ess and self._m_answer < MAX_ANSWER_SAMPLES:
            # Many answers concentrate the weight on few draws: draw four times as many.
            self._draw_answer_samples(min(4 * self._m_answer, MAX_ANSWER_SAMPLES))
            return self._importance()
        states = np.array(base["states"]) if base["states"] else None
        self._is = {
            "params": base["params"],
            "weights": wts,
            "truth": base["truth"],
            "compact": compact,
            "states_now": None if states is None else states[-1],
            "states": states,
            "grid": base["grid"],
            "ess": float(1.0 / (wts**2).sum()),
        }
        return self._is

    def _proposal(self, key) -> dict[str, Any]:
        """Draws from the meter posterior (``w`` pinned, or Dirichlet draws weighted by the
        reward equations so far)."""
        post = self._posterior()
        m = self._m_answer
        chol = np.linalg.cholesky(post["cov"] + 1e-12 * np.eye(N_THETA))
        g = np.minimum(np.searchsorted(np.cumsum(post["weights"]), self._ua), len(ST_GRID) - 1)
        theta = post["means"][g] + self._za @ chol.T
        params = np.tile(Profile.neutral().to_array(), (m, 1))
        params[:, THETA_COLS] = np.clip(theta, THETA_LO, THETA_HI)
        params[:, ST_COL] = ST_GRID[g]
        logw0 = np.zeros(m)
        if self._w_pinned():
            params[:, :5] = self._w
        elif self._w_rows:
            rng = np.random.default_rng([self._wa_seed, len(self._w_rows)])
            params[:, :5] = sample_simplex_polytope(np.array(self._w_rows), self._w, m, rng)
        else:
            params[:, :5] = self._wa
        return {
            "key": key,
            "params": params,
            "compact": compact_params(params),
            "truth": belief_truth_array(params),
            "grid": g,
            "logw0": logw0,
            "states": [],
            "resume": None,
            "ll": [],
        }

    def importance_samples(self) -> dict[str, Any]:
        """The weighted samples once there are answers (``params`` (M, 15), ``weights``,
        ``truth`` (M, 3), ``compact``, ``states_now``: each sample's estimate of the current
        meters or None, ``ess``); the planner reads them."""
        return self._importance()

    # -- posterior --------------------------------------------------------------------------
    def _posterior(self) -> dict[str, Any]:
        if self._cache is not None:
            return self._cache
        if self._filter is not None:
            means, cov = self._filter.theta()
            wts = self._filter.weights
            self._cache = {
                "cov": cov,
                "prec": np.linalg.inv(cov),
                "means": means,
                "weights": wts,
                "mean": wts @ means,
            }
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
        """Point estimate of the reward weights (exact after a handful of diverse steps;
        with answers and ``w`` not pinned yet, the weighted mean of the samples)."""
        if self._answers:
            s = self._importance()
            return s["weights"] @ s["params"][:, :5]
        return self._w.copy()

    def theta_mean(self) -> np.ndarray:
        """Posterior mean of the nine linear modifiers (clipped to their ranges)."""
        if self._answers:
            s = self._importance()
            return s["weights"] @ s["params"][:, THETA_COLS]
        return np.clip(self._posterior()["mean"], THETA_LO, THETA_HI)

    def theta_cov(self) -> np.ndarray:
        """Posterior covariance of the nine linear modifiers (shared by the grid points)."""
        if self._answers:
            s = self._importance()
            x = s["params"][:, THETA_COLS] - self.theta_mean()[None, :]
            return (s["weights"][:, None] * x).T @ x
        return self._posterior()["cov"].copy()

    def data_precision(self) -> np.ndarray:
        """Precision added by the data so far (prior excluded)."""
        if self._filter is not None:
            return self._posterior()["prec"] - self.prior_prec
        return self._prec.copy()

    def stress_tolerance_weights(self) -> np.ndarray:
        """Posterior weights of ``ST_GRID``."""
        if self._answers:
            s = self._importance()
            return np.bincount(s["grid"], weights=s["weights"], minlength=len(ST_GRID))
        return self._posterior()["weights"].copy()

    def profile_estimate(self) -> Profile:
        """Posterior-mean profile (reward weights from the exact solve)."""
        if self._answers:
            s = self._importance()
            return Profile.from_array(s["weights"] @ s["params"])
        post = self._posterior()
        arr = Profile.neutral().to_array()
        arr[:5] = self._w
        arr[THETA_COLS] = np.clip(post["mean"], THETA_LO, THETA_HI)
        arr[ST_COL] = float(post["weights"] @ ST_GRID)
        return Profile.from_array(arr)

    def sample_params(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """(n, 15) posterior samples (fixed quasi-random draws when ``rng`` is None; with
        answers, a systematic resample of the importance samples)."""
        if self._answers:
            s = self._importance()
            u = (np.arange(n) + 0.5) / n if rng is None else np.sort(rng.random(n))
            idx = np.minimum(np.searchsorted(np.cumsum(s["weights"]), u), len(s["weights"]) - 1)
            return s["params"][idx].copy()
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
        if self._answers:
            s = self._importance()
            return weighted_quantile(s["truth"], s["weights"])
        return np.median(self._belief_samples(), axis=0)

    def belief_sd(self) -> np.ndarray:
        """Posterior sd of (social, morning, work)."""
        if self._answers:
            s = self._importance()
            mean = s["weights"] @ s["truth"]
            return np.sqrt(s["weights"] @ (s["truth"] - mean[None, :]) ** 2)
        return self._belief_samples().std(axis=0)


def filter_belief(state: BeliefState, meters: Any = None) -> list[float]:
    """What a filter says of the person now: the posterior median of (social, morning, work)
    and its sd, then the five meters the agent plans from (``meters``; 0.5 where None),
    eleven numbers rounded to 4 places (the v4 prompt's ``b`` line)."""
    med = np.asarray(state.belief(), dtype=np.float64).reshape(-1)
    sd = np.asarray(state.belief_sd(), dtype=np.float64).reshape(-1)
    m = np.full(spec.N_METERS, 0.5) if meters is None else np.asarray(meters, dtype=np.float64).reshape(-1)
    m = np.where(np.isfinite(m), np.clip(m, 0.0, 1.0), 0.5)
    return [round(float(x), 4) for x in (*med, *sd, *m)]
