"""Pure dynamics of one step (spec section 3) and the reward (spec section 5).

The step decomposes exactly as

    delta = const[slot, a] + fv(V) * scaled[slot, a] + event[e] + spiral(S) + noise

where, for a given profile, ``const`` holds the base effect after the time-of-day scaling
(3.2, with the night penalty), the profile modifiers (4) and the passive drift (3.4);
``scaled`` holds the positive P and C entries of the work actions, the only entries the
vitality factor ``fv`` (3.3) multiplies; ``event`` is the event effect times
``1.3 - 0.8 * event_resilience`` (3.5); ``spiral`` is the stress spiral (3.6). The tables
depend only on the profile, so both engines (``RhythmEnv`` and ``BatchEnv``) precompute
them once per episode and evaluate this same sum in this same order: their trajectories
agree bit for bit.

Everything here is a pure function. The real-data side calls
``expected_delta(meters, slot, action, Profile.neutral(), event=None)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from simulator import spec
from simulator.profiles import Profile

_EFFECT = np.array(spec.EFFECT, dtype=np.float64)  # (10, 5)
_EVENT_EFFECT = np.array(spec.EVENT_EFFECT, dtype=np.float64)  # (7, 5)
_K = np.array(spec.CHRONO_K)
_SLEEP_MULT = np.array(spec.SLEEP_SLOT_MULT)
_SOCIAL_MULT = np.array(spec.SOCIAL_N_SLOT_MULT)
_WORK = np.zeros(spec.N_ACTIONS, dtype=bool)
_WORK[list(spec.WORK_ACTIONS)] = True
# Entries multiplied by the vitality factor: positive P and C entries of the work actions.
_FV_MASK = np.zeros((spec.N_ACTIONS, spec.N_METERS), dtype=bool)
for _a in spec.WORK_ACTIONS:
    for _k in (spec.P, spec.C):
        _FV_MASK[_a, _k] = spec.EFFECT[_a][_k] > 0


@dataclass(frozen=True, eq=False)
class Tables:
    """Per-profile lookup tables for N profiles (leading axis N)."""

    const: np.ndarray  # (N, 4, 10, 5)
    scaled: np.ndarray  # (N, 4, 10, 5)
    events: np.ndarray  # (N, 7, 5), row 0 = no event
    spiral_threshold: np.ndarray  # (N,)
    w: np.ndarray  # (N, 5)


def chrono(slot: int, morning: float) -> float:
    """Chronotype curve 3.2: ``1 + 0.6 (2 morning - 1) K[slot]``."""
    return 1.0 + spec.CHRONO_AMPLITUDE * (2.0 * morning - 1.0) * spec.CHRONO_K[slot]


def vitality_factor(v):
    """3.3: ``clip(0.4 + 0.6 V / 0.7, 0.4, 1.15)``; works on floats and arrays."""
    x = spec.FV_BASE + spec.FV_SLOPE * v / spec.FV_REF
    if isinstance(x, np.ndarray):
        return np.clip(x, spec.FV_MIN, spec.FV_MAX)
    return min(spec.FV_MAX, max(spec.FV_MIN, x))


def effect_tables(params: np.ndarray) -> Tables:
    """Build the lookup tables for an (N, 15) array of profiles (see module docstring)."""
    p = np.atleast_2d(np.asarray(params, dtype=np.float64))
    n = p.shape[0]
    col = spec.COL
    morning = p[:, col["morning"]]
    c = 1.0 + spec.CHRONO_AMPLITUDE * (2.0 * morning - 1.0)[:, None] * _K[None, :]  # (N, 4)

    # 3.2 time of day, on a (N, 4, 10, 5) copy of the base table.
    base = np.broadcast_to(_EFFECT, (n, 4, spec.N_ACTIONS, spec.N_METERS)).copy()
    for a in spec.WORK_ACTIONS:
        e = _EFFECT[a]
        pos = np.where(e > 0, e, 0.0)
        neg = np.where(e < 0, e, 0.0)
        base[:, :, a, :] = pos * c[:, :, None] + neg * (2.0 - c[:, :, None])
    base[:, :, spec.SLEEP, :] = _EFFECT[spec.SLEEP] * _SLEEP_MULT[None, :, None]
    for a in spec.SOCIAL_ACTIONS:
        base[:, :, a, spec.N] = _EFFECT[a, spec.N] * _SOCIAL_MULT[None, :]
    night_not_sleep = np.ones(spec.N_ACTIONS, dtype=bool)
    night_not_sleep[spec.SLEEP] = False
    base[:, spec.NIGHT, night_not_sleep, spec.V] += spec.NIGHT_V_PENALTY

    # 3.3 split off the entries the vitality factor multiplies.
    scaled = np.where(_FV_MASK, base, 0.0)
    base = np.where(_FV_MASK, 0.0, base)

    # 4 profile modifiers (independent of the slot).
    mods = np.zeros((n, spec.N_ACTIONS, spec.N_METERS))
    for name, effects in spec.MODIFIER_EFFECTS.items():
        x = p[:, col[name]]
        for a, k, coef in effects:
            mods[:, a, k] += coef * x

    # 3.4 passive drift.
    drift = np.empty((n, spec.N_METERS))
    drift[:, spec.V] = spec.DRIFT_V * p[:, col["metabolic_rate"]]
    drift[:, spec.C] = spec.DRIFT_C
    drift[:, spec.P] = spec.DRIFT_P
    drift[:, spec.S] = spec.DRIFT_S
    drift[:, spec.N] = spec.DRIFT_N

    const = (base + mods[:, None, :, :]) + drift[:, None, None, :]

    # 3.5 events and 3.6 spiral threshold.
    ev_scale = spec.EVENT_SCALE_BASE - spec.EVENT_SCALE_RESILIENCE * p[:, col["event_resilience"]]
    events = _EVENT_EFFECT[None, :, :] * ev_scale[:, None, None]
    threshold = (
        spec.SPIRAL_THRESHOLD_BASE - spec.SPIRAL_THRESHOLD_TOLERANCE * p[:, col["stress_tolerance"]]
    )
    return Tables(
        const=const, scaled=scaled, events=events, spiral_threshold=threshold, w=p[:, :5].copy()
    )


@cache
def profile_tables(profile: Profile) -> Tables:
    """Tables for one profile (N = 1), cached: profiles are immutable."""
    return effect_tables(profile.to_array()[None, :])


@cache
def profile_lists(profile: Profile) -> tuple:
    """The same tables as nested Python lists (fast scalar access in ``RhythmEnv``)."""
    t = profile_tables(profile)
    return (
        t.const[0].tolist(),
        t.scaled[0].tolist(),
        t.events[0].tolist(),
        float(t.spiral_threshold[0]),
        tuple(t.w[0].tolist()),
    )


def event_id(event: int | str | None) -> int:
    """Normalise an event given as None, an id 0..6 (0 = none) or a name."""
    if event is None:
        return 0
    if isinstance(event, str):
        try:
            return spec.EVENTS.index(event)
        except ValueError:
            raise ValueError(f"unknown event {event!r}; expected one of {spec.EVENTS}") from None
    e = int(event)
    if not 0 <= e <= spec.N_EVENTS:
        raise ValueError(f"event id {e} out of range 0..{spec.N_EVENTS}")
    return e


def _check(slot: int, action: int) -> None:
    if not 0 <= slot < spec.SLOTS_PER_DAY:
        raise ValueError(f"slot {slot} out of range 0..3")
    if not 0 <= action < spec.N_ACTIONS:
        raise ValueError(f"action {action} out of range 0..9")


def expected_delta(
    meters, slot: int, action: int, profile: Profile, event: int | str | None = None
) -> np.ndarray:
    """Deterministic part of the step (3.1-3.6): no noise and before clipping. Shape (5,)."""
    slot, action, e = int(slot), int(action), event_id(event)
    _check(slot, action)
    m = np.asarray(meters, dtype=np.float64)
    t = profile_tables(profile)
    fv = vitality_factor(float(m[spec.V]))
    d = t.const[0, slot, action] + fv * t.scaled[0, slot, action] + t.events[0, e]
    if m[spec.S] < t.spiral_threshold[0]:
        d = d + _SPIRAL
    else:
        d = d + 0.0
    return d


_SPIRAL = np.zeros(spec.N_METERS)
_SPIRAL[spec.V] = spec.SPIRAL_V
_SPIRAL[spec.C] = spec.SPIRAL_C


def step(
    meters,
    slot: int,
    action: int,
    profile: Profile,
    event: int | str | None = None,
    rng: np.random.Generator | None = None,
    noise=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One full step: returns ``(new_meters, actual_delta)`` with ``new = clip(m + delta)``.

    The noise is ``noise`` if given (5 values), else ``0.012 * rng.standard_normal(5)`` if an
    ``rng`` is given, else zero.
    """
    m = np.asarray(meters, dtype=np.float64)
    d = expected_delta(m, slot, action, profile, event)
    if noise is not None:
        d = d + np.asarray(noise, dtype=np.float64)
    elif rng is not None:
        d = d + spec.NOISE_SD * rng.standard_normal(spec.N_METERS)
    new = np.clip(m + d, 0.0, 1.0)
    return new, new - m


def neutral_delta(meters, slot: int, action: int, event: int | str | None = None) -> np.ndarray:
    """The delta the neutral profile would have had, without noise, clipped at the meter bounds:
    ``clip(m + expected_delta(m, ..., neutral), 0, 1) - m``."""
    m = np.asarray(meters, dtype=np.float64)
    d = expected_delta(m, slot, action, Profile.neutral(), event)
    return np.clip(m + d, 0.0, 1.0) - m


def anomaly(meters, slot: int, action: int, event, actual_delta) -> np.ndarray:
    """Spec 6 anomaly: actual delta minus :func:`neutral_delta` in the same state."""
    return np.asarray(actual_delta, dtype=np.float64) - neutral_delta(meters, slot, action, event)


REWARD_TERMS: tuple[str, ...] = ("delta", "level", "progress", "connection", "crash")


def reward_terms(w, delta, meters_after) -> dict[str, float]:
    """Spec 5, term by term: ``delta`` = 10 sum w d, ``level`` = sum w m' - 0.5,
    ``progress`` = 0.5 dP, ``connection`` = 0.4 dN, ``crash`` = -0.5 x (meters < 0.10)."""
    w0, w1, w2, w3, w4 = (float(x) for x in w)
    d0, d1, d2, d3, d4 = (float(x) for x in delta)
    m0, m1, m2, m3, m4 = (float(x) for x in meters_after)
    crashes = sum(1 for x in (m0, m1, m2, m3, m4) if x < spec.CRASH_THRESHOLD)
    return {
        "delta": spec.REWARD_DELTA_SCALE * (w0 * d0 + w1 * d1 + w2 * d2 + w3 * d3 + w4 * d4),
        "level": spec.REWARD_LEVEL_SCALE
        * ((w0 * m0 + w1 * m1 + w2 * m2 + w3 * m3 + w4 * m4) - spec.REWARD_LEVEL_BASELINE),
        "progress": spec.REWARD_PROGRESS_BONUS * d2,
        "connection": spec.REWARD_CONNECTION_BONUS * d4,
        "crash": spec.REWARD_CRASH_PENALTY * crashes,
    }


def reward(w, delta, meters_after) -> float:
    """Spec 5 total reward (the terms of :func:`reward_terms` summed in their order)."""
    t = reward_terms(w, delta, meters_after)
    return (((t["delta"] + t["level"]) + t["progress"]) + t["connection"]) + t["crash"]


def crash_count(meters_after) -> int:
    """Meters below 0.10 after the step."""
    return int(sum(1 for x in meters_after if float(x) < spec.CRASH_THRESHOLD))


# --- vectorised helpers (BatchEnv, planners) ---------------------------------------------------


def expected_delta_batch(
    tables: Tables, meters: np.ndarray, slot, actions: np.ndarray, events: np.ndarray | None = None
) -> np.ndarray:
    """Vectorised :func:`expected_delta`: ``meters`` (N, 5), ``actions`` (N,) or (N, K),
    ``events`` (N,) ids or None; ``slot`` an int or (N,). Returns (N, 5) or (N, K, 5)."""
    n = meters.shape[0]
    rows = np.arange(n)
    slot = np.broadcast_to(np.asarray(slot), (n,))
    fv = vitality_factor(meters[:, spec.V])
    spiral = meters[:, spec.S] < tables.spiral_threshold
    if actions.ndim == 2:
        r, s = rows[:, None], slot[:, None]
        fv_, sp = fv[:, None, None], spiral[:, None, None]
        ev = 0.0 if events is None else tables.events[rows, events][:, None, :]
    else:
        r, s = rows, slot
        fv_, sp = fv[:, None], spiral[:, None]
        ev = 0.0 if events is None else tables.events[rows, events]
    d = tables.const[r, s, actions] + fv_ * tables.scaled[r, s, actions]
    if events is not None:
        d = d + ev
    return d + np.where(sp, _SPIRAL, 0.0)
