"""The policy registry of ``rhythm sim eval``: the agents of agent/ in the simulator's
registry, by name and by group (``rhythm sim policies`` lists them grouped).

- baselines, the simulator's own (:mod:`simulator.policies`): ``random``, ``heuristic`` (spec
  9), ``greedy-true``, ``greedy-neutral``, ``greedy-true-belief``;
- teachers: ``bayes``, the Bayesian teacher :class:`agent.teacher.BayesAgent` with default
  settings; ``bayes-robust``, :class:`agent.lab.robust.RobustAgent`, the teacher that learns
  per-action effects and its own model error (for people who do not follow the spec's
  equations); ``bayes-calendar``, ``bayes`` that reads the week's calendar from the
  observation (calendar weeks, :mod:`simulator.calendar`) and plans with the fixed slots
  forced (in a week without a calendar it is ``bayes``);
- the day planner (``agent.day.PLANNER_NAME``, ``day-planner``): the real-day planner's
  objective (:mod:`agent.day.horizon`) with the teacher's belief, a rolling two-day horizon
  with no end of the week (:class:`agent.lab.horizon.HorizonAgent`);
- references: ``ideal``, the ``bayes`` agent's recommendations with the exact posterior's
  belief over 20,000 prior profiles (:mod:`agent.lab.ideal`: the limit a belief can
  approach); ``structureless``, the simulator's reference that learns from answers only;
- students: not in the registry; ``rhythm sim eval`` builds them from a GGUF (``student``,
  ``student-real``, ``student:PATH.gguf``; :class:`agent.lab.student_policy.StudentPolicy`).

Ablations are not offered by default: ``bayes-noinfo`` (the teacher without the
expected-belief-accuracy term: no deliberate probing) and ``belief-only`` (the spec 9
heuristic's actions with the Bayesian belief: what inference alone is worth) are registered
by :func:`register_ablations`, which only benchmarks and their tests call.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.day import PLANNER_NAME
from agent.teacher import BayesAgent
from simulator.policies import Policy, policy_names, register_policy


def _horizon() -> Policy:
    from agent.lab.horizon import HorizonAgent

    return HorizonAgent()


def _ideal() -> Policy:
    from agent.lab.ideal import IdealPolicy

    return IdealPolicy(BayesAgent())


def _robust() -> Policy:
    from agent.lab.robust import RobustAgent

    return RobustAgent()


#: The simulator's own policies, by group (registered by :mod:`simulator.policies`).
BASELINES = ("random", "heuristic", "greedy-true", "greedy-neutral", "greedy-true-belief")
SIMULATOR_REFERENCES = ("structureless",)

TEACHERS: dict[str, Callable[[], Policy]] = {
    "bayes": lambda: BayesAgent(),
    "bayes-robust": _robust,
    "bayes-calendar": lambda: BayesAgent(use_calendar=True),
}
DAY_PLANNER: dict[str, Callable[[], Policy]] = {PLANNER_NAME: _horizon}
REFERENCES: dict[str, Callable[[], Policy]] = {"ideal": _ideal}
AGENT_POLICIES: dict[str, Callable[[], Policy]] = {**TEACHERS, **DAY_PLANNER, **REFERENCES}

ABLATIONS: dict[str, Callable[[], Policy]] = {
    "bayes-noinfo": lambda: BayesAgent(info_weight=0.0),
    "belief-only": lambda: BayesAgent(plan=False),
}

#: What ``rhythm sim eval --policy`` builds from a GGUF instead of the registry.
STUDENTS = ("student", "student-real", "student:PATH.gguf")


def _register(policies: dict[str, Callable[[], Policy]]) -> list[str]:
    known = set(policy_names())
    for name, factory in policies.items():
        if name not in known:
            register_policy(name, factory)
    return list(policies)


def register_agent_policies() -> list[str]:
    """Register the teachers, the day planner and the references (idempotent); returns
    their names."""
    return _register(AGENT_POLICIES)


def register_ablations() -> list[str]:
    """Register the ablations (idempotent; benchmarks only); returns their names."""
    return _register(ABLATIONS)


def policy_groups() -> dict[str, list[str]]:
    """The registered policies by group, in the order ``rhythm sim policies`` lists them;
    registered names of no known group (an ablation a benchmark registered, a test's own)
    come last under ``other``."""
    known = set(policy_names())
    groups = {
        "baselines": [n for n in BASELINES if n in known],
        "teachers": [n for n in TEACHERS if n in known],
        "day planner": [n for n in DAY_PLANNER if n in known],
        "references": [n for n in (*REFERENCES, *SIMULATOR_REFERENCES) if n in known],
        "students": list(STUDENTS),
    }
    grouped = {n for names in groups.values() for n in names}
    other = sorted(known - grouped)
    if other:
        groups["other"] = other
    return groups
