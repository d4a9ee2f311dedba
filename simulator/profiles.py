"""The hidden person (spec section 4): 15 parameters, sampling, named profiles, belief truth."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache

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
        d = asdict(self)
        d["w"] = tuple(self.w)
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

    Draw order from the profile RNG: w = dirichlet(alpha x 5); then for in-dist one
    ``random(10)`` (position inside the middle 70% of each modifier's range); for OOD three
    ``random(10)`` blocks: tail-or-middle (tail if < 0.5), side (low tail if < 0.5), position.
    """
    return Profile.from_array(sample_profile_array(seed, condition))


def sample_profile_array(seed: int, condition: str = "in-dist") -> np.ndarray:
    """Like :func:`sample_profile` but returns the 15-vector (faster for batches)."""
    rng = profile_rng(seed)
    out = np.empty(spec.N_PARAMS)
    if condition == "in-dist":
        out[:5] = rng.dirichlet(_ALPHA_IN)
        out[5:] = _MID_LO + _MID_SPAN * rng.random(10)
    elif condition == "ood":
        out[:5] = rng.dirichlet(_ALPHA_OOD)
        tail = rng.random(10) < spec.OOD_TAIL_PROBABILITY
        low_side = rng.random(10) < 0.5
        u = rng.random(10)
        tail_lo = np.where(low_side, _LO, _HI - _TAIL_SPAN)
        out[5:] = np.where(tail, tail_lo + _TAIL_SPAN * u, _MID_LO + _MID_SPAN * u)
    else:
        raise ValueError(f"unknown condition {condition!r}; expected 'in-dist' or 'ood'")
    return out


def belief_truth(profile: Profile) -> tuple[float, float, float]:
    """Ground-truth belief (social, morning, work), each in [0, 1] (spec 4.2)."""
    return _belief_truth(profile)


@cache
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
_ALPHA_IN = np.full(5, spec.IN_DIST_DIRICHLET)
_ALPHA_OOD = np.full(5, spec.OOD_DIRICHLET)
