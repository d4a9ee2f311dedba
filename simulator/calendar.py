"""Calendar mode: a week in which some slots are already decided by commitments.

A real person's day is not four free slots: weekday working hours are mostly booked, some
evenings hold a commitment. In calendar mode a share of each week's slots is *fixed*: drawn
per episode from a realistic pattern, by the episode's own generator
(``default_rng([seed, 0x43414C])``, so the week's events and noise are the same with and
without it), and in a fixed slot the person does the commitment's action whatever the agent
recommends. The agent is told the whole week's calendar (as the product knows its calendar):
the observation gains ``calendar`` (28 action ids, ``NO_ACTION`` = free). The grader scores
the week that actually happened (spec 8 unchanged; the belief emitted with an overridden
step still counts). Calendar weeks are defined for the plain protocol only: in feedback mode
a recommendation may be ignored, and a commitment is not a recommendation (refused).

The pattern (per episode): a working week on Monday to Friday, each morning booked with
probability ``p_work_morning`` (deep work or meetings), each afternoon with
``p_work_afternoon`` (mostly meetings); evenings with ``p_evening`` (family, friends, a
class, sport); the weekend with ``p_weekend``; nights never. The rates themselves are drawn
per episode around the defaults, so some weeks are packed and some nearly free.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simulator import spec

NO_ACTION = spec.N_ACTIONS
CALENDAR_STREAM = 0x43414C  # "CAL"
WORK_MORNING = (spec.ACTIONS.index("DEEP_WORK"), spec.ACTIONS.index("ADMIN_WORK"), spec.ACTIONS.index("LEARN"))
WORK_AFTERNOON = (spec.ACTIONS.index("ADMIN_WORK"), spec.ACTIONS.index("ADMIN_WORK"), spec.ACTIONS.index("DEEP_WORK"))
EVENING = (
    spec.ACTIONS.index("FAMILY_TIME"),
    spec.ACTIONS.index("SOCIALIZE"),
    spec.ACTIONS.index("EXERCISE"),
    spec.ACTIONS.index("LEARN"),
)
WEEKEND = (spec.ACTIONS.index("FAMILY_TIME"), spec.ACTIONS.index("SOCIALIZE"), spec.ACTIONS.index("EXERCISE"))


def draw_calendar(
    seed: int,
    p_work_morning: float = 0.55,
    p_work_afternoon: float = 0.7,
    p_evening: float = 0.25,
    p_weekend: float = 0.15,
) -> np.ndarray:
    """The week's calendar: (28,) action ids of the fixed slots, NO_ACTION where free."""
    rng = np.random.default_rng([int(seed), CALENDAR_STREAM])
    scale = rng.uniform(0.5, 1.3)  # a light or a packed week
    cal = np.full(spec.EPISODE_STEPS, NO_ACTION, dtype=np.int64)
    for t in range(spec.EPISODE_STEPS):
        day, slot = divmod(t, spec.SLOTS_PER_DAY)
        u = rng.uniform()
        pick = rng.integers(0, 12)
        if slot == 3:
            continue
        if day < 5 and slot == 0 and u < p_work_morning * scale:
            cal[t] = WORK_MORNING[pick % len(WORK_MORNING)]
        elif day < 5 and slot == 1 and u < p_work_afternoon * scale:
            cal[t] = WORK_AFTERNOON[pick % len(WORK_AFTERNOON)]
        elif day < 5 and slot == 2 and u < p_evening * scale:
            cal[t] = EVENING[pick % len(EVENING)]
        elif day >= 5 and u < p_weekend * scale:
            cal[t] = WEEKEND[pick % len(WEEKEND)]
    return cal


class CalendarWeek(gym.Wrapper):
    """``RhythmEnv`` (or any env with its observation) in calendar mode: see the module
    docstring. ``info["calendar"]`` and ``info["overridden"]`` (steps where the recommendation
    gave way to a commitment) are added for evaluation."""

    def __init__(self, env: gym.Env, **pattern: float):
        inner = env.unwrapped
        if getattr(inner, "feedback", False) or getattr(inner, "observe", "clean") != "clean":
            # In feedback mode the action is a recommendation the person may ignore; a
            # commitment is not a recommendation, so the two modes do not combine.
            raise ValueError("calendar weeks are defined for the plain protocol, not feedback mode")
        super().__init__(env)
        self.pattern = pattern
        self.observation_space = spaces.Dict(
            {**env.observation_space.spaces,
             "calendar": spaces.MultiDiscrete(np.full(spec.EPISODE_STEPS, NO_ACTION + 1))}
        )
        self._cal = np.full(spec.EPISODE_STEPS, NO_ACTION, dtype=np.int64)
        self._t = 0
        self._overridden: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        episode_seed = int(info.get("seed", seed if seed is not None else 0))
        self._cal = draw_calendar(episode_seed, **self.pattern)
        self._t = 0
        self._overridden = []
        return self._with(obs), {**info, "calendar": self._cal.copy()}

    def step(self, action):
        t = self._t
        if self._cal[t] != NO_ACTION:
            if isinstance(action, dict):
                wanted = int(action["action"])
                action = {**action, "action": int(self._cal[t])}
            else:
                wanted = int(action)
                action = int(self._cal[t])
            if wanted != int(self._cal[t]):
                self._overridden.append(t)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._t = t + 1
        info = {**info, "calendar": self._cal.copy(), "overridden": list(self._overridden)}
        return self._with(obs), reward, terminated, truncated, info

    def grade(self):
        """The spec 8 grade of the week that happened (the wrapped env's)."""
        return self.env.unwrapped.grade()

    def _with(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "calendar": self._cal.copy()}
