"""Benchmark the Bayesian teacher: ms per decision and the three-condition table.

    .venv/bin/python benchmarks/bayes_agent.py                     # full protocol (100 / 50 / 3x5)
    .venv/bin/python benchmarks/bayes_agent.py --episodes 10       # quick look
    .venv/bin/python benchmarks/bayes_agent.py --policies bayes,bayes-noinfo,belief-only,heuristic

Timing runs the agent on ``RhythmEnv`` and times only ``act`` (CPU time of this process,
``time.process_time``, and wall time); the process is pinned to one CPU with BLAS threads
set to 1; the machine may be shared, so trust CPU time more.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# This file is named agent.py: keep its folder off sys.path so `agent` is the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from agent.lab.policies import register_ablations, register_agent_policies  # noqa: E402
from agent.teacher import BayesAgent  # noqa: E402
from simulator import spec  # noqa: E402
from simulator.env import RhythmEnv  # noqa: E402
from simulator.evaluate import PUBLISHED, evaluate  # noqa: E402


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}; BLAS threads = 1"
    return "not pinned (no sched_setaffinity); BLAS threads = 1"


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
    ap.add_argument(
        "--episodes", type=int, default=None, help="episodes per condition (default: protocol)"
    )
    ap.add_argument(
        "--timing-episodes", type=int, default=10, help="episodes for the timing run (0: skip)"
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args()

    register_agent_policies()
    register_ablations()
    out: dict[str, object] = {"cpu": pin_one_core()}
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
            f"p95 {t['cpu_ms_p95']:.1f} ms, max {t['cpu_ms_max']:.1f} ms; wall mean {t['wall_ms_mean']:.1f} ms "
            f"({out['cpu']})"
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
