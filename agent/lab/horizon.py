"""The real-day planner as a simulator policy (``day-planner`` in ``rhythm sim eval``).

:class:`HorizonAgent` plays the simulator's week with the day planner's objective
(:func:`agent.day.horizon.plan_horizon`: a rolling horizon, no end of the week), so the cost
of planning without the week's end is a number (docs/agent.md, "No end of the week").
"""

from __future__ import annotations

import numpy as np

from agent.day.horizon import INFO_WEIGHT, plan_horizon
from agent.teacher import BayesAgent
from agent.world import PlanModel
from simulator import spec


class HorizonAgent:
    """The real-day planner's objective as a simulator policy (``day-planner``): the
    Bayesian belief of :class:`agent.teacher.BayesAgent`, and at every step the first action
    of :func:`plan_horizon` over the next ``length`` slots (no end of the week, a terminal
    value and the value of learning), so the cost of planning without the week's end is a
    number (docs/agent.md)."""

    def __init__(self, length: int = 8, rounds: int = 4, n_samples: int = 6):
        self._inner = BayesAgent(n_samples=n_samples)
        self.length, self.rounds = int(length), int(rounds)
        self._inner._plan_action = self._plan_action  # the belief is BayesAgent's, the plan ours

    def reset(self, seed: int) -> None:
        self._inner.reset(seed)

    def act(self, observation):
        return self._inner.act(observation)

    def belief(self) -> np.ndarray:
        return self._inner.belief()

    def _plan_action(self, meters: np.ndarray, t: int) -> int:
        bs = self._inner.belief_state
        params = bs.sample_params(self._inner.n_samples)
        params[0] = bs.profile_estimate().to_array()
        model = PlanModel(params, bs.w)
        info = (bs.prior_prec + bs.data_precision(), INFO_WEIGHT)
        plan, _ = plan_horizon(model, meters, t & 3, self.length, rounds=self.rounds, info=info)
        self._inner._reason = f"{spec.ACTIONS[int(plan[0])]}: best over the next {self.length} slots"
        return int(plan[0])
