"""Record the Bayesian agent's weeks as they were before feedback mode (run on main's code).

    PYTHONPATH=/work/main python tests/agent/data/make_golden.py

Writes ``golden_bayes.npz``: for a few in-distribution seeds, the agent's 28 actions, the
belief it emitted at each step and the final grade. ``test_answers.py`` asks the agent, with
feedback off and clean observations, for the same numbers bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.teacher import BayesAgent
from simulator.env import RhythmEnv

SEEDS = (0, 5, 11)


def main() -> None:
    out: dict[str, np.ndarray] = {}
    agent = BayesAgent()
    for seed in SEEDS:
        env = RhythmEnv()
        obs, _ = env.reset(seed=seed)
        agent.reset(seed)
        actions, beliefs = [], []
        done = False
        while not done:
            a, b = agent.act(obs)
            actions.append(a)
            beliefs.append(b)
            obs, _, done, _, info = env.step({"action": a, "belief": b})
        out[f"{seed}/actions"] = np.array(actions)
        out[f"{seed}/beliefs"] = np.array(beliefs)
        out[f"{seed}/final_score"] = np.array(info["final_score"])
    np.savez_compressed(Path(__file__).with_name("golden_bayes.npz"), **out)


if __name__ == "__main__":
    main()
