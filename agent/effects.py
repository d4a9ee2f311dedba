"""Per-action effects learned from data, with the simulator's table as the prior.

The simulator's dynamics (spec 3) give every step an expected delta. A real person (or a
misspecified world, :mod:`simulator.worlds`) departs from it; the departure that matters
most for planning is per action: EXERCISE that drains rather than restores, a SLEEP that
refreshes less than the table says. The model here is

    delta = expected_delta(meters, slot, action, profile, event) + rho[action] + noise

with ``rho`` (10 actions x 5 meters) an additive *residual effect*, shrunk toward 0 (the
table) by a Gaussian prior of sd ``tau``, and per-meter noise of sd ``sigma``. Both ``tau``
and ``sigma`` are chosen from grids by type-II maximum likelihood (the marginal likelihood
of the data), so the table is trusted exactly as far as the data agree with it: on data
from the simulator itself the smallest ``tau`` wins and ``rho`` stays ~0. Steps whose
residual is far in the tails get less weight (a Student-t likelihood by iteratively
reweighted least squares), so a few surprising steps (an unlogged bad day) do not move the
effects much.

:func:`fit_effects` fits this model to a history of transitions (meters before, slot,
action, meters after), e.g. a person's imported days; :class:`agent.lab.robust.RobustBelief`
fits the same residuals jointly with the profile, online. The linear-Gaussian algebra both
use is :func:`gaussian_posterior`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator import spec
from simulator.dynamics import expected_delta
from simulator.profiles import Profile

N_RESID = spec.N_ACTIONS * spec.N_METERS
#: Default grids: residual-effect prior sd (the smallest is "the table is right") and
#: per-meter noise sd (the simulator's is 0.012).
TAU_GRID: tuple[float, ...] = (0.0001, 0.02, 0.05, 0.10)
SIGMA_GRID: tuple[float, ...] = (0.012, 0.018, 0.027, 0.04, 0.06)
#: Student-t degrees of freedom of the robust likelihood (None: Gaussian).
TAIL_DOF: float | None = 4.0
_LOG_2PI = float(np.log(2.0 * np.pi))


def gaussian_posterior(
    xtx: np.ndarray,
    xtr: np.ndarray,
    rtr: np.ndarray,
    n: float,
    prior_mean: np.ndarray,
    prior_prec: np.ndarray,
    sigma: float,
    extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    logdet_prior: float | None = None,
    want_cov: bool = True,
) -> dict[str, np.ndarray]:
    """Posterior of ``beta`` in ``r_g = X beta + e``, ``e ~ N(0, sigma^2)``, for G targets.

    ``xtx`` (D, D) = X'X, ``xtr`` (G, D) = X'r_g, ``rtr`` (G,) = r_g'r_g (all unscaled, any
    row weights already applied), ``n`` the (weighted) number of rows, prior
    ``N(prior_mean, prior_prec^-1)`` (``logdet_prior``: its log determinant, if known).
    ``extra`` = (precision, b (G, D), c (G,)) of evidence already scaled
    (pseudo-observations), added as is. Returns ``means`` (G, D), ``prec``, ``logdet``
    (of ``prec``), ``cov`` (unless ``want_cov`` is False) and ``log_ev`` (G,): the log
    marginal likelihood of each target."""
    s2 = sigma * sigma
    prec = prior_prec + xtx / s2
    b = xtr / s2 + (prior_prec @ prior_mean)[None, :]
    c = rtr / s2
    if extra is not None:
        prec = prec + extra[0]
        b = b + extra[1]
        c = c + extra[2]
    chol = np.linalg.cholesky(prec)
    means = np.linalg.solve(prec, b.T).T
    quad = (b * means).sum(axis=1)  # b' P^-1 b
    if logdet_prior is None:
        logdet_prior = float(np.linalg.slogdet(prior_prec)[1])
    logdet_post = 2.0 * float(np.log(np.diag(chol)).sum())
    mu0 = prior_mean @ prior_prec @ prior_mean
    log_ev = (
        -0.5 * (c + mu0 - quad)
        + 0.5 * (logdet_prior - logdet_post)
        - 0.5 * n * (_LOG_2PI + np.log(s2))
    )
    out = {"means": means, "prec": prec, "logdet": logdet_post, "log_ev": log_ev}
    if want_cov:
        inv_chol = np.linalg.inv(chol)
        cov = inv_chol.T @ inv_chol
        out["cov"] = (cov + cov.T) / 2.0
    return out


def t_weights(resid: np.ndarray, sigma: float, dof: float | None, cap: bool = True) -> np.ndarray:
    """IRLS (EM) weights of a Student-t likelihood: ``(dof + 1) / (dof + (e / sigma)^2)``,
    capped at 1 unless ``cap`` is False (then a step can count a little more than a
    Gaussian one)."""
    if dof is None:
        return np.ones_like(resid)
    v = (dof + 1.0) / (dof + (resid / sigma) ** 2)
    return np.minimum(1.0, v) if cap else v


@dataclass(frozen=True)
class EffectPrior:
    """The structural prior of :func:`fit_effects`.

    ``profile``: the person the table's dynamics are computed for (the neutral one when
    nothing is known; a belief's profile estimate otherwise); ``tau_grid`` and
    ``sigma_grid``: candidate residual-effect sd and noise sd (type-II ML picks one of
    each; one value fixes it); ``tail_dof``: Student-t degrees of freedom (None:
    Gaussian)."""

    profile: Profile = field(default_factory=Profile.neutral)
    tau_grid: tuple[float, ...] = TAU_GRID
    sigma_grid: tuple[float, ...] = SIGMA_GRID
    tail_dof: float | None = TAIL_DOF


@dataclass(frozen=True, eq=False)
class FittedEffects:
    """Learned per-action effects with their uncertainty (see :func:`fit_effects`).

    ``table`` (10, 5): the spec's base effects; ``residual`` (10, 5): the learned additive
    departure from the prior's dynamics, with ``residual_sd``; ``cov`` (50, 50): its
    posterior covariance (row-major over action x meter); ``tau`` and ``sigma``: the chosen
    prior sd and noise sd; ``n_obs`` (10,): steps seen per action; ``log_evidence``: the
    marginal likelihood of each (tau, sigma) pair."""

    table: np.ndarray
    residual: np.ndarray
    residual_sd: np.ndarray
    cov: np.ndarray
    tau: float
    sigma: float
    n_obs: np.ndarray
    log_evidence: dict[tuple[float, float], float]
    profile: Profile

    @property
    def effect(self) -> np.ndarray:
        """The learned base effect table, ``table + residual`` (10, 5)."""
        return self.table + self.residual

    def multipliers(self) -> np.ndarray:
        """The learned effect over the table's, where the table's entry is not 0 (NaN there)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.table != 0.0, self.effect / self.table, np.nan)

    def predict(self, meters, slot: int, action: int, event: int = 0) -> np.ndarray:
        """Expected delta of one step under the fitted dynamics (before clipping)."""
        d = expected_delta(meters, slot, action, self.profile, event)
        return d + self.residual[int(action)]


Transition = tuple  # (meters_before (5,), slot, action, meters_after (5,)[, event])


def transition_rows(
    transitions: Iterable[Transition], profile: Profile
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(action, meter, residual, step)`` of every usable scalar observation: the observed
    delta minus the profile's expected delta. Components ending at a bound (0 or 1: clipped)
    or non-finite are skipped, as are steps with a non-finite vitality or serenity before."""
    acts, mets, res, steps = [], [], [], []
    for i, tr in enumerate(transitions):
        m0 = np.asarray(tr[0], dtype=np.float64)
        slot, a = int(tr[1]), int(tr[2])
        m1 = np.asarray(tr[3], dtype=np.float64)
        event = int(tr[4]) if len(tr) > 4 and tr[4] is not None else 0
        if not 0 <= a < spec.N_ACTIONS or not np.isfinite(m0[[spec.V, spec.S]]).all():
            continue
        y = m1 - m0
        keep = (m1 > 0.0) & (m1 < 1.0) & np.isfinite(y)
        if not keep.any():
            continue
        d = expected_delta(np.nan_to_num(m0), slot, a, profile, event)
        for k in np.flatnonzero(keep):
            acts.append(a)
            mets.append(int(k))
            res.append(float(y[k] - d[k]))
            steps.append(i)
    return (
        np.array(acts, dtype=np.int64),
        np.array(mets, dtype=np.int64),
        np.array(res, dtype=np.float64),
        np.array(steps, dtype=np.int64),
    )


def fit_effects(
    transitions: Sequence[Transition] | Iterable[Transition], prior: EffectPrior | None = None
) -> FittedEffects:
    """Fit the per-action residual effects to a history of transitions.

    ``transitions``: ``(meters_before, slot, action, meters_after)`` tuples, optionally with
    a fifth item, the event id (0 = none); ``prior``: :class:`EffectPrior`. Pure: the same
    history gives the same fit. Each (action, meter) residual has its own one-dimensional
    posterior given (tau, sigma) (the features are one-hot), so the fit is exact and cheap;
    (tau, sigma) maximise the marginal likelihood over the grids, with Student-t weights
    (IRLS, three passes) when ``tail_dof`` is set."""
    prior = prior or EffectPrior()
    acts, mets, res, steps = transition_rows(transitions, prior.profile)
    idx = acts * spec.N_METERS + mets
    n_obs = np.zeros(spec.N_ACTIONS, dtype=np.int64)
    if len(steps):
        for a in range(spec.N_ACTIONS):
            n_obs[a] = len(np.unique(steps[acts == a]))
    best = None
    evidence: dict[tuple[float, float], float] = {}
    for tau in prior.tau_grid:
        for sigma in prior.sigma_grid:
            fit = _fit_diagonal(idx, res, tau, sigma, None)
            evidence[(float(tau), float(sigma))] = fit["log_ev"]
            if best is None or fit["log_ev"] > best[0]:
                best = (fit["log_ev"], float(tau), float(sigma))
    _, tau, sigma = best
    u = np.ones_like(res)
    for _ in range(3 if prior.tail_dof is not None else 1):
        fit = _fit_diagonal(idx, res, tau, sigma, u)
        u = t_weights(res - fit["mean"][idx], sigma, prior.tail_dof)
    mean = fit["mean"].reshape(spec.N_ACTIONS, spec.N_METERS)
    var = fit["var"]
    return FittedEffects(
        table=np.array(spec.EFFECT, dtype=np.float64),
        residual=mean,
        residual_sd=np.sqrt(var).reshape(spec.N_ACTIONS, spec.N_METERS),
        cov=np.diag(var),
        tau=tau,
        sigma=sigma,
        n_obs=n_obs,
        log_evidence=evidence,
        profile=prior.profile,
    )


def _fit_diagonal(idx, res, tau, sigma, u) -> dict:
    """Independent 1-d conjugate posteriors per residual entry, and the total evidence."""
    u = np.ones_like(res) if u is None else u
    s2, t2 = sigma * sigma, tau * tau
    sxx = np.bincount(idx, weights=u, minlength=N_RESID)
    sxr = np.bincount(idx, weights=u * res, minlength=N_RESID)
    srr = float((u * res * res).sum())
    prec = 1.0 / t2 + sxx / s2
    mean = (sxr / s2) / prec
    log_ev = (
        -0.5 * (srr / s2 - ((sxr / s2) ** 2 / prec).sum())
        - 0.5 * np.log(t2 * prec).sum()
        - 0.5 * float(u.sum()) * (_LOG_2PI + np.log(s2))
    )
    return {"mean": mean, "var": 1.0 / prec, "log_ev": float(log_ev)}
