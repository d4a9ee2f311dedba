"""The shared world model: expected dynamics of sampled profiles, rolled out for many plans.

Used by the weekly teacher (:mod:`agent.teacher`), the real-day planner (:mod:`agent.day`)
and personal dynamics (:mod:`agent.personal`, whose learned effects enter as
:class:`PlanModel`'s ``residual``):

- :class:`PlanModel`: K sampled profiles and reward weights; rolls B plans out at once with
  expected dynamics (the random event replaced by its expectation), optionally the expected
  week of a person who may ignore each recommendation (feedback mode), and scores plans with
  the spec 8 grader;
- :data:`INFO`, :func:`expected_belief_accuracy`: what a step's observation teaches about the
  person, and the spec 8 belief accuracy a posterior precision is expected to give.
"""

from __future__ import annotations

import numpy as np

from agent.belief import (
    I_MORNING,
    I_PSB,
    I_SS,
    I_SV,
    I_WVR,
    N_THETA,
    NOISE_VAR,
    linear_design,
)
from simulator import spec
from simulator.dynamics import EVENT_EFFECT, effect_tables
from simulator.feedback import TAU
from simulator.policies import heuristic_actions

_T = spec.EPISODE_STEPS
_H = spec.HALF_EPISODE
_W = spec.GRADER_WEIGHTS
#: Expected event effect per step before the resilience scale: 0.12 x mean of the six events.
EVENT_MEAN = spec.EVENT_PROBABILITY * EVENT_EFFECT[1:].mean(axis=0)
_SQRT_2_PI = float(np.sqrt(2.0 / np.pi))


class PlanModel:
    """K sampled profiles ``params`` (K, 15) and reward weights ``w`` (5,), ready to roll
    B plans out at once. ``crash_margin``: meters below 0.10 + margin cost ``risk_cost``
    each in the plan score (noise and events are not simulated, so keep a safety band).
    ``residual`` (K, 10, 5), optional: learned per-action effects added to every step's
    expected delta; ``noise`` (K, 28, 5), optional: a noise path per sample, added at each
    step of the week (:mod:`agent.lab.robust`)."""

    def __init__(
        self,
        params: np.ndarray,
        w: np.ndarray,
        crash_margin: float = 0.03,
        risk_cost: float = 0.002,
        feedback: bool = False,
        accept_weight: float = 0.0,
        residual: np.ndarray | None = None,
        noise: np.ndarray | None = None,
    ):
        """``w``: (5,) shared, or (K, 5) one per sample. ``feedback``: roll out the expected
        week of a person who may ignore each recommendation (module docstring);
        ``accept_weight``: score per expected accepted recommendation (feedback mode)."""
        p = np.atleast_2d(np.asarray(params, dtype=np.float64))
        tab = effect_tables(p)
        self.k = p.shape[0]
        ev_scale = (
            spec.EVENT_SCALE_BASE - spec.EVENT_SCALE_RESILIENCE * p[:, spec.COL["event_resilience"]]
        )
        self.const = tab.const + (EVENT_MEAN[None, :] * ev_scale[:, None])[:, None, None, :]
        if residual is not None:
            self.const = self.const + np.asarray(residual, dtype=np.float64)[:, None, :, :]
        self.noise = None if noise is None else np.asarray(noise, dtype=np.float64)
        self.scaled = tab.scaled
        # (4 slots, 10 actions, K, 10): const and scaled side by side, for one gather per step
        self.table = np.ascontiguousarray(
            np.concatenate([self.const, self.scaled], axis=-1).transpose(1, 2, 0, 3)
        )
        self.thr = tab.spiral_threshold
        self.w = np.asarray(w, dtype=np.float64)
        self._wd = spec.REWARD_DELTA_SCALE * self.w
        self._wd[spec.P] += spec.REWARD_PROGRESS_BONUS
        self._wd[spec.N] += spec.REWARD_CONNECTION_BONUS
        self._wm = spec.REWARD_LEVEL_SCALE * self.w
        self.low = spec.CRASH_THRESHOLD + crash_margin
        self.risk_cost = risk_cost
        self.feedback = bool(feedback)
        self.accept_weight = float(accept_weight)
        if self.feedback or self.w.ndim == 2:
            wk = np.broadcast_to(self.w, (self.k, spec.N_METERS))
            self._wd_k = spec.REWARD_DELTA_SCALE * wk
            self._wd_k = self._wd_k + np.array([0, 0, spec.REWARD_PROGRESS_BONUS, 0, spec.REWARD_CONNECTION_BONUS])
            self._wm_k = spec.REWARD_LEVEL_SCALE * wk
        if self.feedback:
            # The person's own view (feedback.md 2): no event at all, for every action.
            self.table_u = np.ascontiguousarray(
                np.concatenate([tab.const, tab.scaled], axis=-1).transpose(1, 2, 0, 3)
            )

    def simulate(self, plans: np.ndarray, meters: np.ndarray, t: int) -> dict[str, np.ndarray]:
        """Roll B plans ``(B, 28 - t)`` out from ``meters`` at step ``t`` for every sample.

        Returns ``rewards`` (B, K, L), ``meters`` (B, K, 5) at the end, ``crashes`` and
        ``risk`` (B, K): meters below 0.10 and below 0.10 + margin, summed over the steps."""
        if self.feedback or self.w.ndim == 2:
            return self._simulate_k(plans, meters, t)
        plans = np.asarray(plans, dtype=np.int64)
        b, length = plans.shape
        m = np.broadcast_to(np.asarray(meters, dtype=np.float64), (b, self.k, 5)).copy()
        rewards = np.empty((b, self.k, length))
        crashes = np.zeros((b, self.k))
        risk = np.zeros((b, self.k))
        thr = self.thr[None, :]
        for j in range(length):
            g = self.table[(t + j) & 3][plans[:, j]]  # (B, K, 10): const | scaled
            fv = np.clip(
                spec.FV_BASE + spec.FV_SLOPE / spec.FV_REF * m[..., 0], spec.FV_MIN, spec.FV_MAX
            )
            d = g[..., :5] + fv[..., None] * g[..., 5:]
            spiral = m[..., 3] < thr
            d[..., 0] += spiral * spec.SPIRAL_V
            d[..., 1] += spiral * spec.SPIRAL_C
            if self.noise is not None:
                d += self.noise[:, t + j]
            new = np.clip(m + d, 0.0, 1.0)
            nc = (new < spec.CRASH_THRESHOLD).sum(axis=-1)
            risk += (new < self.low).sum(axis=-1)
            # spec 5: 10 w.d + (w.m' - 0.5) + 0.5 dP + 0.4 dN - 0.5 crashes, d = m' - m
            rewards[..., j] = (
                (new - m) @ self._wd
                + new @ self._wm
                - spec.REWARD_LEVEL_SCALE * spec.REWARD_LEVEL_BASELINE
                + spec.REWARD_CRASH_PENALTY * nc
            )
            crashes += nc
            m = new
        return {"rewards": rewards, "meters": m, "crashes": crashes, "risk": risk}

    def _outcome(self, g: np.ndarray, m: np.ndarray, fv: np.ndarray, spiral: np.ndarray, step: int):
        """Meters after, reward (per-sample weights), crashes and risky meters of week step
        ``step`` whose table rows are ``g`` (..., K, 10) from meters ``m`` (..., K, 5)."""
        d = g[..., :5] + fv[..., None] * g[..., 5:]
        d[..., 0] += spiral * spec.SPIRAL_V
        d[..., 1] += spiral * spec.SPIRAL_C
        if self.noise is not None:
            d += self.noise[:, step]
        new = np.clip(m + d, 0.0, 1.0)
        nc = (new < spec.CRASH_THRESHOLD).sum(axis=-1)
        r = (
            np.einsum("...km,km->...k", new - m, self._wd_k)
            + np.einsum("...km,km->...k", new, self._wm_k)
            - spec.REWARD_LEVEL_SCALE * spec.REWARD_LEVEL_BASELINE
            + spec.REWARD_CRASH_PENALTY * nc
        )
        return new, r, nc, (new < self.low).sum(axis=-1)

    def _simulate_k(self, plans: np.ndarray, meters: np.ndarray, t: int) -> dict[str, np.ndarray]:
        """:meth:`simulate` with one reward-weight vector per sample, and in feedback mode
        the expected week of a person who answers (accept with the answer model's
        probability, else the habit)."""
        plans = np.asarray(plans, dtype=np.int64)
        b, length = plans.shape
        k = self.k
        m = np.broadcast_to(np.asarray(meters, dtype=np.float64), (b, k, 5)).copy()
        rewards = np.empty((b, k, length))
        crashes = np.zeros((b, k))
        risk = np.zeros((b, k))
        accepted = np.zeros((b, k))
        thr = self.thr[None, :]
        kk = np.arange(k)[None, :]
        for j in range(length):
            slot = (t + j) & 3
            fv = np.clip(
                spec.FV_BASE + spec.FV_SLOPE / spec.FV_REF * m[..., 0], spec.FV_MIN, spec.FV_MAX
            )
            spiral = m[..., 3] < thr
            rec = plans[:, j]
            new, r, nc, rk = self._outcome(self.table[slot][rec], m, fv, spiral, t + j)
            if self.feedback:
                # U(b) for the ten actions, no event (feedback.md 2), under each sample.
                gu = self.table_u[slot].transpose(1, 0, 2)[None]  # (1, K, 10, 10)
                du = gu[..., :5] + fv[..., None, None] * gu[..., 5:]
                du[..., 0] += spiral[..., None] * spec.SPIRAL_V
                du[..., 1] += spiral[..., None] * spec.SPIRAL_C
                nu = np.clip(m[:, :, None, :] + du, 0.0, 1.0)
                u = (
                    np.einsum("bkam,km->bka", nu - m[:, :, None, :], self._wd_k)
                    + np.einsum("bkam,km->bka", nu, self._wm_k)
                    + spec.REWARD_CRASH_PENALTY * (nu < spec.CRASH_THRESHOLD).sum(axis=-1)
                )
                ua = np.take_along_axis(u, np.broadcast_to(rec[:, None, None], (b, k, 1)), -1)[..., 0]
                p = 1.0 / (1.0 + np.exp(-(ua - np.median(u, axis=-1)) / TAU))
                habit = heuristic_actions(m.reshape(-1, 5), slot).reshape(b, k)
                gh = self.table[slot][habit, kk]  # (B, K, 10)
                hn, hr, hc, hk = self._outcome(gh, m, fv, spiral, t + j)
                q = 1.0 - p
                new = p[..., None] * new + q[..., None] * hn
                r, nc, rk = p * r + q * hr, p * nc + q * hc, p * rk + q * hk
                accepted += p
            rewards[..., j] = r
            crashes += nc
            risk += rk
            m = new
        out = {"rewards": rewards, "meters": m, "crashes": crashes, "risk": risk}
        if self.feedback:
            out["accepted"] = accepted
        return out

    def score(
        self,
        plans: np.ndarray,
        meters: np.ndarray,
        t: int,
        past_rewards,
        past_crashes: int,
    ) -> np.ndarray:
        """Expected grade without the belief term of B plans ``(B, 28 - t)``; returns (B,).

        The spec 8 grader on the realised rewards and crashes so far followed by the
        simulated ones, averaged over the K samples, minus ``risk_cost`` per risky meter."""
        sim = self.simulate(plans, meters, t)
        pr = np.asarray(past_rewards, dtype=np.float64)
        if len(pr) != t:
            raise ValueError(f"need the {t} past rewards, got {len(pr)}")
        r = sim["rewards"]
        split = max(0, _H - t)  # simulated steps that fall in the early half
        early = (pr[:_H].sum() + r[..., :split].sum(axis=-1)) / _H
        late = (pr[_H:].sum() + r[..., split:].sum(axis=-1)) / (_T - _H)
        mean_r = (early + late) / 2.0
        adaptation = np.clip(0.5 + (late - early) / spec.GRADER_A, 0.0, 1.0) * np.clip(
            late / spec.GRADER_Q, 0.0, 1.0
        )
        eff = np.clip(mean_r / spec.GRADER_E, 0.0, 1.0)
        m = sim["meters"]
        s = (
            _W["crash_free"] * (1.0 - (past_crashes + sim["crashes"]) / spec.MAX_CRASHES)
            + _W["progress"] * m[..., spec.P]
            + _W["connection"] * m[..., spec.N]
            + _W["adaptation"] * adaptation
            + _W["efficiency"] * eff
            - self.risk_cost * sim["risk"]
        )
        if "accepted" in sim:  # feedback mode: being followed is worth accept_weight each
            s = s + self.accept_weight * sim["accepted"]
        return s.mean(axis=1)


def _info_tables() -> np.ndarray:
    """(4, 10, 9, 9): Fisher information about the nine modifiers of one step, per slot and
    action, at a typical state (all meters 0.6, no event, nothing censored)."""
    out = np.zeros((spec.SLOTS_PER_DAY, spec.N_ACTIONS, N_THETA, N_THETA))
    m = np.full(spec.N_METERS, 0.6)
    for s in range(spec.SLOTS_PER_DAY):
        for a in range(spec.N_ACTIONS):
            _, j = linear_design(m, s, a, 0)
            out[s, a] = j.T @ j / NOISE_VAR
    return out


INFO = _info_tables()
#: Gradients of the linearised belief dims (social, morning, work) w.r.t. the modifiers.
BELIEF_GRAD = np.zeros((N_THETA, 3))
BELIEF_GRAD[[I_SV, I_SS], 0] = (0.4, 0.3)
BELIEF_GRAD[I_MORNING, 1] = 1.0
BELIEF_GRAD[[I_WVR, I_PSB], 2] = (0.4, 0.3)


def expected_belief_accuracy(precision: np.ndarray) -> np.ndarray:
    """Spec 8 belief accuracy expected from posterior precisions (..., 9, 9): the median's
    expected absolute error is sqrt(2/pi) x sd per (linearised) belief dimension."""
    x = np.linalg.solve(
        precision, np.broadcast_to(BELIEF_GRAD, precision.shape[:-2] + BELIEF_GRAD.shape)
    )
    var = np.einsum("...ij,...ij->...j", np.broadcast_to(BELIEF_GRAD, x.shape), x)
    mae = _SQRT_2_PI * np.sqrt(np.maximum(var, 0.0)).mean(axis=-1)
    return np.maximum(0.0, 1.0 - 2.0 * mae)
