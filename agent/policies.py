"""Register the Bayesian agents in the simulator's policy registry (for ``rhythm sim eval``).

- ``bayes``: the teacher, :class:`agent.teacher.BayesAgent` with default settings.
- ``bayes-noinfo``: the same planner without the expected-belief-accuracy term (ablation:
  no deliberate probing).
- ``belief-only``: the spec 9 heuristic's actions with the Bayesian belief (ablation: what
  inference alone is worth).
- ``bayes-horizon``: the real-day planner's objective (agent.day.horizon): the same belief,
  a rolling two-day horizon with no end of the week.
- ``ideal``: the ``bayes`` agent's recommendations with the exact posterior's belief over
  20,000 prior profiles (:mod:`agent.ideal`; a reference: the limit a belief can approach).
- ``bayes-robust``: :class:`agent.robust.RobustAgent`, the teacher that learns per-action
  effects and its own model error (for people who do not follow the spec's equations).
- ``bayes-calendar``: ``bayes`` that reads the week's calendar from the observation (calendar
  weeks, :mod:`simulator.calendar`) and plans with the fixed slots forced; in a week without
  a calendar it is ``bayes``.
"""

from __future__ import annotations

from agent.ideal import IdealPolicy
from agent.robust import RobustAgent
from agent.teacher import BayesAgent
from simulator.policies import policy_names, register_policy


def _horizon():
    from agent.day.horizon import HorizonAgent

    return HorizonAgent()


AGENT_POLICIES = {
    "bayes": lambda: BayesAgent(),
    "bayes-horizon": _horizon,
    "bayes-noinfo": lambda: BayesAgent(info_weight=0.0),
    "belief-only": lambda: BayesAgent(plan=False),
    "ideal": lambda: IdealPolicy(BayesAgent()),
    "bayes-robust": lambda: RobustAgent(),
    "bayes-calendar": lambda: BayesAgent(use_calendar=True),
}


def register_agent_policies() -> list[str]:
    """Register the agents (idempotent); returns their names."""
    known = set(policy_names())
    for name, factory in AGENT_POLICIES.items():
        if name not in known:
            register_policy(name, factory)
    return list(AGENT_POLICIES)
