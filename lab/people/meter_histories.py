"""Generated histories in the real meter space (0.5 = usual), with planted effects.

A person's day: the morning's meters are 0.5 plus a day-to-day swing (partly carried over
from yesterday: ``persist``) plus what yesterday's afternoon, evening and night carry
overnight (``carry``: an evening run that raises the next morning's vitality, or drains it);
within the day the meters stay where they are, moved only by the slot's own action
(``own``) and a little noise. Actions are habits drawn at random per slot; a share of the
meters is missing; progress and connection may be missing throughout (as on the sample
people without a calendar). Used by tests/agent/test_personal.py and benchmarks/dynamics.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from agent.personal import SlotMeters
from simulator import spec

V, C, P, S, N = range(5)
EX, DW, AW, FT, BW, SL = (spec.EXERCISE, spec.DEEP_WORK, spec.ADMIN_WORK, spec.FAMILY_TIME,
                          spec.BINGE_WATCH, spec.SLEEP)
FIRST = date(2024, 1, 1)


@dataclass(frozen=True)
class Person:
    """Planted dynamics: ``carry[a]`` (5,) into the next morning, ``own[a]`` (5,) in the slot."""

    persist: float = 0.3
    swing: float = 0.12
    noise: float = 0.006
    carry: dict[int, tuple[float, ...]] = field(default_factory=lambda: {EX: (0.08, 0.0, 0.0, 0.05, 0.0)})
    own: dict[int, tuple[float, ...]] = field(default_factory=lambda: {DW: (0.0, -0.04, 0.05, -0.02, 0.0)})
    missing: float = 0.05
    observed: tuple[bool, ...] = (True, True, False, True, False)


PEOPLE: dict[str, Person] = {
    "restores": Person(),
    "exercise-drains": Person(carry={EX: (-0.08, -0.03, 0.0, -0.02, 0.0)}),
    "calendar": Person(persist=0.5, swing=0.08, observed=(True, True, True, True, True),
                       own={DW: (0.0, -0.05, 0.08, -0.02, 0.0), FT: (0.0, 0.0, 0.0, 0.03, 0.08)},
                       carry={EX: (0.05, 0.02, 0.0, 0.04, 0.0), BW: (-0.03, -0.03, 0.0, 0.0, 0.0)}),
    "no-effects": Person(carry={}, own={}),
}


def _action(rng: np.random.Generator, slot: int) -> int | None:
    r = rng.random()
    if slot == 0:
        return None if r < 0.8 else AW
    if slot == 1:
        return DW if r < 0.4 else AW if r < 0.6 else None
    if slot == 2:
        return EX if r < 0.35 else FT if r < 0.55 else BW if r < 0.7 else None
    return SL if r < 0.9 else None


def history(person: Person, days: int = 120, seed: int = 0) -> list[SlotMeters]:
    """``days`` days of slots (4 a day) of ``person``."""
    rng = np.random.default_rng(seed)
    out: list[SlotMeters] = []
    z = np.zeros(5)
    carried = np.zeros(5)
    for i in range(days):
        d = FIRST + timedelta(days=i)
        z = person.persist * z + person.swing * rng.standard_normal(5)
        level = np.clip(0.5 + z + carried, 0.01, 0.99)
        carried = np.zeros(5)
        for s in range(4):
            a = _action(rng, s)
            if a is not None:
                level = level + np.array(person.own.get(a, (0.0,) * 5))
                carried = carried + np.array(person.carry.get(a, (0.0,) * 5)) if s > 0 else carried
            if s > 0:
                level = level + person.noise * rng.standard_normal(5)
            level = np.clip(level, 0.01, 0.99)
            shown = tuple(
                None if (not person.observed[k] or rng.random() < person.missing) else float(level[k])
                for k in range(5)
            )
            out.append(SlotMeters(d, s, shown, a))
    return out
