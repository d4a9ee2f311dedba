"""The robust agent: it notices when the simulator's equations do not fit the person.

:class:`RobustBelief` extends the Bayesian belief (:class:`agent.belief.BeliefState`) with

- **learned per-action effects**: an additive residual ``rho[action, meter]`` on top of the
  profile's expected delta, jointly Gaussian with the nine modifiers, shrunk toward the
  table (0) with prior sd ``tau`` (:mod:`agent.effects` has the same model for a fixed
  profile, :func:`agent.effects.fit_effects`);
- **model-error tracking**: the noise sd ``sigma`` and ``tau`` are chosen every step from
  grids by the marginal likelihood of the week so far. When the table fits (the nominal
  simulator) ``tau`` stays at its smallest value and ``sigma`` at the spec's 0.012, and the
  belief is the plain one; when predictions keep missing, ``sigma`` grows (the belief
  widens, the planner keeps larger margins) and, when the misses are systematic per action,
  ``tau`` grows and the residuals take them over;
- **a heavier-tailed likelihood**: Student-t weights (IRLS) so a few surprising steps do
  not wreck the belief.

:class:`RobustAgent` plans with the learned effects (every rollout sample draws its own
residuals), widens the plan's safety band with the tracked error, and a safety layer
never acts on a first step whose pessimistic prediction crosses the crash line plus a
margin when another action does not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agent.belief import (
    N_THETA,
    ST_COL,
    ST_GRID,
    THETA_COLS,
    THETA_HI,
    THETA_LO,
    BeliefState,
    step_rows,
)
from agent.effects import N_RESID, SIGMA_GRID, TAU_GRID, gaussian_posterior, t_weights
from agent.teacher import BayesAgent
from agent.world import PlanModel
from simulator import spec
from simulator.profiles import Profile

#: Columns of the joint vector: the nine modifiers, the per-action residuals (10 x 5), and
#: a per-meter drift residual (5: an extra move every step, whatever the action).
I_RESID = N_THETA
I_DRIFT = N_THETA + N_RESID
N_DRIFT = spec.N_METERS
N_JOINT = N_THETA + N_RESID + N_DRIFT
#: Prior sd of the drift residual, as a fraction of tau.
DRIFT_RATIO = 0.5
#: Largest per-entry prior sd of a residual effect after the ARD passes.
ARD_MAX = 0.25


class RobustBelief(BeliefState):
    """Posterior over the profile and per-action residual effects; see the module docstring.

    ``tau_grid``/``sigma_grid``: candidate residual prior sd and noise sd (type-II maximum
    likelihood picks a pair every step); ``tail_dof``: Student-t degrees of freedom (None:
    Gaussian); ``forget``: per-step discount of old evidence (None: keep all; e.g. 0.95
    follows traits that drift)."""

    def __init__(
        self,
        prior_scale: float = 1.3,
        n_samples: int = 256,
        seed: int = 0,
        noise_sd: float = spec.NOISE_SD,
        tau_grid: tuple[float, ...] = TAU_GRID,
        sigma_grid: tuple[float, ...] = SIGMA_GRID,
        tail_dof: float | None = None,
        forget: float | None = None,
        drift_ratio: float = DRIFT_RATIO,
        ard_passes: int = 6,
    ):
        self.drift_ratio = float(drift_ratio)
        self.ard_passes = int(ard_passes)
        self.tau_grid = tuple(float(x) for x in tau_grid)
        self.sigma_grid = tuple(float(x) for x in sigma_grid if x >= noise_sd) or (noise_sd,)
        self.tail_dof = tail_dof
        self.forget = forget
        super().__init__(prior_scale, n_samples, seed, noise_sd)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._logdet_theta = float(np.linalg.slogdet(self.prior_prec)[1])
        self._x: list[np.ndarray] = []  # (k, 59) rows per step
        self._r: list[np.ndarray] = []  # (G, k) targets per step
        self._step: list[int] = []
        zr = np.random.default_rng([self._seed, 0x0B057])
        self._zj = zr.standard_normal((self.n_samples, N_JOINT))

    def update(
        self, meters_before, slot: int, action: int, event: int, delta, meters_after
    ) -> None:
        rows = step_rows(meters_before, slot, action, event, delta, meters_after)
        if rows is None:
            return
        keep, j, rg = rows
        x = np.zeros((len(j), N_JOINT))
        x[:, :N_THETA] = j
        kept = np.flatnonzero(keep)
        x[np.arange(len(j)), I_RESID + int(action) * spec.N_METERS + kept] = 1.0
        x[np.arange(len(j)), I_DRIFT + kept] = 1.0
        self._x.append(x)
        self._r.append(rg)
        self._step.append(self.n_steps)
        self.n_steps += 1
        self._cache = None

    # -- posterior --------------------------------------------------------------------------
    def _posterior(self) -> dict[str, Any]:
        if self._cache is not None:
            return self._cache
        g = len(self._log_prior_st)
        prior_mean = np.concatenate([self.prior_mean, np.zeros(N_RESID + N_DRIFT)])
        extra = _pad_extra(self._prec, self._b, self._c)  # pseudo-observations (feedback)
        if self._x:
            x = np.concatenate(self._x)
            r = np.concatenate(self._r, axis=1)
            steps = np.concatenate(
                [np.full(len(a), s) for a, s in zip(self._x, self._step, strict=True)]
            )
            age = self.n_steps - 1 - steps
            base_u = np.ones(len(x)) if self.forget is None else self.forget**age
        else:
            x, r, base_u = np.zeros((0, N_JOINT)), np.zeros((g, 0)), np.zeros(0)
        best = None
        for tau in self.tau_grid:
            prior_prec = _prior_prec(self.prior_prec, tau, self.drift_ratio)
            logdet_prior = float(np.log(np.diag(prior_prec)[N_THETA:]).sum()) + self._logdet_theta
            for sigma in self.sigma_grid:
                fit, lev = self._fit_tails(
                    x, r, base_u, prior_mean, (prior_prec, logdet_prior), sigma, extra
                )
                if best is None or lev > best[0]:
                    best = (lev, tau, sigma, fit, prior_prec)
        lev, tau, sigma, fit, prior_prec = best
        if self.ard_passes and tau > min(self.tau_grid) and len(x):
            fit = self._ard(x, r, base_u, prior_mean, prior_prec, sigma, extra, fit)
        inv_chol = np.linalg.inv(np.linalg.cholesky(fit["prec"]))
        fit["cov"] = (lambda c: (c + c.T) / 2.0)(inv_chol.T @ inv_chol)
        wts = _grid_weights(fit["log_ev"] + self._log_prior_st)
        cov_j, means_j = fit["cov"], fit["means"]
        cov = cov_j[:N_THETA, :N_THETA]
        means = means_j[:, :N_THETA]
        self._cache = {
            "cov": cov,
            "prec": np.linalg.inv(cov),
            "means": means,
            "weights": wts,
            "mean": wts @ means,
            "joint_cov": cov_j,
            "joint_means": means_j,
            "tau": tau,
            "sigma": sigma,
            "log_evidence": lev,
        }
        return self._cache

    def _ard(self, x, r, base_u, prior_mean, prior_prec, sigma, extra, fit):
        """Per-entry shrinkage (automatic relevance determination): starting from the
        chosen ``tau`` for every residual entry, a few EM passes set each entry's prior
        variance to its posterior second moment, ``mean^2 + var`` (within
        ``[tau_min, ARD_MAX]``). An entry the data show far off the table (a SLEEP that
        leaves the mind foggy) gets a wide prior and is learned fast; entries that fit
        shrink back toward the table, so one broken action does not loosen all the others
        and the modifiers stay identified."""
        lo, hi = min(self.tau_grid) ** 2, ARD_MAX**2
        idx = np.arange(I_RESID, N_JOINT)
        prec = prior_prec.copy()
        for _ in range(self.ard_passes):
            wts = _grid_weights(fit["log_ev"] + self._log_prior_st)
            m = wts @ fit["means"][:, idx]
            inv_chol = np.linalg.inv(np.linalg.cholesky(fit["prec"]))
            var = (inv_chol[:, idx] ** 2).sum(axis=0)
            prec[idx, idx] = 1.0 / np.clip(m * m + var, lo, hi)
            logdet = float(np.linalg.slogdet(prec)[1])
            fit = _fit(x, r, base_u, prior_mean, (prec, logdet), sigma, extra, base_u)
        return fit

    def _fit_tails(self, x, r, base_u, prior_mean, prior, sigma, extra):
        """The posterior for one (tau, sigma) and its log evidence, marginal over the
        stress-tolerance grid.

        Gaussian likelihood: the exact evidence. Student-t (``tail_dof``): the posterior
        mode by iteratively reweighted least squares (two passes) and the evidence by
        Laplace's approximation at that mode (the t log-likelihood of the residuals, the
        prior density, and the curvature), so one outlying step costs a few nats instead of
        pushing sigma up for the whole week, while a departure that repeats is cheaper to
        explain with a residual effect."""
        g = len(self._log_prior_st)
        prior_prec, logdet_prior = prior
        if self.tail_dof is None or not len(x):
            fit = _fit(x, r, base_u, prior_mean, prior, sigma, extra, base_u)
            return fit, _logsumexp(fit["log_ev"] + self._log_prior_st) - np.log(g)
        v = np.ones(len(x))
        for _ in range(2):
            fit = _fit(x, r, base_u * v, prior_mean, prior, sigma, extra, base_u)
            wts = _grid_weights(fit["log_ev"] + self._log_prior_st)
            resid = r - fit["means"] @ x.T  # (G, n)
            v = t_weights(wts @ resid, sigma, self.tail_dof, cap=False)
        nu = self.tail_dof
        log_t = (
            math.lgamma((nu + 1.0) / 2.0)
            - math.lgamma(nu / 2.0)
            - 0.5 * np.log(nu * np.pi * sigma * sigma)
            - (nu + 1.0) / 2.0 * np.log1p(resid * resid / (nu * sigma * sigma))
        )  # (G, n)
        dev = fit["means"] - prior_mean[None, :]
        log_prior = -0.5 * np.einsum("gi,ij,gj->g", dev, prior_prec, dev)
        if extra is not None:
            m = fit["means"]
            log_prior += -0.5 * (
                np.einsum("gi,ij,gj->g", m, extra[0], m) - 2.0 * (extra[1] * m).sum(1) + extra[2]
            )
        lev_g = log_t @ base_u + log_prior + 0.5 * (logdet_prior - fit["logdet"])
        fit["log_ev"] = lev_g
        return fit, _logsumexp(lev_g + self._log_prior_st) - np.log(g)

    def data_precision(self) -> np.ndarray:
        """Information about the nine modifiers net of the prior (the residuals' share of
        the evidence taken out)."""
        prec = self._posterior()["prec"] - self.prior_prec
        return (prec + prec.T) / 2.0

    @property
    def sigma(self) -> float:
        """The noise sd the data support (the tracked model error)."""
        return float(self._posterior()["sigma"])

    @property
    def tau(self) -> float:
        """The residual-effect prior sd the data support (how far the table is off)."""
        return float(self._posterior()["tau"])

    def residual_mean(self) -> np.ndarray:
        """Posterior mean of the per-action residual effects (10, 5)."""
        post = self._posterior()
        rho = post["weights"] @ post["joint_means"][:, I_RESID:I_DRIFT]
        return rho.reshape(spec.N_ACTIONS, spec.N_METERS)

    def drift_mean(self) -> np.ndarray:
        """Posterior mean of the per-meter drift residual (5,): an extra move every step."""
        post = self._posterior()
        return post["weights"] @ post["joint_means"][:, I_DRIFT:]

    def residual_sd(self) -> np.ndarray:
        """Posterior sd of the residual effects (10, 5)."""
        var = np.diag(self._posterior()["joint_cov"])[I_RESID:I_DRIFT]
        return np.sqrt(var).reshape(spec.N_ACTIONS, spec.N_METERS)

    def surprises(self, min_size: float = 0.03, z: float = 2.0) -> list[tuple[int, int, float]]:
        """The (action, meter, learned base effect) entries that differ from the table by more
        than ``min_size`` and ``z`` posterior sds, largest first: what the agent noticed."""
        rho, sd = self.residual_mean(), self.residual_sd()
        big = (np.abs(rho) > min_size) & (np.abs(rho) > z * sd)
        eff = self.effects()
        out = [(int(a), int(k), float(eff[a, k])) for a, k in zip(*np.nonzero(big), strict=True)]
        return sorted(out, key=lambda e: -abs(rho[e[0], e[1]]))

    def effects(self) -> np.ndarray:
        """The learned base effect table: the spec's table plus the residuals (10, 5)."""
        return np.array(spec.EFFECT) + self.residual_mean()

    def sample_joint(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(params (n, 15), residuals (n, 10, 5))`` from the joint posterior, with fixed
        quasi-random draws (smooth from one step to the next); the drift residual is
        included in every action's residual."""
        post = self._posterior()
        chol = np.linalg.cholesky(post["joint_cov"] + 1e-12 * np.eye(N_JOINT))
        z = self._zj[:n] if n <= self.n_samples else np.resize(self._zj, (n, N_JOINT))
        u = (np.arange(n) + 0.5) / n
        cdf = np.cumsum(post["weights"])
        g = np.minimum(np.searchsorted(cdf, u), len(cdf) - 1)
        beta = post["joint_means"][g] + z @ chol.T
        out = np.tile(Profile.neutral().to_array(), (n, 1))
        out[:, :5] = self._w
        out[:, THETA_COLS] = np.clip(beta[:, :N_THETA], THETA_LO, THETA_HI)
        out[:, ST_COL] = ST_GRID[g]
        rho = beta[:, I_RESID:I_DRIFT].reshape(n, spec.N_ACTIONS, spec.N_METERS)
        return out, rho + beta[:, None, I_DRIFT:]


def _prior_prec(theta_prec: np.ndarray, tau: float, drift_ratio: float) -> np.ndarray:
    p = np.zeros((N_JOINT, N_JOINT))
    p[:N_THETA, :N_THETA] = theta_prec
    i = np.arange(I_RESID, I_DRIFT)
    p[i, i] = 1.0 / tau**2
    i = np.arange(I_DRIFT, N_JOINT)
    p[i, i] = 1.0 / (max(drift_ratio, 1e-3) * tau) ** 2
    return p


def _pad_extra(prec, b, c):
    if not np.any(prec):
        return None
    p = np.zeros((N_JOINT, N_JOINT))
    p[:N_THETA, :N_THETA] = prec
    bb = np.zeros((b.shape[0], N_JOINT))
    bb[:, :N_THETA] = b
    return p, bb, c


def _fit(x, r, u, prior_mean, prior, sigma, extra, base_u):
    """Weighted fit: ``u`` the rows' precision weights, ``base_u`` their likelihood power
    (forgetting; the count in the normalising term); ``prior`` = (precision, log det)."""
    xu = x * u[:, None]
    return gaussian_posterior(
        xu.T @ x,
        r @ xu,
        (r * r) @ u,
        float(base_u.sum()),
        prior_mean,
        prior[0],
        sigma,
        extra,
        logdet_prior=prior[1],
        want_cov=False,
    )


def _logsumexp(v: np.ndarray) -> float:
    m = float(v.max())
    return m + float(np.log(np.exp(v - m).sum()))


def _grid_weights(v: np.ndarray) -> np.ndarray:
    w = np.exp(v - v.max())
    return w / w.sum()


class RobustAgent(BayesAgent):
    """:class:`agent.teacher.BayesAgent` with :class:`RobustBelief` and caution.

    ``residuals``: plan with the learned per-action effects; ``safety``: the first-step
    safety layer; ``margin_per_sigma``: the plan's safety band grows by this many tracked
    noise sds above the spec's; ``risk_cost``: the plan score's cost per meter-step inside
    the band. Other arguments as :class:`BayesAgent` and :class:`RobustBelief`."""

    def __init__(
        self,
        n_samples: int = 6,
        rounds: int = 3,
        info_weight: float = spec.GRADER_WEIGHTS["belief_accuracy"],
        prior_scale: float = 1.3,
        first_rounds: int = 3,
        noise_sd: float = spec.NOISE_SD,
        residuals: bool = True,
        safety: bool = True,
        margin_per_sigma: float = 2.0,
        risk_cost: float = 0.002,
        tau_grid: tuple[float, ...] = TAU_GRID,
        sigma_grid: tuple[float, ...] = SIGMA_GRID,
        tail_dof: float | None = None,
        forget: float | None = None,
        rollout_noise: bool = True,
        drift_ratio: float = DRIFT_RATIO,
        ard_passes: int = 6,
    ):
        self.rollout_noise = bool(rollout_noise)
        super().__init__(
            n_samples=n_samples,
            rounds=rounds,
            info_weight=info_weight,
            prior_scale=prior_scale,
            first_rounds=first_rounds,
            noise_sd=noise_sd,
        )
        self.use_residuals = bool(residuals)
        self.safety = bool(safety)
        self.margin_per_sigma = float(margin_per_sigma)
        self.risk_cost = float(risk_cost)
        self.belief_state = RobustBelief(
            prior_scale=prior_scale,
            noise_sd=noise_sd,
            tau_grid=tau_grid if residuals else (TAU_GRID[0],),
            sigma_grid=sigma_grid,
            tail_dof=tail_dof,
            forget=forget,
            drift_ratio=drift_ratio,
            ard_passes=ard_passes,
        )
        self.reset(0)

    def reset(self, seed: int) -> None:
        super().reset(seed)
        rng = np.random.default_rng([int(seed), 0x4E015E])
        self._noise_z = rng.standard_normal((self.n_samples, spec.EPISODE_STEPS, spec.N_METERS))

    def _plan_model(self) -> tuple[PlanModel, float]:
        bs = self.belief_state
        params, resid = bs.sample_joint(self.n_samples)
        params[0] = bs.profile_estimate().to_array()
        resid[0] = bs.residual_mean() + bs.drift_mean()
        sigma = bs.sigma
        extra = max(0.0, sigma - spec.NOISE_SD) * self.margin_per_sigma
        noise = None
        excess = np.sqrt(max(0.0, sigma**2 - spec.NOISE_SD**2))
        if self.rollout_noise and excess > 0.0:
            noise = excess * self._noise_z[: self.n_samples]
            noise[0] = 0.0  # the posterior-mean sample stays the expected path
        model = PlanModel(
            params,
            bs.w,
            crash_margin=0.03 + extra,
            risk_cost=self.risk_cost,
            residual=resid if self.use_residuals else None,
            noise=noise,
        )
        return model, (spec.NOISE_SD / sigma) ** 2

    def _check_plan(self, plan: np.ndarray, model: PlanModel, meters: np.ndarray, t: int):
        if not self.safety:
            return plan
        floor = spec.CRASH_THRESHOLD + 0.02
        sigma = self.belief_state.sigma
        first = np.arange(spec.N_ACTIONS)[:, None]
        sim = model.simulate(first, meters, t)  # one step, every first action
        low = sim["meters"].min(axis=1) - 2.0 * sigma  # (10, 5) pessimistic next meters
        slack = (low - floor).min(axis=1)  # (10,)
        a = int(plan[0])
        if slack[a] >= 0.0 or slack.max() <= slack[a]:
            return plan
        safe = np.flatnonzero(slack >= 0.0)
        if len(safe) == 0:
            pick = int(np.argmax(slack))
        else:
            cands = np.repeat(plan[None, :], len(safe), axis=0)
            cands[:, 0] = safe
            past = ([0.0] * t + self._rewards)[-t:] if t else []
            s = model.score(cands, meters, t, past, self._crashes)
            pick = int(safe[int(np.argmax(s))])
        out = plan.copy()
        out[0] = pick
        self._safety_note = (int(plan[0]), int(np.argmin(low[plan[0]])))
        return out

    def _plan_action(self, meters: np.ndarray, t: int) -> int:
        self._safety_note = None
        return super()._plan_action(meters, t)

    def _describe(self, a: int, meters: np.ndarray) -> str:
        """The plain reason, with what the safety layer did and what the agent noticed
        about the chosen action."""
        reason = super()._describe(a, meters)
        note = getattr(self, "_safety_note", None)
        if note is not None:
            planned, k = note
            reason += (
                f" (instead of {spec.ACTIONS[planned]}, which could take "
                f"{spec.METERS[k]} below the crash line)"
            )
        for sa, k, eff in self.belief_state.surprises():
            if sa == a:
                table = spec.EFFECT[sa][k]
                reason += (
                    f"; learned: its effect on {spec.METERS[k]} is {eff - table:+.2f} "
                    f"off the table's {table:+.2f}"
                )
                break
        return reason
