"""Pure dynamics of one step (spec section 3) and the reward (spec section 5).

The step decomposes exactly as

    delta = const[slot, a] + fv(V) * scaled[slot, a] + event[e] + spiral(S) + noise

where, for a given profile, ``const`` holds the base effect after the time-of-day scaling
(3.2, with the night penalty), the profile modifiers (4) and the passive drift (3.4);
``scaled`` holds the positive P and C entries of the work actions, the only entries the
vitality factor ``fv`` (3.3) multiplies; ``event`` is the event effect times
``1.3 - 0.8 * event_resilience`` (3.5); ``spiral`` is the stress spiral (3.6). The tables
depend only on the profile: ``RhythmEnv`` precomputes them once per episode, ``BatchEnv``
evaluates the same table expressions on the fly for the chosen actions (see
:func:`effect_tables`), and both evaluate this sum in this order, so their trajectories
agree bit for bit.

Everything here is a pure function. The real-data side calls
``expected_delta(meters, slot, action, Profile.neutral(), event=None)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator import spec
from simulator.profiles import Profile

_EFFECT = np.array(spec.EFFECT, dtype=np.float64)  # (10, 5)
EVENT_EFFECT = np.array(spec.EVENT_EFFECT, dtype=np.float64)  # (7, 5)
_K = np.array(spec.CHRONO_K)


def _static_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Profile-independent pieces of the base effect after 3.2 and 3.3.

    ``STATIC`` (4, 10, 5): every non-work action after its slot multiplier, plus the night
    penalty; ``POS``/``NEG`` (10, 5): the positive/negative base entries of the work actions
    (multiplied by chrono / 2 - chrono), without the entries the vitality factor scales;
    ``SCL`` (10, 5): those entries (positive P and C of the work actions), times chrono.
    """
    static = np.zeros((4, spec.N_ACTIONS, spec.N_METERS))
    pos = np.zeros((spec.N_ACTIONS, spec.N_METERS))
    neg = np.zeros((spec.N_ACTIONS, spec.N_METERS))
    scl = np.zeros((spec.N_ACTIONS, spec.N_METERS))
    for a in range(spec.N_ACTIONS):
        e = _EFFECT[a]
        if a in spec.WORK_ACTIONS:
            fv_mask = np.zeros(spec.N_METERS, dtype=bool)
            fv_mask[[spec.P, spec.C]] = e[[spec.P, spec.C]] > 0
            pos[a] = np.where((e > 0) & ~fv_mask, e, 0.0)
            neg[a] = np.where(e < 0, e, 0.0)
            scl[a] = np.where(fv_mask, e, 0.0)
        elif a == spec.SLEEP:
            static[:, a] = e[None, :] * np.array(spec.SLEEP_SLOT_MULT)[:, None]
        else:
            static[:, a] = e
            if a in spec.SOCIAL_ACTIONS:
                static[:, a, spec.N] = e[spec.N] * np.array(spec.SOCIAL_N_SLOT_MULT)
        if a != spec.SLEEP:
            static[spec.NIGHT, a, spec.V] += spec.NIGHT_V_PENALTY
    return static, pos, neg, scl


STATIC, POS, NEG, SCL = _static_tables()


@dataclass(frozen=True, eq=False)
class Compact:
    """The profile-dependent numbers of the step, for N profiles (leading axis N)."""

    chrono: np.ndarray  # (N, 4): chrono(slot)
    md: np.ndarray  # (N, 10, 5): profile modifiers + passive drift
    ev_scale: np.ndarray  # (N,): 1.3 - 0.8 * event_resilience
    spiral_threshold: np.ndarray  # (N,): 0.40 - 0.25 * stress_tolerance
    w: np.ndarray  # (N, 5)


@dataclass(frozen=True, eq=False)
class Tables:
    """Full lookup tables for N profiles (leading axis N); see the module docstring."""

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


def compact_params(params: np.ndarray, progress_drift: float | None = None) -> Compact:
    """Profile-dependent step numbers of an (N, 15) array of profiles.

    ``progress_drift`` overrides ``spec.DRIFT_P`` (calibration only)."""
    p = np.atleast_2d(np.asarray(params, dtype=np.float64))
    n = p.shape[0]
    col = spec.COL
    c = 1.0 + spec.CHRONO_AMPLITUDE * (2.0 * p[:, col["morning"]] - 1.0)[:, None] * _K[None, :]
    mods = np.zeros((n, spec.N_ACTIONS, spec.N_METERS))
    for name, effects in spec.MODIFIER_EFFECTS.items():
        x = p[:, col[name]]
        for a, k, coef in effects:
            mods[:, a, k] += coef * x
    drift = np.empty((n, spec.N_METERS))
    drift[:, spec.V] = spec.DRIFT_V * p[:, col["metabolic_rate"]]
    drift[:, spec.C] = spec.DRIFT_C
    drift[:, spec.P] = spec.DRIFT_P if progress_drift is None else progress_drift
    drift[:, spec.S] = spec.DRIFT_S
    drift[:, spec.N] = spec.DRIFT_N
    return Compact(
        chrono=c,
        md=mods + drift[:, None, :],
        ev_scale=spec.EVENT_SCALE_BASE
        - spec.EVENT_SCALE_RESILIENCE * p[:, col["event_resilience"]],
        spiral_threshold=spec.SPIRAL_THRESHOLD_BASE
        - spec.SPIRAL_THRESHOLD_TOLERANCE * p[:, col["stress_tolerance"]],
        w=p[:, :5].copy(),
    )


def effect_tables(params: np.ndarray, progress_drift: float | None = None) -> Tables:
    """Full lookup tables for an (N, 15) array of profiles.

    ``const[s, a] = (STATIC[s, a] + (POS[a] * c[s] + NEG[a] * (2 - c[s]))) + md[a]``,
    ``scaled[s, a] = SCL[a] * c[s]``, ``events[e] = EVENT_EFFECT[e] * ev_scale``: the batch
    engine evaluates exactly these expressions on the fly for the chosen actions.
    """
    k = compact_params(params, progress_drift)
    c = k.chrono[:, :, None, None]
    base = STATIC[None] + (POS[None, None] * c + NEG[None, None] * (2.0 - c))
    return Tables(
        const=base + k.md[:, None, :, :],
        scaled=SCL[None, None] * c,
        events=EVENT_EFFECT[None, :, :] * k.ev_scale[:, None, None],
        spiral_threshold=k.spiral_threshold,
        w=k.w,
    )


@lru_cache(maxsize=1024)
def profile_tables(profile: Profile) -> Tables:
    """Tables for one profile (N = 1), cached (profiles are immutable)."""
    return effect_tables(profile.to_array()[None, :])


@lru_cache(maxsize=1024)
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
        d = d + SPIRAL
    else:
        d = d + 0.0
    return d


SPIRAL = np.zeros(spec.N_METERS)
SPIRAL[spec.V] = spec.SPIRAL_V
SPIRAL[spec.C] = spec.SPIRAL_C


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
    compact: Compact,
    meters: np.ndarray,
    slot,
    actions: np.ndarray,
    events: np.ndarray | None = None,
) -> np.ndarray:
    """Vectorised :func:`expected_delta` for N states with their own profiles.

    ``compact`` from :func:`compact_params` (N or 1 profiles), ``meters`` (N, 5), ``slot`` an
    int, ``actions`` (N,) or (N, K), ``events`` (N,) ids or None (no event). Returns (N, 5) or
    (N, K, 5); the same numbers as the env's tables.
    """
    m = np.asarray(meters, dtype=np.float64)
    n = m.shape[0]
    actions = np.asarray(actions, dtype=np.int64)
    rows = np.arange(n) if compact.chrono.shape[0] == n else np.zeros(n, dtype=np.int64)
    fv = vitality_factor(m[:, spec.V])
    spiral = m[:, spec.S] < compact.spiral_threshold[rows]
    c = compact.chrono[rows, slot]
    ev_scale = compact.ev_scale[rows]
    if actions.ndim == 2:
        rows, c, fv, spiral, ev_scale = (
            rows[:, None],
            c[:, None, None],
            fv[:, None, None],
            spiral[:, None, None],
            ev_scale[:, None, None],
        )
        ev_rows = None if events is None else np.asarray(events)[:, None]
    else:
        c, fv, spiral, ev_scale = c[:, None], fv[:, None], spiral[:, None], ev_scale[:, None]
        ev_rows = None if events is None else np.asarray(events)
    const = (STATIC[slot][actions] + (POS[actions] * c + NEG[actions] * (2.0 - c))) + compact.md[
        rows, actions
    ]
    d = const + fv * (SCL[actions] * c)
    if ev_rows is not None:
        d = d + EVENT_EFFECT[ev_rows] * ev_scale
    return d + np.where(spiral, SPIRAL, 0.0)
