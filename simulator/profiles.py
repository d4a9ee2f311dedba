"""The hidden person (spec section 4): 15 parameters, sampling, named profiles, belief truth."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator import spec


@dataclass(frozen=True)
class Profile:
    """One person. ``w`` are the reward weights (V, C, P, S, N) on the simplex."""

    w: tuple[float, float, float, float, float]
    social_vitality: float
    social_serenity: float
    morning: float
    work_vitality_recovery: float
    progress_serenity_bonus: float
    leisure_guilt: float
    solo_recharge: float
    metabolic_rate: float
    stress_tolerance: float
    event_resilience: float

    @classmethod
    def neutral(cls) -> Profile:
        """Every signed modifier 0, morning 0.5, metabolic 1, tolerance and resilience 0.5, w uniform."""
        return _NEUTRAL

    def to_dict(self) -> dict[str, object]:
        """``{"w": (5 floats), <modifier>: float, ...}``."""
        d: dict[str, object] = {"w": tuple(self.w)}
        for k in spec.MODIFIERS:
            d[k] = getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Profile:
        return cls(w=tuple(float(x) for x in d["w"]), **{k: float(d[k]) for k in spec.MODIFIERS})

    def to_array(self) -> np.ndarray:
        """The 15-vector: w (5) then the modifiers in ``spec.MODIFIERS`` order."""
        return np.array([*self.w, *(getattr(self, k) for k in spec.MODIFIERS)], dtype=np.float64)

    @classmethod
    def from_array(cls, a: np.ndarray) -> Profile:
        a = [float(x) for x in np.asarray(a, dtype=np.float64).reshape(spec.N_PARAMS)]
        return cls(w=tuple(a[:5]), **dict(zip(spec.MODIFIERS, a[5:], strict=True)))


_NEUTRAL = Profile(w=(0.2, 0.2, 0.2, 0.2, 0.2), **spec.MODIFIER_NEUTRAL)


def named_profile(name: str) -> Profile:
    """One of the three discrete (legacy) profiles of spec 4.1."""
    try:
        return Profile.from_dict(spec.NAMED_PROFILES[name])
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}; expected one of {sorted(spec.NAMED_PROFILES)}"
        ) from None


def profile_rng(seed: int) -> np.random.Generator:
    """The profile RNG of a seed: ``default_rng(seed ^ 0xA3C5F729)`` (spec 4.1)."""
    return np.random.default_rng(int(seed) ^ spec.PROFILE_SEED_XOR)


def sample_profile(seed: int, condition: str = "in-dist") -> Profile:
    """The person of an episode seed, in-distribution ("in-dist") or out-of-distribution ("ood").

    Draw order from the profile RNG (see :func:`draw_profile`): ``w`` ~ Dirichlet(alpha x 5),
    then uniforms for the ten modifiers.
    """
    return Profile.from_array(sample_profile_array(seed, condition))


def sample_profile_array(seed: int, condition: str = "in-dist") -> np.ndarray:
    """Like :func:`sample_profile` but returns the 15-vector (faster for batches)."""
    g, u = draw_profile(profile_rng(seed), condition)
    return transform_profile(g, u, condition)


def draw_profile(rng: np.random.Generator, condition: str) -> tuple[np.ndarray, np.ndarray]:
    """The raw draws of one profile: ``g = rng.standard_gamma(alpha, 5)`` (the Dirichlet's
    gamma variates, exactly what ``rng.dirichlet`` draws) then ``u = rng.random(10)`` for
    in-dist or ``rng.random(30)`` for OOD (rows: tail-or-middle, side, position)."""
    if condition == "in-dist":
        return rng.standard_gamma(spec.IN_DIST_DIRICHLET, 5), rng.random(10)
    if condition == "ood":
        return rng.standard_gamma(spec.OOD_DIRICHLET, 5), rng.random(30)
    raise ValueError(f"unknown condition {condition!r}; expected 'in-dist' or 'ood'")


def transform_profile(g: np.ndarray, u: np.ndarray, condition: str) -> np.ndarray:
    """Raw draws (one profile or a stack: ``g`` (..., 5), ``u`` (..., 10|30)) -> 15-vectors.

    ``w = g * (1 / sum g)``, bit for bit ``Generator.dirichlet``. In-dist modifiers are
    uniform on the middle 70% of their range. OOD: with probability 0.5 (``u[0:10] < 0.5``)
    a tail, the low one if ``u[10:20] < 0.5``, each tail 15% of the range wide; else the
    middle; the position inside is ``u[20:30]``.
    """
    acc = g[..., 0] + g[..., 1] + g[..., 2] + g[..., 3] + g[..., 4]
    w = g * (1.0 / acc)[..., None]
    if condition == "in-dist":
        mods = _MID_LO + _MID_SPAN * u
    elif condition == "ood":
        tail = u[..., 0:10] < spec.OOD_TAIL_PROBABILITY
        low_side = u[..., 10:20] < 0.5
        pos = u[..., 20:30]
        tail_lo = np.where(low_side, _LO, _HI - _TAIL_SPAN)
        mods = np.where(tail, tail_lo + _TAIL_SPAN * pos, _MID_LO + _MID_SPAN * pos)
    else:
        raise ValueError(f"unknown condition {condition!r}; expected 'in-dist' or 'ood'")
    return np.concatenate([w, mods], axis=-1)


def sample_profiles_array(seeds, condition: str = "in-dist") -> np.ndarray:
    """(N, 15) profiles of N seeds (same values as :func:`sample_profile_array`, faster)."""
    seeds = [int(s) for s in seeds]
    g = np.empty((len(seeds), 5))
    u = np.empty((len(seeds), 10 if condition == "in-dist" else 30))
    for i, s in enumerate(seeds):
        g[i], u[i] = draw_profile(profile_rng(s), condition)
    return transform_profile(g, u, condition)


def belief_truth(profile: Profile) -> tuple[float, float, float]:
    """Ground-truth belief (social, morning, work), each in [0, 1] (spec 4.2)."""
    return _belief_truth(profile)


@lru_cache(maxsize=1024)
def _belief_truth(p: Profile) -> tuple[float, float, float]:
    social = _stretch(
        0.4 * _u(p.social_vitality)
        + 0.3 * _u(p.social_serenity)
        + 0.3 * min(1.0, p.w[4] / spec.BELIEF_W_REF)
    )
    work = _stretch(
        0.4 * _u(p.work_vitality_recovery)
        + 0.3 * _u(p.progress_serenity_bonus)
        + 0.3 * min(1.0, p.w[2] / spec.BELIEF_W_REF)
    )
    return (social, float(p.morning), work)


def belief_truth_array(params: np.ndarray) -> np.ndarray:
    """Vectorised :func:`belief_truth` over an (N, 15) array of profiles; returns (N, 3)."""
    p = np.atleast_2d(params)
    col = spec.COL
    social = (
        0.4 * ((p[:, col["social_vitality"]] + 1.0) / 2.0)
        + 0.3 * ((p[:, col["social_serenity"]] + 1.0) / 2.0)
        + 0.3 * np.minimum(1.0, p[:, 4] / spec.BELIEF_W_REF)
    )
    work = (
        0.4 * ((p[:, col["work_vitality_recovery"]] + 1.0) / 2.0)
        + 0.3 * ((p[:, col["progress_serenity_bonus"]] + 1.0) / 2.0)
        + 0.3 * np.minimum(1.0, p[:, 2] / spec.BELIEF_W_REF)
    )
    stretch = lambda x: np.clip(0.5 + 2.0 * (x - 0.5), 0.0, 1.0)  # noqa: E731
    return np.stack([stretch(social), p[:, col["morning"]], stretch(work)], axis=1)


def _u(x: float) -> float:
    return (x + 1.0) / 2.0


def _stretch(x: float) -> float:
    return min(1.0, max(0.0, 0.5 + 2.0 * (x - 0.5)))


_RANGES = np.array([spec.MODIFIER_RANGES[k] for k in spec.MODIFIERS])
_LO, _HI = _RANGES[:, 0], _RANGES[:, 1]
_SPAN = _HI - _LO
_MID_LO = _LO + (1.0 - spec.MIDDLE_FRACTION) / 2.0 * _SPAN
_MID_SPAN = spec.MIDDLE_FRACTION * _SPAN
_TAIL_SPAN = spec.TAIL_FRACTION * _SPAN
