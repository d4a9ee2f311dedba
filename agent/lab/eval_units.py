"""``rhythm sim eval`` in units: the protocol's episodes cut into chunks that run anywhere.

A unit is ``(policy name, seeds, profiles, env condition, engine, world, calendar)``;
:func:`play_unit` plays it wherever it lands (a local worker process or a Ray task: it
registers the agents of agent/ there first) and returns its per-episode grade arrays.
:func:`evaluate_units` cuts a condition into units, runs them through ``map_units`` (an
executor's, training/executors.py), puts the arrays back in episode order and summarises
them as :func:`simulator.evaluate.evaluate` does: episodes are independent, so the figures
are the in-process run's, to the last digit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from simulator.evaluate import EvalResult, episode_plan, play, summarize

#: Episodes per unit: a ``bayes`` week costs about 0.1-0.2 s, so a unit is seconds of work.
UNIT_EPISODES = 25

MapUnits = Callable[..., Iterator[tuple[int, Any]]]


def play_unit(unit: tuple) -> dict[str, np.ndarray]:
    """One unit's per-episode grade arrays (see the module docstring)."""
    from agent.lab.policies import register_agent_policies
    from simulator.policies import get_policy

    register_agent_policies()
    policy, seeds, profiles, env_condition, engine, world, calendar = unit
    return play(get_policy(policy), seeds, env_condition, profiles, engine, None, world, calendar)


def units_of(
    policy: str,
    condition: str,
    episodes: int | None = None,
    seed_offset: int = 0,
    world: str | None = None,
    calendar: bool = False,
    engine: str = "auto",
    unit_episodes: int = UNIT_EPISODES,
) -> list[tuple]:
    """The units of one protocol condition, in episode order."""
    seeds, profiles, env_condition = episode_plan(condition, episodes, seed_offset)
    n = max(1, int(unit_episodes))
    return [
        (policy, seeds[i : i + n], None if profiles is None else profiles[i : i + n],
         env_condition, engine, world, calendar)
        for i in range(0, len(seeds), n)
    ]


def merge(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Units' grade arrays, concatenated in unit order."""
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def evaluate_units(
    map_units: MapUnits,
    policy: str,
    condition: str = "in-dist",
    episodes: int | None = None,
    seed_offset: int = 0,
    world: str | None = None,
    calendar: bool = False,
    name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    unit_episodes: int = UNIT_EPISODES,
) -> EvalResult:
    """:func:`simulator.evaluate.evaluate` of a registered ``policy``, its episodes played
    as units by ``map_units(fn, units, progress)``."""
    units = units_of(policy, condition, episodes, seed_offset, world, calendar, "auto", unit_episodes)
    parts: list[Any] = [None] * len(units)
    for i, grades in map_units(play_unit, units, progress):
        parts[i] = grades
    return summarize(name or policy, condition, merge(parts), world, calendar)
