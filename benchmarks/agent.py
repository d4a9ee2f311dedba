"""Benchmark the Bayesian teacher: ms per decision and the three-condition table.

    .venv/bin/python benchmarks/agent.py                     # full protocol (100 / 50 / 3x5)
    .venv/bin/python benchmarks/agent.py --episodes 10       # quick look
    .venv/bin/python benchmarks/agent.py --policies bayes,bayes-noinfo,belief-only,heuristic

Timing runs the agent on ``RhythmEnv`` and times only ``act`` (CPU time of this process,
``time.process_time``, and wall time); the machine may be shared, so trust CPU time more.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from agent.planner import BayesAgent
from agent.policies import register_agent_policies
from simulator import spec
from simulator.env import RhythmEnv
from simulator.evaluate import PUBLISHED, evaluate


def time_decisions(episodes: int = 10, seed0: int = 0, **agent_kwargs) -> dict[str, float]:
    """Per-decision CPU and wall time of :class:`BayesAgent` (including its belief update)."""
    env = RhythmEnv()
    agent = BayesAgent(**agent_kwargs)
    cpu, wall = [], []
    for seed in range(seed0, seed0 + episodes):
        obs, _ = env.reset(seed=seed)
        agent.reset(seed)
        for _ in range(spec.EPISODE_STEPS):
            c0, w0 = time.process_time(), time.perf_counter()
            a, b = agent.act(obs)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            obs, *_ = env.step({"action": a, "belief": b})
    cpu_ms, wall_ms = 1000 * np.array(cpu), 1000 * np.array(wall)
    return {
        "decisions": len(cpu),
        "cpu_ms_mean": float(cpu_ms.mean()),
        "cpu_ms_p95": float(np.percentile(cpu_ms, 95)),
        "cpu_ms_max": float(cpu_ms.max()),
        "wall_ms_mean": float(wall_ms.mean()),
        "wall_ms_p95": float(np.percentile(wall_ms, 95)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="bayes,random,heuristic", help="comma-separated names")
    ap.add_argument("--episodes", type=int, default=None, help="episodes per condition (default: protocol)")
    ap.add_argument("--timing-episodes", type=int, default=10, help="episodes for the timing run (0: skip)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args()

    register_agent_policies()
    out: dict[str, object] = {}
    if args.timing_episodes:
        out["timing"] = time_decisions(args.timing_episodes)
    rows = []
    for name in args.policies.split(","):
        for cond in spec.CONDITIONS:
            t0 = time.perf_counter()
            r = evaluate(name, cond, episodes=args.episodes)
            d = r.to_dict()
            d["seconds"] = time.perf_counter() - t0
            rows.append(d)
    out["table"] = rows
    if args.json:
        print(json.dumps(out, indent=2))
        return
    if "timing" in out:
        t = out["timing"]
        print(
            f"BayesAgent decision time over {t['decisions']} decisions: CPU mean {t['cpu_ms_mean']:.1f} ms, "
            f"p95 {t['cpu_ms_p95']:.1f} ms, max {t['cpu_ms_max']:.1f} ms; wall mean {t['wall_ms_mean']:.1f} ms"
        )
    print()
    print("| policy | condition | n | final_score (95% CI) | belief_mae | crashes/ep | published |")
    print("|---|---|---|---|---|---|---|")
    for d in rows:
        lo, hi = d["final_score_ci95"]
        mae = "-" if d["belief_mae"] is None else f"{d['belief_mae']:.3f}"
        pub = PUBLISHED.get(d["policy"], {}).get(d["condition"])
        print(
            f"| {d['policy']} | {d['condition']} | {d['episodes']} | {d['final_score']:.3f} "
            f"({lo:.3f}-{hi:.3f}) | {mae} | {d['crashes_mean']:.2f} | {'-' if pub is None else pub} |"
        )


if __name__ == "__main__":
    main()
