"""Evaluate a policy under the published protocol (spec 9).

Conditions: ``in-dist`` (seeds 0-99, profiles sampled in-distribution), ``ood`` (seeds
10000-10049, OOD profiles), ``discrete`` (each named profile with seeds 0-4). ``episodes``
overrides the count (per named profile for ``discrete``); ``seed_offset`` shifts the seeds.

A policy with ``act_batch`` runs on :class:`simulator.batch.BatchEnv`, any other on
:class:`simulator.env.RhythmEnv`; both give identical grades.

``world`` (default nominal, the spec itself) plays the episodes in a misspecified world of
:mod:`simulator.worlds`, on ``RhythmEnv`` (the batch engine has no worlds);
:func:`evaluate_worlds` evaluates one policy across the suite, on the same seeds in every
world.

``calendar`` plays calendar weeks (:class:`simulator.calendar.CalendarWeek`: some slots
fixed by commitments, the person does the commitment whatever the policy says; the
observation carries the week's ``calendar``), on ``RhythmEnv``. It combines with any
condition and world; the grade is the spec's, of the week that happened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simulator import spec, worlds
from simulator.batch import BatchEnv
from simulator.calendar import CalendarWeek
from simulator.env import RhythmEnv
from simulator.grader import COMPONENTS
from simulator.policies import Policy, get_policy

#: Published final_score figures (spec 9), by policy and condition; None = not published.
PUBLISHED: dict[str, dict[str, float | None]] = {
    "random": {"in-dist": 0.393, "ood": 0.393, "discrete": 0.426},
    "heuristic": {"in-dist": 0.463, "ood": 0.455, "discrete": 0.455},
    "teacher (hosted LLM)": {"in-dist": 0.611, "ood": 0.621, "discrete": None},
    "student (distilled 3B)": {"in-dist": 0.574, "ood": 0.536, "discrete": 0.507},
}
#: Published belief_mae: the teacher's (condition not stated) and the student's in-dist.
PUBLISHED_BELIEF_MAE: dict[str, float] = {
    "teacher (hosted LLM)": 0.196,
    "student (distilled 3B)": 0.213,
}
BATCH_CHUNK = 8192

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EvalResult:
    """Means over the episodes of one condition; ``belief_mae`` None if no belief was emitted."""

    policy: str
    condition: str
    episodes: int
    final_score: float
    final_score_ci95: tuple[float, float]
    crash_free: float
    progress: float
    connection: float
    adaptation: float
    efficiency: float
    belief_accuracy: float
    belief_mae: float | None
    crashes_mean: float
    crashes_total: int
    mean_reward: float
    published: float | None
    world: str = worlds.NOMINAL
    calendar: bool = False
    overridden_mean: float | None = None  # calendar weeks: steps a commitment overrode

    @property
    def components(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in COMPONENTS}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["final_score_ci95"] = list(self.final_score_ci95)
        return d


def episode_plan(
    condition: str, episodes: int | None = None, seed_offset: int = 0
) -> tuple[list[int], list[str] | None, str]:
    """``(seeds, profile names or None, env condition)`` of a protocol condition."""
    if condition not in spec.CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; expected one of {spec.CONDITIONS}")
    base = spec.CONDITION_SEEDS[condition]
    n = len(base) if episodes is None else int(episodes)
    if n < 1:
        raise ValueError("episodes must be at least 1")
    seeds = [base.start + seed_offset + i for i in range(n)]
    if condition != "discrete":
        return seeds, None, condition
    names = list(spec.NAMED_PROFILES)
    return [s for _ in names for s in seeds], [nm for nm in names for _ in seeds], "in-dist"


def run_batch(
    policy: Any,
    seeds: Sequence[int],
    condition: str = "in-dist",
    profiles: Sequence[str] | None = None,
    progress: Progress | None = None,
    progress_drift: float | None = None,
) -> dict[str, np.ndarray]:
    """Play the episodes on the batch engine; returns the grade arrays (grader.grade_batch).

    ``progress_drift`` overrides the env's P drift (calibration only)."""
    seeds = list(seeds)
    parts: list[dict[str, np.ndarray]] = []
    for lo in range(0, len(seeds), BATCH_CHUNK):
        chunk = seeds[lo : lo + BATCH_CHUNK]
        prof = None if profiles is None else list(profiles)[lo : lo + BATCH_CHUNK]
        env = BatchEnv(chunk, condition, prof, progress_drift)
        obs, info = env.reset()
        policy.reset_batch(chunk)
        if hasattr(policy, "observe_truth_batch"):
            policy.observe_truth_batch(info)
        for _ in range(spec.EPISODE_STEPS):
            actions, beliefs = policy.act_batch(obs)
            obs, _, _, _, info = env.step(actions, beliefs)
        parts.append(info["grade"])
        if progress is not None:
            progress(lo + len(chunk), len(seeds))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def run_env(
    policy: Policy,
    seeds: Sequence[int],
    condition: str = "in-dist",
    profiles: Sequence[str] | None = None,
    progress: Progress | None = None,
    world: str | None = None,
    calendar: bool = False,
) -> dict[str, np.ndarray]:
    """Play the episodes one by one on ``RhythmEnv`` (in calendar weeks with ``calendar``);
    returns grade arrays like :func:`run_batch`, plus ``overridden`` (steps per episode where
    a commitment replaced a different recommendation) in calendar weeks."""
    base = RhythmEnv(condition=condition, world=world)
    env = CalendarWeek(base) if calendar else base
    overridden: list[int] = []
    rows: list[dict[str, Any]] = []
    seeds = list(seeds)
    for i, seed in enumerate(seeds):
        options = None if profiles is None else {"profile": profiles[i]}
        obs, info = env.reset(seed=int(seed), options=options)
        policy.reset(int(seed))
        if hasattr(policy, "observe_truth"):
            policy.observe_truth(info)
        terminated = False
        while not terminated:
            action, belief = policy.act(obs)
            step_action = action if belief is None else {"action": action, "belief": belief}
            obs, _, terminated, _, info = env.step(step_action)
        rows.append(base.grade().to_dict())
        overridden.append(len(info.get("overridden", ())))
        if progress is not None:
            progress(i + 1, len(seeds))
    out = {
        k: np.array([r[k] for r in rows], dtype=np.float64) for k in rows[0] if k != "belief_mae"
    }
    out["belief_mae"] = np.array(
        [np.nan if r["belief_mae"] is None else r["belief_mae"] for r in rows]
    )
    if calendar:
        out["overridden"] = np.array(overridden, dtype=np.float64)
    return out


def rollout(
    policy: str | Policy,
    condition: str,
    episodes: int | None = None,
    seed_offset: int = 0,
    engine: str = "auto",
    progress: Progress | None = None,
    world: str | None = None,
    calendar: bool = False,
) -> dict[str, np.ndarray]:
    """Per-episode grade arrays of a policy (name or instance) under a protocol condition."""
    pol = get_policy(policy) if isinstance(policy, str) else policy
    seeds, profiles, env_condition = episode_plan(condition, episodes, seed_offset)
    return play(pol, seeds, env_condition, profiles, engine, progress, world, calendar)


def play(
    pol: Policy,
    seeds: Sequence[int],
    env_condition: str,
    profiles: Sequence[str] | None = None,
    engine: str = "auto",
    progress: Progress | None = None,
    world: str | None = None,
    calendar: bool = False,
) -> dict[str, np.ndarray]:
    """Per-episode grade arrays of ``pol`` on the episodes ``seeds`` (and ``profiles``) of an
    env condition (:func:`episode_plan`), on the engine :func:`rollout` picks. Episodes are
    independent: any split of the seeds, played part by part and concatenated, gives the same
    arrays (how ``rhythm sim eval --ray`` cuts the protocol into units)."""
    if engine not in ("auto", "batch", "env"):
        raise ValueError(f"engine must be auto, batch or env, got {engine!r}")
    if worlds.parse_world(world):
        if engine == "batch":
            raise ValueError("the batch engine has no misspecified worlds; use engine env")
        return run_env(pol, seeds, env_condition, profiles, progress, world, calendar)
    if calendar:
        if engine == "batch":
            raise ValueError("the batch engine has no calendar weeks; use engine env")
        return run_env(pol, seeds, env_condition, profiles, progress, None, True)
    use_batch = engine == "batch" or (engine == "auto" and hasattr(pol, "act_batch"))
    runner = run_batch if use_batch else run_env
    return runner(pol, seeds, env_condition, profiles, progress)


def summarize(
    policy: str,
    condition: str,
    g: dict[str, np.ndarray],
    world: str | None = None,
    calendar: bool = False,
) -> EvalResult:
    """Means, the 95% interval of the mean final_score (normal approximation) and crashes.
    The published figures are the plain protocol's: None in another world or calendar weeks."""
    scores = g["final_score"]
    n = len(scores)
    mean = float(scores.mean())
    half = 1.96 * float(scores.std(ddof=1)) / np.sqrt(n) if n > 1 else 0.0
    mae = g["belief_mae"]
    emitted = ~np.isnan(mae)
    return EvalResult(
        policy=policy,
        condition=condition,
        episodes=n,
        final_score=mean,
        final_score_ci95=(mean - half, mean + half),
        **{k: float(g[k].mean()) for k in COMPONENTS},
        belief_mae=float(mae[emitted].mean()) if emitted.any() else None,
        crashes_mean=float(g["crashes"].mean()),
        crashes_total=int(g["crashes"].sum()),
        mean_reward=float(g["mean_reward"].mean()),
        published=PUBLISHED.get(policy, {}).get(condition)
        if not worlds.parse_world(world) and not calendar
        else None,
        world=worlds.NOMINAL if world is None else world,
        calendar=bool(calendar),
        overridden_mean=float(g["overridden"].mean()) if "overridden" in g else None,
    )


def evaluate(
    policy: str | Policy,
    condition: str = "in-dist",
    episodes: int | None = None,
    seed_offset: int = 0,
    engine: str = "auto",
    progress: Progress | None = None,
    world: str | None = None,
    calendar: bool = False,
    name: str | None = None,
) -> EvalResult:
    """Evaluate a policy (registered name or instance) under one protocol condition, in
    the nominal world or a misspecified one (``world``, see :mod:`simulator.worlds`), in
    plain or calendar weeks (``calendar``). ``name``: the row's policy name (default the
    registered name, or the instance's class name)."""
    if name is None:
        name = policy if isinstance(policy, str) else type(policy).__name__
    g = rollout(policy, condition, episodes, seed_offset, engine, progress, world, calendar)
    return summarize(name, condition, g, world, calendar)


def evaluate_all(
    policy: str | Policy,
    episodes: int | None = None,
    seed_offset: int = 0,
    engine: str = "auto",
    progress: Progress | None = None,
) -> dict[str, EvalResult]:
    """:func:`evaluate` under the three conditions (``in-dist``, ``ood``, ``discrete``)."""
    return {
        c: evaluate(policy, c, episodes, seed_offset, engine, progress) for c in spec.CONDITIONS
    }


def evaluate_worlds(
    policy: str | Policy,
    condition: str = "in-dist",
    episodes: int | None = None,
    seed_offset: int = 0,
    world_list: Sequence[str] = worlds.WORLDS,
    progress: Progress | None = None,
) -> dict[str, EvalResult]:
    """:func:`evaluate` in each world of ``world_list`` (default the suite), same seeds."""
    return {
        w: evaluate(policy, condition, episodes, seed_offset, "auto", progress, w)
        for w in world_list
    }
