"""Misspecified worlds: people who do not follow the spec's equations to the decimal.

A *world* changes how the hidden person's meters respond, while the observation, the
reward (spec 5) and the grader (spec 8) stay as the spec says. A world is a composition of
*departures*, each a small pure function ``departure(week, rng) -> week`` that rewrites the
ingredients of one episode's dynamics (:class:`Week`): the base effect table, the
time-of-day curves, the profile step by step, and the noise.

Departures (``DEPARTURES``, applied in this order whatever order a world names them):

- ``effects``: every (action, meter) entry of the base effect table (spec 3.1) is off by a
  factor ``exp(0.35 z)`` drawn per episode (so typically by 20-40%, sometimes by 2x).
- ``timing``: the time-of-day curves (chronotype K, the SLEEP and social-N slot
  multipliers, spec 3.2) are shifted by 0.5-1 slot, earlier or later, drawn per episode.
- ``noise``: daily variability twice the spec's, with heavy tails (Student t, 3 degrees
  of freedom, scaled to the doubled sd).
- ``kind``: two actions, drawn per episode from ``KIND_CHANGES``, act differently in kind
  from the table (EXERCISE drains vitality, ADMIN_WORK soothes, MEDITATE agitates, ...).
- ``drift``: the traits drift linearly during the week (each by up to a quarter of its
  range, drawn per episode); the grade's belief truth is the person at the end of the week.
- ``exercise-drains``: only the EXERCISE change of ``kind`` (a fixed test world).

A world is named by joining departures with ``+`` (``kind+drift``); ``nominal`` is the
spec itself and ``all`` every departure but the fixed test one. ``WORLDS`` lists the
suite's named worlds.

Randomness: each departure draws from its own generator,
``default_rng([seed, WORLD_SALT, index of the departure in DEPARTURES])``, never from the
episode's, so a world leaves the episode's initial jitter, events and noise draws as they
are, and adding a departure to a world does not change what another one draws.

The dynamics of a step in a world keep the spec's form with per-step tables:
``delta = const[t, a] + fv(V) * scaled[t, a] + events[t, e] + spiral(S, threshold[t]) +
noise[t]``. :func:`week_tables` computes them with the same arithmetic as
:func:`simulator.dynamics.effect_tables`, so the nominal ingredients give the env's tables
exactly (tested); the env still bypasses all of this in the nominal world.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from simulator import spec
from simulator.dynamics import EVENT_EFFECT, compact_params
from simulator.profiles import Profile, belief_truth

_T = spec.EPISODE_STEPS
WORLD_SALT = 0x574F524C  # "WORL": keeps the departures' streams apart from the episode's
NOMINAL = "nominal"
ALL = "all"


@dataclass(frozen=True, eq=False)
class Week:
    """The ingredients of one episode's dynamics, step by step (leading axis: step t).

    ``effect`` (28, 10, 5) the base effect table (spec 3.1); ``chrono_k`` (28,) the
    chronotype curve's K; ``sleep_mult`` and ``social_n_mult`` (28,) the SLEEP and social-N
    slot multipliers; ``night`` (28,) bool, the night penalty applies; ``params`` (28, 15)
    the profile at each step; ``noise`` (28, 5) the noise added to each step's delta."""

    effect: np.ndarray
    chrono_k: np.ndarray
    sleep_mult: np.ndarray
    social_n_mult: np.ndarray
    night: np.ndarray
    params: np.ndarray
    noise: np.ndarray


@dataclass(frozen=True, eq=False)
class WeekTables:
    """Per-step lookup tables of a world's episode (see the module docstring)."""

    const: np.ndarray  # (28, 10, 5)
    scaled: np.ndarray  # (28, 10, 5)
    events: np.ndarray  # (28, 7, 5)
    spiral_threshold: np.ndarray  # (28,)
    noise: np.ndarray  # (28, 5)
    final_profile: Profile  # the person at the last step (the grade's belief truth)


def nominal_week(profile: Profile, noise: np.ndarray) -> Week:
    """The spec's ingredients for ``profile`` with the episode's ``noise`` (28, 5)."""
    slots = np.arange(_T) % spec.SLOTS_PER_DAY
    return Week(
        effect=np.broadcast_to(np.array(spec.EFFECT), (_T, spec.N_ACTIONS, spec.N_METERS)).copy(),
        chrono_k=np.array(spec.CHRONO_K)[slots],
        sleep_mult=np.array(spec.SLEEP_SLOT_MULT)[slots],
        social_n_mult=np.array(spec.SOCIAL_N_SLOT_MULT)[slots],
        night=slots == spec.NIGHT,
        params=np.broadcast_to(profile.to_array(), (_T, spec.N_PARAMS)).copy(),
        noise=np.array(noise, dtype=np.float64).reshape(_T, spec.N_METERS),
    )


def week_tables(week: Week) -> WeekTables:
    """Per-step tables of a :class:`Week`, in the arithmetic of ``dynamics.effect_tables``."""
    n_a, n_m = spec.N_ACTIONS, spec.N_METERS
    static = np.zeros((_T, n_a, n_m))
    pos = np.zeros((_T, n_a, n_m))
    neg = np.zeros((_T, n_a, n_m))
    scl = np.zeros((_T, n_a, n_m))
    for a in range(n_a):
        e = week.effect[:, a]  # (28, 5)
        if a in spec.WORK_ACTIONS:
            fv_mask = np.zeros((_T, n_m), dtype=bool)
            fv_mask[:, [spec.P, spec.C]] = e[:, [spec.P, spec.C]] > 0
            pos[:, a] = np.where((e > 0) & ~fv_mask, e, 0.0)
            neg[:, a] = np.where(e < 0, e, 0.0)
            scl[:, a] = np.where(fv_mask, e, 0.0)
        elif a == spec.SLEEP:
            static[:, a] = e * week.sleep_mult[:, None]
        else:
            static[:, a] = e
            if a in spec.SOCIAL_ACTIONS:
                static[:, a, spec.N] = e[:, spec.N] * week.social_n_mult
        if a != spec.SLEEP:
            static[week.night, a, spec.V] += spec.NIGHT_V_PENALTY
    k = compact_params(week.params)
    morning = week.params[:, spec.COL["morning"]]
    c = (1.0 + spec.CHRONO_AMPLITUDE * (2.0 * morning - 1.0) * week.chrono_k)[:, None, None]
    const = (static + (pos * c + neg * (2.0 - c))) + k.md
    return WeekTables(
        const=const,
        scaled=scl * c,
        events=EVENT_EFFECT[None, :, :] * k.ev_scale[:, None, None],
        spiral_threshold=k.spiral_threshold,
        noise=week.noise,
        final_profile=Profile.from_array(week.params[-1]),
    )


# --- departures ---------------------------------------------------------------------------------

Departure = Callable[[Week, np.random.Generator], Week]


def effects(week: Week, rng: np.random.Generator, sigma: float = 0.35) -> Week:
    """Each (action, meter) base effect times ``exp(sigma z)``, drawn once per episode."""
    mult = np.exp(sigma * rng.standard_normal((spec.N_ACTIONS, spec.N_METERS)))
    return replace(week, effect=week.effect * mult[None])


def _cyclic_shift(values, slots: np.ndarray, shift: float) -> np.ndarray:
    """The slot curve ``values`` (4,) read at ``slot - shift`` (linear, cyclic over the day)."""
    v = np.asarray(values, dtype=np.float64)
    x = (slots - shift) % spec.SLOTS_PER_DAY
    lo = np.floor(x).astype(np.int64)
    f = x - lo
    return (1.0 - f) * v[lo % 4] + f * v[(lo + 1) % 4]


def timing(week: Week, rng: np.random.Generator, low: float = 0.5, high: float = 1.0) -> Week:
    """The time-of-day curves shifted by ``+-U(low, high)`` slots (later if positive)."""
    shift = rng.uniform(low, high) * (1.0 if rng.random() < 0.5 else -1.0)
    slots = np.arange(_T) % spec.SLOTS_PER_DAY
    return replace(
        week,
        chrono_k=_cyclic_shift(spec.CHRONO_K, slots, shift),
        sleep_mult=_cyclic_shift(spec.SLEEP_SLOT_MULT, slots, shift),
        social_n_mult=_cyclic_shift(spec.SOCIAL_N_SLOT_MULT, slots, shift),
    )


def noise(week: Week, rng: np.random.Generator, scale: float = 2.0, dof: float = 3.0) -> Week:
    """Noise ``scale`` x the spec's, with Student-t tails (``dof``), the sd kept at scale x."""
    chi2 = rng.chisquare(dof, week.noise.shape)
    return replace(week, noise=week.noise * scale * np.sqrt((dof - 2.0) / chi2))


#: Changes in kind: (name, action, {meter: new base effect}).
KIND_CHANGES: tuple[tuple[str, int, dict[int, float]], ...] = (
    # an action people take to recover does not help this person, or hurts
    ("exercise drains vitality", spec.EXERCISE, {spec.V: -0.10}),
    ("sleep leaves the mind foggy", spec.SLEEP, {spec.C: -0.08}),
    ("sleep is shallow", spec.SLEEP, {spec.V: +0.04}),
    ("family time stresses", spec.FAMILY_TIME, {spec.S: -0.12}),
    ("socializing exhausts", spec.SOCIALIZE, {spec.V: -0.15, spec.S: -0.08}),
    ("meditation agitates", spec.MEDITATE, {spec.C: -0.04, spec.S: -0.08}),
    # any other action
    ("admin work soothes", spec.ADMIN_WORK, {spec.S: +0.08}),
    ("deep work isolates", spec.DEEP_WORK, {spec.N: -0.10}),
    ("learning drains the mind", spec.LEARN, {spec.C: -0.16}),
    ("screens drain vitality", spec.BINGE_WATCH, {spec.V: -0.10}),
    ("me-time isolates", spec.ME_TIME, {spec.N: -0.10}),
)
#: ``KIND_CHANGES[:N_RECOVERY_CHANGES]`` change a recovery action.
N_RECOVERY_CHANGES = 6


def _apply_kind(week: Week, changes) -> Week:
    eff = week.effect.copy()
    for _, a, entries in changes:
        for k, v in entries.items():
            eff[:, a, k] = v
    return replace(week, effect=eff)


def kind(week: Week, rng: np.random.Generator) -> Week:
    """Two changes of ``KIND_CHANGES`` drawn per episode: one to a recovery action, one to
    any other action."""
    first = int(rng.integers(N_RECOVERY_CHANGES))
    second = N_RECOVERY_CHANGES + int(rng.integers(len(KIND_CHANGES) - N_RECOVERY_CHANGES))
    return _apply_kind(week, [KIND_CHANGES[first], KIND_CHANGES[second]])


def exercise_drains(week: Week, rng: np.random.Generator) -> Week:
    """EXERCISE drains vitality (the first of ``KIND_CHANGES``), in every episode."""
    return _apply_kind(week, KIND_CHANGES[:1])


#: Traits that drift, and how far at most (a fraction of their range).
DRIFTING: tuple[str, ...] = (
    "social_vitality",
    "social_serenity",
    "morning",
    "work_vitality_recovery",
    "progress_serenity_bonus",
    "solo_recharge",
    "metabolic_rate",
)


def drift(week: Week, rng: np.random.Generator, fraction: float = 0.25) -> Week:
    """Each trait of ``DRIFTING`` moves linearly over the week by ``U(-1, 1) x fraction x``
    its range (clipped to the range); the first step is the sampled person."""
    params = week.params.copy()
    ramp = np.arange(_T) / (_T - 1)
    for name in DRIFTING:
        lo, hi = spec.MODIFIER_RANGES[name]
        col = spec.COL[name]
        change = rng.uniform(-1.0, 1.0) * fraction * (hi - lo)
        params[:, col] = np.clip(params[:, col] + change * ramp, lo, hi)
    return replace(week, params=params)


def hidden(week: Week, rng: np.random.Generator, probability: float = 0.15) -> Week:
    """Unannounced disruptions: with ``probability`` per step, one of the spec's events
    (uniformly, scaled by the person's event resilience) hits without showing in
    ``active_event``; it enters the step through the noise ingredient."""
    fires = rng.random(_T) < probability
    which = rng.integers(1, spec.N_EVENTS + 1, _T)
    scale = (
        spec.EVENT_SCALE_BASE
        - spec.EVENT_SCALE_RESILIENCE * week.params[:, spec.COL["event_resilience"]]
    )
    extra = np.where(fires[:, None], EVENT_EFFECT[which] * scale[:, None], 0.0)
    return replace(week, noise=week.noise + extra)


DEPARTURES: dict[str, Departure] = {
    "effects": effects,
    "timing": timing,
    "noise": noise,
    "kind": kind,
    "drift": drift,
    "hidden": hidden,
    "exercise-drains": exercise_drains,
}
#: The suite: named worlds, in the order tables list them.
WORLDS: tuple[str, ...] = (
    NOMINAL,
    "effects",
    "timing",
    "noise",
    "kind",
    "drift",
    "kind+drift",
    "hidden",
    ALL,
)
_ALL_PARTS = ("effects", "timing", "noise", "kind", "drift", "hidden")


def parse_world(world: str | None) -> tuple[str, ...]:
    """The departures of a world name, in ``DEPARTURES`` order (empty for nominal / None).

    Raises ValueError on an unknown name."""
    if world is None or world == NOMINAL:
        return ()
    if world == ALL:
        return _ALL_PARTS
    parts = [p.strip() for p in str(world).split("+")]
    unknown = [p for p in parts if p not in DEPARTURES]
    if unknown or not parts:
        known = ", ".join([NOMINAL, ALL, *DEPARTURES])
        raise ValueError(f"unknown world {world!r}; expected one of {known} (join with +)")
    return tuple(name for name in DEPARTURES if name in parts)


def world_names() -> list[str]:
    """The suite's named worlds and the single departures."""
    return list(dict.fromkeys([*WORLDS, *DEPARTURES]))


def apply_world(week: Week, world: str | None, seed: int) -> Week:
    """Apply a world's departures to a week, each with its own seeded generator."""
    names = list(DEPARTURES)
    for name in parse_world(world):
        rng = np.random.default_rng([int(seed), WORLD_SALT, names.index(name)])
        week = DEPARTURES[name](week, rng)
    return week


def world_tables(profile: Profile, noise_: np.ndarray, world: str | None, seed: int) -> WeekTables:
    """The per-step tables of episode ``seed`` in ``world`` (profile and noise as drawn)."""
    return week_tables(apply_world(nominal_week(profile, noise_), world, seed))


def world_truth(tables: WeekTables) -> tuple[float, float, float]:
    """The belief truth the grade uses in a world: the person at the end of the week."""
    return belief_truth(tables.final_profile)
