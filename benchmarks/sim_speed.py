"""Simulator throughput: environment steps per second, on one core.

Run:  python benchmarks/sim_speed.py [--seconds 2]

RhythmEnv: full episodes (reset + 28 steps) with a fixed random action sequence.
BatchEnv at N = 1, 64, 1024, 8192: full episodes (reset of N seeds + 28 batched steps with
observations), and the steps alone (reset excluded).

The process is pinned to one CPU and BLAS threads are set to 1. Figures are steps per second
of this process's CPU time (robust to other load on the machine) and, beside them, of wall
time (equal on an idle machine).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# This file is named simulator.py: keep its folder off sys.path so `simulator` is the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from simulator.batch import BatchEnv  # noqa: E402
from simulator.env import RhythmEnv  # noqa: E402

SIZES = (1, 64, 1024, 8192)


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity); BLAS threads = 1"


class Clock:
    """Wall and process CPU time since creation."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def elapsed(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def bench_env(seconds: float) -> tuple[float, float]:
    """(steps per CPU second, steps per wall second), full episodes."""
    env = RhythmEnv()
    actions = np.random.default_rng(0).integers(0, 10, 28).tolist()
    steps, seed, clock = 0, 0, Clock()
    while True:
        env.reset(seed=seed)
        for a in actions:
            env.step(a)
        steps += 28
        seed += 1
        if seed % 20 == 0 and clock.elapsed()[1] >= seconds:
            wall, cpu = clock.elapsed()
            return steps / cpu, steps / wall


def bench_batch(n: int, seconds: float) -> tuple[float, float, float]:
    """(full episodes per CPU second, per wall second, steps only per CPU second) x N x 28."""
    actions = np.random.default_rng(0).integers(0, 10, (28, n))
    env = BatchEnv(np.arange(n))
    episodes, step_cpu, clock = 0, 0.0, Clock()
    while True:
        env.reset(seeds=np.arange(episodes * n, (episodes + 1) * n))
        s0 = time.process_time()
        for t in range(28):
            env.step(actions[t])
        step_cpu += time.process_time() - s0
        episodes += 1
        wall, cpu = clock.elapsed()
        if cpu >= seconds:
            steps = episodes * n * 28
            return steps / cpu, steps / wall, steps / step_cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Simulator steps per second, one core.")
    parser.add_argument("--seconds", type=float, default=2.0, help="minimum time per measurement")
    args = parser.parse_args(argv)
    print(f"simulator benchmark: numpy {np.__version__}, {pin_one_core()}")
    print()
    head = ("engine", "episodes, CPU", "episodes, wall", "steps only, CPU")
    print(f"{head[0]:<18}{head[1]:>18}{head[2]:>18}{head[3]:>18}   (environment steps per second)")
    cpu, wall = bench_env(args.seconds)
    print(f"{'RhythmEnv':<18}{cpu:>18,.0f}{wall:>18,.0f}{'-':>18}")
    for n in SIZES:
        cpu, wall, steps_only = bench_batch(n, args.seconds)
        print(f"{f'BatchEnv N={n}':<18}{cpu:>18,.0f}{wall:>18,.0f}{steps_only:>18,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
