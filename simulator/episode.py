"""An episode's randomness, drawn once at reset in a fixed order (both engines share it).

From the episode RNG ``default_rng(seed)``:

1. ``u = rng.random(61)``: ``u[0:5]`` initial jitter (``-0.05 + 0.1 u``), ``u[5:33]`` event
   fire draws (step t fires if ``u < 0.12``), ``u[33:61]`` event choice
   (``1 + floor(6 u)``, so ids 1..6 uniformly);
2. ``z = rng.standard_normal((28, 5))``: the noise of step t is ``0.012 * z[t]``.
"""

from __future__ import annotations

import numpy as np

from simulator import spec

N_UNIFORMS = spec.N_METERS + 2 * spec.EPISODE_STEPS  # 61
_INITIAL = np.array(spec.INITIAL_METERS)


def draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The raw draws ``(u (61,), z (28, 5))`` in the documented order."""
    return rng.random(N_UNIFORMS), rng.standard_normal((spec.EPISODE_STEPS, spec.N_METERS))


def transform(u: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw draws -> ``(initial_meters (..., 5), events (..., 28) int, noise (..., 28, 5))``.

    Works on one episode or on a stack of them (leading axes)."""
    n, t = spec.N_METERS, spec.EPISODE_STEPS
    jitter = -spec.INITIAL_JITTER + (2.0 * spec.INITIAL_JITTER) * u[..., :n]
    meters0 = _INITIAL + jitter
    fires = u[..., n : n + t] < spec.EVENT_PROBABILITY
    which = 1 + np.floor(spec.N_EVENTS * u[..., n + t : n + 2 * t]).astype(np.int64)
    events = np.where(fires, which, 0)
    noise = spec.NOISE_SD * z
    return meters0, events, noise


def episode(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(initial_meters, events, noise)`` of an episode seed."""
    return transform(*draw(np.random.default_rng(int(seed))))
