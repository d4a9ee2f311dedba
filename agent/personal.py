"""Personal dynamics: how a person's real meters move from slot to slot, fitted from history.

Real meters are scores against the person's usual for that slot (0.5 = usual), not the
simulator's levels: a good night shows as a morning above 0.5 and the next day's morning is
back near 0.5, whatever was done; within a day the day-scope signals (last night's sleep,
the day's HRV) hardly move. The simulator's step (SLEEP +0.18 vitality, a steady drift)
predicts these changes worse than "no change" (docs/agent.md section 8, "Personal dynamics
on real data"). So the dynamics are modelled in the real meter space, with the simulator
only as a structural prior. For each meter ``k`` and each step into slot ``s``:

    delta_k = c[s, k] + r[s, k] * (m_k - 0.5)          the slot's drift and pull to usual
              + kappa * T[s, a, k] + rho[a, k]           the action taken in the slot
              + sum over the previous afternoon, evening and night's actions b of
                carry[b, k]                              (morning steps only: what shows
                                                          overnight, e.g. an evening run)
              + noise, sd sigma[s, k]

``T`` is the simulator's effect of action ``a`` in slot ``s`` relative to the average action
of that slot (which actions move which meters, and when), ``kappa`` its scale on real
meters; ``rho`` (the person's departure from the table, 10 x 5) and ``carry`` (10 x 5) are
shrunk toward 0 with prior sd ``tau``; the slot terms ``c`` (wide prior) and ``r`` (prior sd
``tau_r``: the smallest value is "persistence", no pull) absorb what no action explains.
``kappa``, ``tau`` and ``tau_r`` are chosen by the marginal likelihood (type-II maximum
likelihood, from grids that include "the table says nothing" and "persistence"), the
per-slot noise ``sigma`` is a plug-in estimate, and steps in the tails get Student-t
weights (IRLS, :func:`agent.effects.t_weights`). With no data every term is its prior:
"no change", plus ``kappa * T`` for a known action.

Pure: :func:`transitions` turns stored slots (plain data, :class:`SlotMeters`) into steps,
:func:`fit_personal` fits them, :func:`heldout_errors` measures one-step prediction on the
last days. The planner takes the person's departures in its own units
(:meth:`PersonalDynamics.plan_residual`, the ``residual`` of :class:`agent.world.PlanModel`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from agent.effects import gaussian_posterior, t_weights
from simulator import spec
from simulator.dynamics import expected_delta
from simulator.profiles import Profile

N_SLOTS, N_ACTIONS, N_METERS = spec.SLOTS_PER_DAY, spec.N_ACTIONS, spec.N_METERS
#: Fewer usable steps than this: the fit is the prior (nothing learned).
MIN_TRANSITIONS = 14
#: Scale of the simulator's relative effects on real meters; the first value is the default
#: when the evidence cannot tell (e.g. no step with a known action).
KAPPA_GRID: tuple[float, ...] = (0.5, 0.25, 1.0, 0.0)
#: Prior sd of the person's per-action departures (``rho``) and carried effects.
TAU_GRID: tuple[float, ...] = (0.0001, 0.01, 0.03, 0.06)
#: Prior sd of the per-slot pull toward the usual (0.0001: persistence, no pull).
TAU_R_GRID: tuple[float, ...] = (0.0001, 0.3, 1.0)
#: Prior sd of the per-slot drift: wide, so that an action done in every such slot (SLEEP
#: every night) is absorbed here rather than read as that action's departure.
TAU_C = 0.2
#: The pull toward the usual is kept within these (below -1 a step would overshoot the
#: usual; a few steps of a sparsely observed meter can suggest that).
REVERSION_BOUNDS = (-1.0, 0.5)
SIGMA_FLOOR = 0.002
SIGMA_PRIOR, SIGMA_PRIOR_N = 0.02, 2.0
TAIL_DOF = 4.0
#: Per-entry shrinkage of the action terms (ARD, EM passes), from a loose start, within
#: [ARD_MIN, ARD_MAX] prior sd.
ARD_PASSES, ARD_START, ARD_MIN, ARD_MAX = 8, 0.06, 0.0001, 0.15
#: The planner's translation of real-meter departures into the simulator's units when the
#: evidence chose kappa = 0.
KAPPA_PLAN_DEFAULT = KAPPA_GRID[0]
PLAN_RESIDUAL_BOUND = 0.3
#: A departure is reported and reaches the planner when it is this large, this many sds,
#: and backed by this many steps on each side of its contrast.
DEPARTURE_MIN, DEPARTURE_Z, DEPARTURE_MIN_STEPS = 0.01, 2.5, 5
CARRY_SLOTS = (1, 2, 3)  # the previous day's afternoon, evening and night carry into the morning
#: Feature layout per meter: c (4), r (4), rho (10), carry (10).
_C, _R, _A, _B = 0, N_SLOTS, 2 * N_SLOTS, 2 * N_SLOTS + N_ACTIONS
N_FEATURES = 2 * N_SLOTS + 2 * N_ACTIONS


def _structure() -> np.ndarray:
    """(4, 10, 5): the simulator's effect of each action per slot, relative to the average
    action of that slot, for the neutral profile at the usual meters (0.5)."""
    m = np.full(N_METERS, 0.5)
    d = np.array([[expected_delta(m, s, a, Profile.neutral()) for a in range(N_ACTIONS)]
                  for s in range(N_SLOTS)])
    return d - d.mean(axis=1, keepdims=True)


STRUCTURE = _structure()


@dataclass(frozen=True)
class SlotMeters:
    """One stored slot: ``slot`` 0 morning .. 3 night, ``meters`` (5, None = missing),
    ``action`` 0..9 or None (unknown)."""

    day: date
    slot: int
    meters: tuple[float | None, ...]
    action: int | None = None


@dataclass(frozen=True)
class Step:
    """One step into ``slot`` of ``day``: the meters before (the slot before) and after
    (NaN = missing), the slot's action and, for a morning, the actions of the previous
    afternoon, evening and night (``carried``)."""

    day: date
    slot: int
    before: np.ndarray
    action: int | None
    after: np.ndarray
    carried: tuple[int, ...] = ()


def _vec(meters: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in meters], dtype=np.float64)


def transitions(slots: Iterable[SlotMeters]) -> list[Step]:
    """Consecutive slots as steps (evening -> night, night -> the next morning, ...), in
    time order. A slot with no stored row breaks the chain (no step into or out of it)."""
    by_key = {(s.day, int(s.slot)): s for s in slots}
    out = []
    for (d, s), row in sorted(by_key.items()):
        prev_key = (d, s - 1) if s > 0 else (d - timedelta(days=1), N_SLOTS - 1)
        prev = by_key.get(prev_key)
        if prev is None:
            continue
        carried: tuple[int, ...] = ()
        if s == 0:
            y = d - timedelta(days=1)
            carried = tuple(
                int(by_key[(y, k)].action) for k in CARRY_SLOTS
                if (y, k) in by_key and by_key[(y, k)].action is not None
            )
        a = None if row.action is None else int(row.action)
        out.append(Step(d, s, _vec(prev.meters), a, _vec(row.meters), carried))
    return out


@dataclass(frozen=True)
class PersonalPrior:
    """Grids of :func:`fit_personal` (one value fixes a hyperparameter)."""

    kappa_grid: tuple[float, ...] = KAPPA_GRID
    tau_grid: tuple[float, ...] = TAU_GRID
    tau_r_grid: tuple[float, ...] = TAU_R_GRID
    tau_c: float = TAU_C
    tail_dof: float | None = TAIL_DOF
    min_transitions: int = MIN_TRANSITIONS


@dataclass(frozen=True, eq=False)
class PersonalDynamics:
    """A person's fitted dynamics (see the module docstring).

    ``intercept``, ``reversion`` (4, 5): ``c`` and ``r``; ``residual``, ``residual_sd`` (10,
    5): ``rho``; ``carry``, ``carry_sd`` (10, 5); ``sigma`` (4, 5) the noise sd per slot;
    ``kappa``, ``tau``, ``tau_r`` (5,) the chosen hyperparameters; ``n_obs`` (10,) steps
    taken with each action, ``n_carry`` (10,) mornings after it, ``support`` (10,) the
    smaller side of the contrast behind it (steps with it against steps in the same slots
    without it, or mornings after it against mornings not); ``n_transitions`` usable
    steps; ``fitted``: False when the history was too short (everything is the prior)."""

    intercept: np.ndarray
    reversion: np.ndarray
    residual: np.ndarray
    residual_sd: np.ndarray
    carry: np.ndarray
    carry_sd: np.ndarray
    total_sd: np.ndarray
    sigma: np.ndarray
    kappa: float
    tau: float
    tau_r: np.ndarray
    n_obs: np.ndarray
    n_carry: np.ndarray
    support: np.ndarray
    n_transitions: int
    fitted: bool
    log_evidence: dict[tuple[float, float], float] = field(default_factory=dict)
    #: (5, 4, 20) and (5, 4): the training steps' mean action features and table part per
    #: meter and slot (the action terms are fitted as contrasts to the slot's average step,
    #: so that an action done in nearly every such slot is not confused with the slot's drift)
    centre: np.ndarray | None = None
    table_centre: np.ndarray | None = None

    @property
    def table(self) -> np.ndarray:
        """(4, 10, 5): the prior's effect per slot, ``kappa * T`` (real-meter units)."""
        return self.kappa * STRUCTURE

    @property
    def effect(self) -> np.ndarray:
        """(4, 10, 5): the fitted effect of each action per slot, relative to the slot's usual."""
        return self.table + self.residual[None, :, :]

    def total_effect(self) -> np.ndarray:
        """(10, 5): an action's own-slot effect (averaged over slots) plus what it carries
        into the next morning: the whole effect the simulator would book in one step."""
        return self.effect.mean(axis=0) + self.carry

    def departure(self) -> tuple[np.ndarray, np.ndarray]:
        """(10, 5) departure of the whole effect from the prior, ``rho + carry``, and its sd.

        SLEEP's is its own slot's only: what a night's sleep carries into the morning *is*
        the table's SLEEP (and every plan sleeps the night), not a departure from it."""
        dep, sd = self.residual + self.carry, self.total_sd.copy()
        dep[spec.SLEEP] = self.residual[spec.SLEEP]
        sd[spec.SLEEP] = self.residual_sd[spec.SLEEP]
        return dep, sd

    def predict(self, meters, slot: int, action: int | None, carried: Sequence[int] = ()) -> np.ndarray:
        """Expected change (5,) of one step into ``slot``; a missing meter before: 0."""
        m = np.asarray(meters, dtype=np.float64)
        x = np.zeros(2 * N_ACTIONS)
        t = np.zeros(N_METERS)
        if action is not None:
            x[int(action)] = 1.0
            t = STRUCTURE[slot, int(action)]
        if slot == 0:
            for b in carried:
                x[N_ACTIONS + int(b)] += 1.0
        beta = np.concatenate([self.residual, self.carry])  # (20, 5)
        if self.centre is not None:
            xc = x[None, :] - self.centre[:, slot, :]  # (5, 20)
            acts = np.einsum("kj,jk->k", xc, beta) + self.kappa * (t - self.table_centre[:, slot])
        else:
            acts = x @ beta + self.kappa * t
        d = self.intercept[slot] + self.reversion[slot] * (m - 0.5) + acts
        return np.where(np.isfinite(m), d, 0.0)

    def plan_residual(self) -> np.ndarray:
        """(10, 5) the person's departures in the simulator's units, for the planner's
        ``PlanModel(residual=...)``: ``(rho + carry) / kappa`` (the default kappa when the
        evidence chose 0), bounded, and 0 for actions never seen. The planner keeps the
        simulator's levels (its rewards are defined on them) and takes only what this
        person does differently with each action."""
        k = self.kappa if self.kappa > 0 else KAPPA_PLAN_DEFAULT
        dep, _ = self.departure()
        out = np.clip(dep / k, -PLAN_RESIDUAL_BOUND, PLAN_RESIDUAL_BOUND)
        return np.where(self.supported(), out, 0.0)

    def supported(self) -> np.ndarray:
        """(10, 5) the departures the data back: at least ``DEPARTURE_MIN``,
        ``DEPARTURE_Z`` sds, and ``DEPARTURE_MIN_STEPS`` steps on each side of the contrast
        (one of a hundred entries passing two sds by chance is no finding)."""
        if not self.fitted:
            return np.zeros((N_ACTIONS, N_METERS), dtype=bool)
        dep, sd = self.departure()
        ok = (np.abs(dep) >= DEPARTURE_MIN) & (np.abs(dep) >= DEPARTURE_Z * sd)
        return ok & (self.support >= DEPARTURE_MIN_STEPS)[:, None]

    def departures(self) -> list[dict]:
        """Entries whose fitted effect departs from the table's (larger than
        :meth:`supported`), largest first:
        ``action``, ``meter`` (indices), ``fitted`` and ``table`` (whole effect, real-meter
        units), ``sd``, ``n``."""
        dep, sd = self.departure()
        table = self.table.mean(axis=0)
        ok = self.supported()
        out = []
        for a in range(N_ACTIONS):
            n = int(max(self.n_obs[a], self.n_carry[a]))
            for k in range(N_METERS):
                if ok[a, k]:
                    out.append({"action": a, "meter": k, "fitted": float(table[a, k] + dep[a, k]),
                                "table": float(table[a, k]), "sd": float(sd[a, k]), "n": n})
        out.sort(key=lambda x: -abs(x["fitted"] - x["table"]))
        return out


def prior_dynamics(kappa: float = KAPPA_GRID[0], n_transitions: int = 0) -> PersonalDynamics:
    """Everything at its prior: no change, plus ``kappa * T`` for a known action."""
    z = np.zeros((N_ACTIONS, N_METERS))
    return PersonalDynamics(
        intercept=np.zeros((N_SLOTS, N_METERS)), reversion=np.zeros((N_SLOTS, N_METERS)),
        residual=z, residual_sd=z + TAU_GRID[-1], carry=z.copy(), carry_sd=z + TAU_GRID[-1],
        total_sd=z + TAU_GRID[-1] * np.sqrt(2.0), sigma=np.full((N_SLOTS, N_METERS), SIGMA_PRIOR),
        kappa=float(kappa), tau=TAU_GRID[-1], tau_r=np.full(N_METERS, TAU_R_GRID[0]),
        n_obs=np.zeros(N_ACTIONS, dtype=np.int64), n_carry=np.zeros(N_ACTIONS, dtype=np.int64),
        support=np.zeros(N_ACTIONS, dtype=np.int64),
        n_transitions=int(n_transitions), fitted=False,
    )


def _rows(steps: Sequence[Step], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Design (n, 28), target (n,), the table's part (n,: T[s, a, k] for a known action)
    and slot (n,) of every step usable for meter ``k`` (both ends finite and inside (0, 1))."""
    xs, ys, ts, ss = [], [], [], []
    for st in steps:
        m0, m1 = st.before[k], st.after[k]
        if not (np.isfinite(m0) and np.isfinite(m1)) or m1 <= 0.0 or m1 >= 1.0:
            continue
        x = np.zeros(N_FEATURES)
        x[_C + st.slot] = 1.0
        x[_R + st.slot] = m0 - 0.5
        t = 0.0
        if st.action is not None:
            x[_A + st.action] = 1.0
            t = STRUCTURE[st.slot, st.action, k]
        if st.slot == 0:
            for b in st.carried:
                x[_B + b] += 1.0
        xs.append(x)
        ys.append(m1 - m0)
        ts.append(t)
        ss.append(st.slot)
    if not xs:
        return np.zeros((0, N_FEATURES)), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.array(xs), np.array(ys), np.array(ts), np.array(ss, dtype=np.int64)


def _prior_prec(tau: float, tau_r: float, tau_c: float) -> np.ndarray:
    v = np.empty(N_FEATURES)
    v[_C:_R] = 1.0 / tau_c**2
    v[_R:_A] = 1.0 / tau_r**2
    v[_A:] = 1.0 / tau**2
    return np.diag(v)


def _solve(x, y, t, kappa, scale, u, prec0) -> dict:
    """Posterior of one meter's coefficients with rows weighted by ``u / scale^2``."""
    w = u / scale**2
    r = y - kappa * t
    xw = x * w[:, None]
    return gaussian_posterior(
        x.T @ xw, (xw.T @ r)[None, :], np.array([float((w * r * r).sum())]), float(u.sum()),
        np.zeros(N_FEATURES), prec0, 1.0,
        logdet_prior=float(np.log(np.diag(prec0)).sum()),
    )


def _sigma(x, y, t, ss, kappa, mean, u) -> np.ndarray:
    """Per-slot noise sd from weighted residuals, with a weak prior (SIGMA_PRIOR, 2 steps)."""
    e = y - kappa * t - x @ mean
    out = np.empty(N_SLOTS)
    for s in range(N_SLOTS):
        m = ss == s
        num = float((u[m] * e[m] ** 2).sum()) + SIGMA_PRIOR_N * SIGMA_PRIOR**2
        out[s] = max(SIGMA_FLOOR, np.sqrt(num / (float(u[m].sum()) + SIGMA_PRIOR_N)))
    return out


def fit_personal(steps: Sequence[Step], prior: PersonalPrior | None = None) -> PersonalDynamics:
    """Fit a person's dynamics to their steps (:func:`transitions`). Pure and deterministic.

    Each meter is its own Gaussian linear model (28 coefficients); the noise per slot is a
    plug-in estimate (two passes), ``tau`` and ``tau_r`` per meter and ``kappa`` for all
    meters maximise the marginal likelihood over the grids; the tails are down-weighted by
    Student-t weights (three IRLS passes). Fewer than ``min_transitions`` usable steps: the
    prior (:func:`prior_dynamics`)."""
    prior = prior or PersonalPrior()
    steps = list(steps)
    data = [_rows(steps, k) for k in range(N_METERS)]
    centre = np.zeros((N_METERS, N_SLOTS, 2 * N_ACTIONS))
    table_centre = np.zeros((N_METERS, N_SLOTS))
    for k, (x, _y, t, ss) in enumerate(data):
        for s in range(N_SLOTS):
            m = ss == s
            if m.any():
                centre[k, s] = x[m, _A:].mean(axis=0)
                table_centre[k, s] = t[m].mean()
        x[:, _A:] -= centre[k, ss]
        t -= table_centre[k, ss]
    usable = len({(st.day, st.slot) for st in steps
                  if np.isfinite(st.before).any() and np.isfinite(st.after).any()})
    if usable < prior.min_transitions or all(len(d[1]) == 0 for d in data):
        return prior_dynamics(prior.kappa_grid[0], usable)

    # noise per slot: plug-in, at middle hyperparameters
    sig = np.full((N_METERS, N_SLOTS), SIGMA_PRIOR)
    k0, t0, r0 = prior.kappa_grid[0], prior.tau_grid[min(2, len(prior.tau_grid) - 1)], prior.tau_r_grid[-1]
    for k, (x, y, t, ss) in enumerate(data):
        if not len(y):
            continue
        u = np.ones_like(y)
        for _ in range(2):
            fit = _solve(x, y, t, k0, sig[k][ss], u, _prior_prec(t0, r0, prior.tau_c))
            sig[k] = _sigma(x, y, t, ss, k0, fit["means"][0], u)

    # hyperparameters by the evidence: tau, tau_r per meter, kappa shared
    evidence: dict[tuple[float, float], float] = {}
    best_k, best_total, best_per = None, -np.inf, None
    for kappa in prior.kappa_grid:
        total, per = 0.0, []
        for k, (x, y, t, ss) in enumerate(data):
            if not len(y):
                per.append((prior.tau_grid[-1], prior.tau_r_grid[0]))
                continue
            u = np.ones_like(y)
            best = None
            for tau in prior.tau_grid:
                for tau_r in prior.tau_r_grid:
                    fit = _solve(x, y, t, kappa, sig[k][ss], u, _prior_prec(tau, tau_r, prior.tau_c))
                    ev = float(fit["log_ev"][0])
                    if best is None or ev > best[0] + 1e-9:
                        best = (ev, tau, tau_r)
            total += best[0]
            per.append(best[1:])
        evidence[(float(kappa), 0.0)] = total
        if total > best_total + 1e-6:
            best_k, best_total, best_per = kappa, total, per

    coef = np.zeros((N_METERS, N_FEATURES))
    cov = np.zeros((N_METERS, N_FEATURES, N_FEATURES))
    for k, (x, y, t, ss) in enumerate(data):
        tau, tau_r = best_per[k]
        prec0 = _prior_prec(tau, tau_r, prior.tau_c)
        if not len(y):
            cov[k] = np.linalg.inv(prec0)
            continue
        u = np.ones_like(y)
        scale = sig[k][ss]
        # per-entry shrinkage (ARD): one real effect among twenty is not drowned by the
        # nineteen that are 0 (a single tau would shrink it away); from a loose start
        prec0[_A:, _A:] = np.eye(2 * N_ACTIONS) / max(tau, ARD_START) ** 2
        for _ in range(ARD_PASSES):
            fit = _solve(x, y, t, best_k, scale, u, prec0)
            mean, var = fit["means"][0], np.diag(fit["cov"])
            e = y - best_k * t - x @ mean
            if prior.tail_dof is not None:
                u = t_weights(e / scale, 1.0, prior.tail_dof)
            v = np.clip(mean[_A:] ** 2 + var[_A:], ARD_MIN**2, ARD_MAX**2)
            prec0[_A:, _A:] = np.diag(1.0 / v)
        fit = _solve(x, y, t, best_k, scale, u, prec0)
        coef[k], cov[k] = fit["means"][0], fit["cov"]

    sd = np.sqrt(np.einsum("kii->ki", cov))  # (5, 28)
    a_idx, b_idx = np.arange(_A, _B), np.arange(_B, N_FEATURES)
    tot_var = (sd[:, _A:_B] ** 2 + sd[:, _B:] ** 2 + 2.0 * cov[:, a_idx, b_idx])
    n_obs = np.zeros(N_ACTIONS, dtype=np.int64)
    n_carry = np.zeros(N_ACTIONS, dtype=np.int64)
    per_slot = np.zeros((N_SLOTS, N_ACTIONS), dtype=np.int64)
    slot_steps = np.zeros(N_SLOTS, dtype=np.int64)
    for st in steps:
        slot_steps[st.slot] += 1
        if st.action is not None:
            n_obs[st.action] += 1
            per_slot[st.slot, st.action] += 1
        if st.slot == 0:
            for b in set(st.carried):
                n_carry[b] += 1
    own_without = np.array([sum(slot_steps[s] - per_slot[s, a] for s in range(N_SLOTS) if per_slot[s, a])
                            for a in range(N_ACTIONS)])
    support = np.maximum(np.minimum(n_obs, own_without), np.minimum(n_carry, slot_steps[0] - n_carry))
    return PersonalDynamics(
        intercept=coef[:, _C:_R].T.copy(), reversion=np.clip(coef[:, _R:_A].T, *REVERSION_BOUNDS),
        residual=coef[:, _A:_B].T.copy(), residual_sd=sd[:, _A:_B].T.copy(),
        carry=coef[:, _B:].T.copy(), carry_sd=sd[:, _B:].T.copy(),
        total_sd=np.sqrt(np.maximum(tot_var, 0.0)).T.copy(), sigma=sig.T.copy(),
        kappa=float(best_k), tau=float(np.median([p[0] for p in best_per])),
        tau_r=np.array([p[1] for p in best_per]), n_obs=n_obs, n_carry=n_carry, support=support,
        n_transitions=usable, fitted=True, log_evidence=evidence, centre=centre, table_centre=table_centre,
    )


# -- one-step prediction, held out -----------------------------------------------------------

PREDICTORS: tuple[str, ...] = ("no_change", "simulator", "fitted")


def simulator_delta(meters: np.ndarray, slot: int, action: int | None) -> np.ndarray:
    """The simulator's expected step for the neutral profile (missing meters read as 0.5;
    an unknown action: the average over the ten actions)."""
    m = np.where(np.isfinite(meters), meters, 0.5)
    if action is not None:
        return expected_delta(m, slot, int(action), Profile.neutral())
    return np.mean([expected_delta(m, slot, a, Profile.neutral()) for a in range(N_ACTIONS)], axis=0)


def prediction_errors(steps: Sequence[Step], fit: PersonalDynamics | None) -> dict[str, tuple[float, int]]:
    """MAE (and how many meter components) of the three predictors over ``steps``: every
    component observed before and after counts. ``fit`` None: no change and the simulator
    only."""
    errs: dict[str, list[float]] = {p: [] for p in PREDICTORS if fit is not None or p != "fitted"}
    for st in steps:
        ok = np.isfinite(st.before) & np.isfinite(st.after)
        if not ok.any():
            continue
        y = (st.after - st.before)[ok]
        errs["no_change"].extend(np.abs(y))
        errs["simulator"].extend(np.abs(y - simulator_delta(st.before, st.slot, st.action)[ok]))
        if fit is not None:
            errs["fitted"].extend(np.abs(y - fit.predict(st.before, st.slot, st.action, st.carried)[ok]))
    return {p: (float(np.mean(v)) if v else float("nan"), len(v)) for p, v in errs.items()}


@dataclass(frozen=True)
class HeldOut:
    """One-step prediction on the last days: ``errors`` predictor -> (MAE, components),
    fitted on ``train_steps`` steps before ``test_from``, tested on ``test_steps``."""

    errors: dict[str, tuple[float, int]]
    train_steps: int
    test_steps: int
    test_from: date | None
    fit: PersonalDynamics


def heldout_errors(
    slots: Iterable[SlotMeters], test_share: float = 0.25, prior: PersonalPrior | None = None
) -> HeldOut:
    """Fit on the earlier days, predict the steps of the last ``test_share`` of the days
    (by day, so a test day's steps are all unseen)."""
    steps = transitions(slots)
    days = sorted({st.day for st in steps})
    if len(days) < 2:
        fit = fit_personal([], prior)
        return HeldOut({p: (float("nan"), 0) for p in PREDICTORS}, 0, 0, None, fit)
    cut = days[min(len(days) - 1, max(1, int(round(len(days) * (1.0 - test_share)))))]
    train = [st for st in steps if st.day < cut]
    test = [st for st in steps if st.day >= cut]
    fit = fit_personal(train, prior)
    return HeldOut(prediction_errors(test, fit), len(train), len(test), cut, fit)
