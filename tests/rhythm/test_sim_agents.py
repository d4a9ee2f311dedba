"""The app shell plugs the agents into `rhythm sim eval` by name."""

from __future__ import annotations

import json


def test_bayes_agent_is_a_sim_policy(run_cli):
    code, out, _ = run_cli("sim", "policies")
    assert code == 0 and {"bayes", "random", "heuristic"} <= set(out.split())
    code, out, err = run_cli("sim", "eval", "--policy", "bayes", "--condition", "discrete", "--episodes", "1", "--json")
    assert code == 0, err
    res = json.loads(out)["results"]["discrete"]
    assert res["policy"] == "bayes" and res["episodes"] == 3
    assert res["final_score"] > 0.7 and res["belief_mae"] < 0.15
