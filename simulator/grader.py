"""The end-of-week grader (spec section 8)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from simulator import spec

COMPONENTS: tuple[str, ...] = tuple(spec.GRADER_WEIGHTS)


@dataclass(frozen=True)
class Grade:
    """One episode's grade. ``belief_mae`` is None when the agent never emitted a belief."""

    final_score: float
    crash_free: float
    progress: float
    connection: float
    adaptation: float
    efficiency: float
    belief_accuracy: float
    belief_mae: float | None
    crashes: int
    early_reward: float
    late_reward: float
    mean_reward: float

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def grade_batch(
    rewards: np.ndarray,
    final_meters: np.ndarray,
    crashes: np.ndarray,
    beliefs: np.ndarray | None,
    truth: np.ndarray,
    a: float = spec.GRADER_A,
    q: float = spec.GRADER_Q,
    e: float = spec.GRADER_E,
) -> dict[str, np.ndarray]:
    """Grade N episodes at once.

    ``rewards`` (N, 28); ``final_meters`` (N, 5); ``crashes`` (N,) counts of (step, meter)
    below 0.10; ``beliefs`` (N, 3) last emitted belief, NaN rows (or None) for none;
    ``truth`` (N, 3). Returns a dict of (N,) arrays keyed like :class:`Grade`
    (``belief_mae`` is NaN where no belief was emitted).
    """
    r = np.atleast_2d(np.asarray(rewards, dtype=np.float64))
    fm = np.atleast_2d(np.asarray(final_meters, dtype=np.float64))
    cr = np.asarray(crashes, dtype=np.float64).reshape(-1)
    n = r.shape[0]
    early = r[:, : spec.HALF_EPISODE].mean(axis=1)
    late = r[:, spec.HALF_EPISODE :].mean(axis=1)
    mean_r = r.mean(axis=1)
    if beliefs is None:
        mae = np.full(n, np.nan)
    else:
        b = np.atleast_2d(np.asarray(beliefs, dtype=np.float64))
        mae = np.abs(b - np.atleast_2d(truth)).mean(axis=1)
    comp = {
        "crash_free": 1.0 - cr / spec.MAX_CRASHES,
        "progress": fm[:, spec.P].copy(),
        "connection": fm[:, spec.N].copy(),
        "adaptation": np.clip(0.5 + (late - early) / a, 0.0, 1.0) * np.clip(late / q, 0.0, 1.0),
        "efficiency": np.clip(mean_r / e, 0.0, 1.0),
        "belief_accuracy": np.where(
            np.isnan(mae), 0.0, np.maximum(0.0, 1.0 - 2.0 * np.nan_to_num(mae))
        ),
    }
    final = np.zeros(n)
    for name, weight in spec.GRADER_WEIGHTS.items():
        final = final + weight * comp[name]
    return {
        "final_score": final,
        **comp,
        "belief_mae": mae,
        "crashes": cr,
        "early_reward": early,
        "late_reward": late,
        "mean_reward": mean_r,
    }


def rescore(g: dict[str, np.ndarray], a: float, q: float, e: float) -> np.ndarray:
    """final_score of graded episodes (``grade_batch`` output) under other constants A, Q, E.

    Only adaptation and efficiency depend on them; used by the calibration search.
    """
    a, q, e = (np.asarray(x, dtype=np.float64)[..., None] for x in (a, q, e))
    early, late, mean_r = g["early_reward"], g["late_reward"], g["mean_reward"]
    adaptation = np.clip(0.5 + (late - early) / a, 0.0, 1.0) * np.clip(late / q, 0.0, 1.0)
    efficiency = np.clip(mean_r / e, 0.0, 1.0)
    parts = {**{k: g[k] for k in COMPONENTS}, "adaptation": adaptation, "efficiency": efficiency}
    final = 0.0
    for name, weight in spec.GRADER_WEIGHTS.items():
        final = final + weight * parts[name]
    return final


def grade(
    rewards,
    final_meters,
    crashes: int,
    belief,
    truth,
    a: float = spec.GRADER_A,
    q: float = spec.GRADER_Q,
    e: float = spec.GRADER_E,
) -> Grade:
    """Grade one episode (``belief`` None if never emitted); plain floats, equal to
    :func:`grade_batch` up to rounding (summation order)."""
    r = [float(x) for x in rewards]
    if len(r) != spec.EPISODE_STEPS:
        raise ValueError(f"expected {spec.EPISODE_STEPS} rewards, got {len(r)}")
    half = spec.HALF_EPISODE
    early = sum(r[:half]) / half
    late = sum(r[half:]) / (len(r) - half)
    mean_r = sum(r) / len(r)
    if belief is None:
        mae = None
        belief_accuracy = 0.0
    else:
        mae = sum(abs(float(b) - float(t)) for b, t in zip(belief, truth, strict=True)) / 3.0
        belief_accuracy = max(0.0, 1.0 - 2.0 * mae)
    comp = {
        "crash_free": 1.0 - crashes / spec.MAX_CRASHES,
        "progress": float(final_meters[spec.P]),
        "connection": float(final_meters[spec.N]),
        "adaptation": _clip01(0.5 + (late - early) / a) * _clip01(late / q),
        "efficiency": _clip01(mean_r / e),
        "belief_accuracy": belief_accuracy,
    }
    final = 0.0
    for name, weight in spec.GRADER_WEIGHTS.items():
        final = final + weight * comp[name]
    return Grade(
        final_score=final,
        **comp,
        belief_mae=mae,
        crashes=int(crashes),
        early_reward=early,
        late_reward=late,
        mean_reward=mean_r,
    )


def _clip01(x: float) -> float:
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)
