"""The lab's units per second on a Ray runtime of 1 and 2 workers, beside the local pool.

Run:  python benchmarks/ray_scaling.py [--rollout-units 12] [--people 4] [--eval-units 4]

The same units each way (training/executors.py): teacher rollouts (``rhythm train rollouts``:
a unit is 3 ``bayes`` weeks), stream people (``rhythm train streams``: a unit is one
generated person, stored, mapped and read back) and simulator evaluation (``rhythm sim eval``:
a unit is 10 ``bayes`` episodes). Executors: the local pool with 1 worker (in this process) and
2 worker processes; a private Ray runtime on this machine with 1 and 2 CPUs (one task per
CPU). Before the timed pass each executor plays one unit per worker of every stage (the
imports done, Ray's workers started: a cluster is started once and keeps its workers), so
the figures are the steady rate that long runs see; the local pool starts fresh processes
on every run (spawn), which a short run on it pays. ``CPU s/unit`` is the CPU time a unit
took inside its worker (the cost per unit, whatever else runs on the machine), ``busy`` the
share of the workers' wall time they spent computing (below 100%: waiting for a core other
processes hold, or for the scheduler); the last column checks that every executor returned
the same results. Needs the cluster extra
(``pip install 'rhythm[cluster]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Ray's workers (and the local pool's spawned ones) import this checkout
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from agent.lab.eval_units import play_unit, units_of  # noqa: E402
from lab.streams import _job as person_unit  # noqa: E402
from training.executors import LocalPool, RayExecutor, import_ray  # noqa: E402
from training.rollouts import _worker as rollout_unit  # noqa: E402


def stages(args: argparse.Namespace) -> dict[str, tuple]:
    seeds = list(range(1_000_000, 1_000_000 + 3 * args.rollout_units))
    return {
        "rollouts (3 bayes weeks)": (
            rollout_unit, [(seeds[i : i + 3], "bayes", "in-dist", "") for i in range(0, len(seeds), 3)]
        ),
        "streams (1 person)": (person_unit, list(range(1_000_000, 1_000_000 + args.people))),
        "sim eval (10 bayes weeks)": (
            play_unit, units_of("bayes", "in-dist", 10 * args.eval_units, unit_episodes=10)
        ),
    }


def digest(results: list) -> str:
    """A hash of the results' values (JSON lines as they are, grade arrays as lists)."""
    def plain(r):
        return {k: v.tolist() for k, v in r.items()} if isinstance(r, dict) else r

    return hashlib.sha256(json.dumps([plain(r) for r in results]).encode()).hexdigest()[:12]


def timed(job: tuple) -> tuple:
    """``fn(unit)`` and the CPU seconds it took in its worker."""
    fn, unit = job
    t0 = time.process_time()
    out = fn(unit)
    return out, time.process_time() - t0


def run(executor, fn, units) -> tuple[float, str, float]:
    """(wall seconds, digest of the results, CPU seconds of the units)."""
    t0 = time.perf_counter()
    got = dict(executor.map_units(timed, [(fn, u) for u in units]))
    wall = time.perf_counter() - t0
    results = [got[i][0] for i in range(len(units))]
    return wall, digest(results), sum(got[i][1] for i in range(len(units)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollout-units", type=int, default=8, help="rollout units (3 weeks each)")
    p.add_argument("--people", type=int, default=3, help="stream people (one unit each)")
    p.add_argument("--eval-units", type=int, default=4, help="sim eval units (10 episodes each)")
    args = p.parse_args()
    ray = import_ray()
    work = stages(args)
    rows: dict[str, dict[str, tuple[float, str, float]]] = {name: {} for name in work}
    configs = ["local 1", "local 2", "ray 1", "ray 2"]
    for config in configs:
        kind, n = config.split()
        if kind == "ray":
            ray.init(num_cpus=int(n), include_dashboard=False, logging_level="ERROR")
            executor = RayExecutor("auto")
        else:
            executor = LocalPool(int(n))
        try:
            for name, (fn, units) in work.items():
                run(executor, fn, units[: int(n)])  # warm: imports done, Ray's workers up
                rows[name][config] = run(executor, fn, units)
                print(f"  {config:8s} {name}: {rows[name][config][0]:.1f} s", file=sys.stderr)
        finally:
            if kind == "ray":
                ray.shutdown()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nunits per second (wall), {os.cpu_count()} CPUs; load average {load:.1f} at the end "
          "(other processes on the machine take their share of the cores)")
    head = f"{'stage':26s} {'units':>5s} {'CPU s/unit':>10s} " + " ".join(f"{c:>8s}" for c in configs)
    print(head + f" {'ray 2/1':>8s} {'busy r2':>8s} {'same':>5s}")
    print("-" * (len(head) + 24))
    for name, (_, units) in work.items():
        r = rows[name]
        rates = {c: len(units) / r[c][0] for c in configs}
        cpu = r["local 1"][2] / len(units)
        busy = r["ray 2"][2] / (2 * r["ray 2"][0])
        same = len({r[c][1] for c in configs}) == 1
        print(f"{name:26s} {len(units):5d} {cpu:10.2f} " + " ".join(f"{rates[c]:8.2f}" for c in configs)
              + f" {rates['ray 2'] / rates['ray 1']:7.2f}x {busy:8.0%} {'yes' if same else 'NO':>5s}")

if __name__ == "__main__":
    main()
