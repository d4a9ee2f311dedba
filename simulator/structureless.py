"""The structureless reference (feedback.md 6): a learner that knows nothing of the
simulator's dynamics, only how often each kind of recommendation is accepted.

It counts answers per (slot, action group) — groups: work (DEEP_WORK, ADMIN_WORK, LEARN),
social (FAMILY_TIME, SOCIALIZE), rest (SLEEP), active (EXERCISE, MEDITATE), leisure
(ME_TIME, BINGE_WATCH) — with a Beta(1, 1) prior per cell, and turns the counts into a
belief the way a product without a model of the person would:

- social = the posterior mean acceptance of social recommendations (all slots pooled);
- work = the same for work recommendations;
- morning = 0.5 + (acceptance of morning work - acceptance of work later in the day) / 2.

With no answer the belief is (0.5, 0.5, 0.5), the prior median. As a policy it is a
Thompson-sampling bandit over the groups of the current slot (its own generator,
``default_rng([seed, SALT])``), recommending one fixed action per group; it reads the
answers from the observation (``last_answer``, ``last_recommendation``) and ignores the
meters. Without feedback mode it never learns anything (belief stays 0.5).

The claim it tests: "a learner without the simulator's structure needs 40-50 answers, one
with it confirms a profile in 5-8".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator import spec

GROUPS: tuple[str, ...] = ("work", "social", "rest", "active", "leisure")
GROUP_OF = np.array([0, 0, 0, 2, 3, 3, 1, 1, 4, 4])  # action id -> group
#: The action recommended for a group, per slot (morning, afternoon, evening, night).
GROUP_ACTION = np.array(
    [
        [spec.DEEP_WORK, spec.DEEP_WORK, spec.LEARN, spec.ADMIN_WORK],
        [spec.FAMILY_TIME, spec.SOCIALIZE, spec.SOCIALIZE, spec.FAMILY_TIME],
        [spec.SLEEP, spec.SLEEP, spec.SLEEP, spec.SLEEP],
        [spec.EXERCISE, spec.EXERCISE, spec.MEDITATE, spec.MEDITATE],
        [spec.ME_TIME, spec.ME_TIME, spec.BINGE_WATCH, spec.ME_TIME],
    ]
).T  # (slot, group)
SALT = 0x5354524C  # "STRL"
_WORK, _SOCIAL = 0, 1


class StructurelessLearner:
    """Acceptance counts per (slot, group) and the belief they give (see the module)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.accepted = np.zeros((spec.SLOTS_PER_DAY, len(GROUPS)))
        self.asked = np.zeros((spec.SLOTS_PER_DAY, len(GROUPS)))

    def observe(self, slot: int, action: int, accepted: bool) -> None:
        g = GROUP_OF[int(action)]
        self.asked[int(slot), g] += 1
        self.accepted[int(slot), g] += bool(accepted)

    def rate(self, group: int, slots=None) -> float:
        """Posterior mean acceptance (Beta(1, 1) prior) of a group over some slots."""
        s = slice(None) if slots is None else list(slots)
        return float((self.accepted[s, group].sum() + 1.0) / (self.asked[s, group].sum() + 2.0))

    def belief(self) -> np.ndarray:
        social = self.rate(_SOCIAL)
        work = self.rate(_WORK)
        early = self.rate(_WORK, [spec.MORNING])
        late = self.rate(_WORK, [spec.AFTERNOON, spec.EVENING, spec.NIGHT])
        morning = float(np.clip(0.5 + (early - late) / 2.0, 0.0, 1.0))
        return np.array([social, morning, work])


class StructurelessPolicy:
    """The structureless learner as a policy (simulator Policy protocol)."""

    def __init__(self) -> None:
        self.learner = StructurelessLearner()
        self.reset(0)

    def reset(self, seed: int) -> None:
        self.learner.reset()
        self._rng = np.random.default_rng([int(seed), SALT])

    def act(self, observation: dict[str, Any]) -> tuple[int, np.ndarray]:
        self._absorb(observation)
        slot = int(observation["slot"])
        if int(observation["t"]) >= spec.EPISODE_STEPS:
            return spec.SLEEP, self.learner.belief()
        a = self.learner.accepted[slot] + 1.0
        b = self.learner.asked[slot] - self.learner.accepted[slot] + 1.0
        g = int(np.argmax(self._rng.beta(a, b)))
        return int(GROUP_ACTION[slot, g]), self.learner.belief()

    def final_belief(self, observation: dict[str, Any]) -> np.ndarray:
        """The belief after the week's last answer (in the final observation)."""
        self._absorb(observation)
        return self.learner.belief()

    def _absorb(self, obs: dict[str, Any]) -> None:
        answer = int(obs.get("last_answer", 0))
        t = int(obs["t"])
        if t >= 1 and answer in (1, 2):
            self.learner.observe((t - 1) % spec.SLOTS_PER_DAY, int(obs["last_recommendation"]), answer == 1)
