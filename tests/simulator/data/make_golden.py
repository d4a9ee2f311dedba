"""Record episodes of the simulator as it was before feedback mode (run on main's code).

    PYTHONPATH=/work/main python tests/simulator/data/make_golden.py

Writes ``golden_episodes.npz`` beside this file: for a few seeds and conditions, every
observation, reward and the final grade of a week played with seeded random actions and
beliefs. ``test_feedback.py`` replays them with feedback off and clean observations and
asks for the same numbers bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.env import RhythmEnv

CASES = [(0, "in-dist", None), (3, "in-dist", None), (17, "in-dist", None),
         (10001, "ood", None), (2, "in-dist", "workaholic_stoic")]
KEYS = ("t", "meters", "deltas", "anomalies", "last_action", "last_reward", "active_event",
        "history_actions", "history_rewards", "history_deltas")


def main() -> None:
    out: dict[str, np.ndarray] = {}
    for i, (seed, cond, prof) in enumerate(CASES):
        rng = np.random.default_rng([seed, 99])
        actions = rng.integers(0, 10, 28)
        beliefs = rng.random((28, 3))
        env = RhythmEnv(condition=cond)
        obs, _ = env.reset(seed=seed, options=None if prof is None else {"profile": prof})
        rows = {k: [obs[k]] for k in KEYS}
        rewards = []
        for t in range(28):
            obs, r, _, _, info = env.step({"action": int(actions[t]), "belief": beliefs[t]})
            rewards.append(r)
            for k in KEYS:
                rows[k].append(obs[k])
        for k in KEYS:
            out[f"{i}/{k}"] = np.array(rows[k])
        out[f"{i}/actions"] = actions
        out[f"{i}/beliefs"] = beliefs
        out[f"{i}/rewards"] = np.array(rewards)
        out[f"{i}/final_score"] = np.array(info["final_score"])
        out[f"{i}/belief_mae"] = np.array(info["belief_mae"])
    np.savez_compressed(Path(__file__).with_name("golden_episodes.npz"), **out)


if __name__ == "__main__":
    main()
