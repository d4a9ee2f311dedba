"""Noisy readings (feedback.md 5): the modifiers and the week's meters, filtered together.

When every reported meter and delta carries noise (sd 0.08) and readings go missing, a step's
delta alone says little; the meter *levels* say more (they add up the deltas). This filter
keeps a joint Gaussian over ``x = [theta (9 modifiers), m (5 meters)]``, one mean per
stress-tolerance grid point (the spiral shifts the mean) and one shared covariance:

- a reading of the meters ``y = m + e`` (e ~ N(0, 0.08^2); missing ones and readings at 0 or
  1, which the clip may have made, are skipped) is a Kalman update;
- a step draws its latent delta ``d = f0 + J theta + spiral + w`` (w the process noise,
  N(0, 0.012^2) per meter; ``f0``, ``J`` from :func:`agent.belief.linear_design` at the
  filter's mean meters, the observed event included), updates on the reported delta
  ``y_d = d + e_d`` (components the step may have clipped are skipped), then moves
  ``m' = m + d``; a meter whose mean leaves [0, 1] is held at the bound with a small variance
  and loses its correlations.

The grid weights are the predictive likelihoods of the readings. The result is the same
kind of posterior the clean-data path of :class:`agent.belief.BeliefState` keeps (means per
grid point, a shared covariance of the nine modifiers), which it reads from here instead.
"""

from __future__ import annotations

import numpy as np

from simulator import spec

N_THETA = 9
N_X = N_THETA + spec.N_METERS
_M = slice(N_THETA, N_X)
#: A mean this close to a bound is treated as clipped (its reading or delta is skipped).
CLIP_MARGIN = 0.03
_HELD_VAR = 1e-6


class MeterFilter:
    """Joint Gaussian filter over (modifiers, meters); see the module docstring."""

    def __init__(
        self,
        prior_mean: np.ndarray,
        prior_cov: np.ndarray,
        st_grid: np.ndarray,
        design,
        obs_sd: float,
        process_sd: float = spec.NOISE_SD,
        initial_meters=spec.INITIAL_METERS,
        initial_var: float = (2 * spec.INITIAL_JITTER) ** 2 / 12.0,
    ):
        """``design(meters, slot, action, event) -> (f0 (5,), J (5, 9))``."""
        g = len(st_grid)
        self.design = design
        self.r = float(obs_sd) ** 2
        self.q = float(process_sd) ** 2
        self.thresholds = (
            spec.SPIRAL_THRESHOLD_BASE - spec.SPIRAL_THRESHOLD_TOLERANCE * np.asarray(st_grid)
        )
        self.x = np.zeros((g, N_X))
        self.x[:, :N_THETA] = prior_mean
        self.x[:, _M] = initial_meters
        self.p = np.zeros((N_X, N_X))
        self.p[:N_THETA, :N_THETA] = prior_cov
        self.p[_M, _M] = initial_var * np.eye(spec.N_METERS)
        self.logw = np.zeros(g)
        self.spiral = np.zeros(spec.N_METERS)
        self.spiral[spec.V] = spec.SPIRAL_V
        self.spiral[spec.C] = spec.SPIRAL_C

    # -- posterior --------------------------------------------------------------------------
    @property
    def weights(self) -> np.ndarray:
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    def theta(self) -> tuple[np.ndarray, np.ndarray]:
        """``(means (G, 9), covariance (9, 9))`` of the modifiers."""
        return self.x[:, :N_THETA].copy(), self.p[:N_THETA, :N_THETA].copy()

    def meters(self) -> np.ndarray:
        """The weighted mean of the meters now."""
        return np.clip(self.weights @ self.x[:, _M], 0.0, 1.0)

    # -- updates ----------------------------------------------------------------------------
    def _update(self, x: np.ndarray, p: np.ndarray, h: np.ndarray, y: np.ndarray, pred: np.ndarray):
        """Kalman update of means ``x`` (G, n) and ``p`` on readings ``y`` (k,) of ``h x``,
        ``pred`` (G, k) the predicted readings; adds the predictive log-likelihoods."""
        s = h @ p @ h.T + self.r * np.eye(len(y))
        s = (s + s.T) / 2.0
        k = np.linalg.solve(s, h @ p).T  # (n, k)
        v = y[None, :] - pred  # (G, k)
        sol = np.linalg.solve(s, v.T).T
        _, logdet = np.linalg.slogdet(s)
        self.logw += -0.5 * ((v * sol).sum(axis=1) + logdet)
        x = x + v @ k.T
        p = p - k @ h @ p
        return x, (p + p.T) / 2.0

    def observe_meters(self, reading) -> None:
        """A reading of the meters (NaN = missing)."""
        y = np.asarray(reading, dtype=np.float64)
        m = self.weights @ self.x[:, _M]
        idx = np.flatnonzero(
            np.isfinite(y) & (y > 0.0) & (y < 1.0) & (m > CLIP_MARGIN) & (m < 1.0 - CLIP_MARGIN)
        )
        if len(idx) == 0:
            return
        h = np.zeros((len(idx), N_X))
        h[np.arange(len(idx)), N_THETA + idx] = 1.0
        self.x, self.p = self._update(self.x, self.p, h, y[idx], self.x[:, N_THETA + idx])

    def step(self, slot: int, action: int, event: int, reported_delta) -> None:
        """One step with ``action`` (and ``event``): the reported delta, then m' = m + d."""
        g = len(self.x)
        m = self.weights @ self.x[:, _M]
        f0, j = self.design(np.clip(m, 0.0, 1.0), slot, action, event)
        a = np.zeros((spec.N_METERS, N_X))
        a[:, :N_THETA] = j
        spiral = np.where((self.x[:, N_THETA + spec.S] < self.thresholds)[:, None], self.spiral, 0.0)
        d_mean = f0[None, :] + self.x[:, :N_THETA] @ j.T + spiral  # (G, 5)
        # joint z = [x, d]
        n = N_X + spec.N_METERS
        z = np.concatenate([self.x, d_mean], axis=1)
        pz = np.zeros((n, n))
        pz[:N_X, :N_X] = self.p
        pz[N_X:, :N_X] = a @ self.p
        pz[:N_X, N_X:] = pz[N_X:, :N_X].T
        pz[N_X:, N_X:] = a @ self.p @ a.T + self.q * np.eye(spec.N_METERS)
        after = m + self.weights @ d_mean
        y = np.asarray(reported_delta, dtype=np.float64)
        ok = np.isfinite(y) & (after > CLIP_MARGIN) & (after < 1.0 - CLIP_MARGIN)
        idx = np.flatnonzero(ok)
        if len(idx):
            h = np.zeros((len(idx), n))
            h[np.arange(len(idx)), N_X + idx] = 1.0
            z, pz = self._update(z, pz, h, y[idx], z[:, N_X + idx])
        t = np.zeros((N_X, n))
        t[:N_THETA, :N_THETA] = np.eye(N_THETA)
        t[_M, _M] = np.eye(spec.N_METERS)
        t[_M, N_X:] = np.eye(spec.N_METERS)
        self.x = z @ t.T
        self.p = t @ pz @ t.T
        # meters driven past a bound are held there
        mean = self.weights @ self.x[:, _M]
        for k in np.flatnonzero((mean < 0.0) | (mean > 1.0)):
            c = N_THETA + k
            self.x[:, c] = np.clip(self.x[:, c], 0.0, 1.0)
            self.p[c, :] = 0.0
            self.p[:, c] = 0.0
            self.p[c, c] = _HELD_VAR
        self.p = (self.p + self.p.T) / 2.0
        assert self.x.shape == (g, N_X)
