"""The registry of `rhythm sim eval` (agent/lab/policies.py): one name for the day planner,
groups for `rhythm sim policies`, ablations only when a benchmark asks for them."""

from __future__ import annotations

from agent.day import PLANNER_NAME
from agent.lab.horizon import HorizonAgent
from agent.lab.policies import (
    ABLATIONS,
    BASELINES,
    policy_groups,
    register_ablations,
    register_agent_policies,
)
from simulator.evaluate import evaluate
from simulator.policies import get_policy, policy_names


def test_the_day_planner_plays_the_simulator_under_its_one_name():
    register_agent_policies()
    assert isinstance(get_policy(PLANNER_NAME), HorizonAgent)
    res = evaluate(PLANNER_NAME, "discrete", episodes=1)
    assert res.policy == PLANNER_NAME and res.episodes == 3
    assert res.final_score > 0.6 and res.belief_mae is not None and res.belief_mae < 0.2


def test_every_registered_policy_has_a_group_and_ablations_stay_apart():
    register_agent_policies()
    groups = policy_groups()
    assert list(groups)[:5] == ["baselines", "teachers", "day planner", "references", "students"]
    assert groups["baselines"] == list(BASELINES)  # the simulator's own, all registered
    assert groups["day planner"] == [PLANNER_NAME]
    named = {n for g, names in groups.items() if g != "students" for n in names}
    assert named == set(policy_names())  # nothing registered is left out of the listing
    register_ablations()
    assert set(ABLATIONS) <= set(policy_groups().get("other", []))  # listed apart, never as a group
