"""The two Ray scenarios of test_cluster.py that need code of their own, run as a child
process (``python tests/training/ray_scenarios.py SCENARIO FOLDER``) with its own local Ray
runtime: whatever happens to Ray there (a worker killed, a cancelled run) cannot end the test
process. The test asserts on the files written into FOLDER.

- ``killed``: the rollouts' units on Ray, the worker running seed DIES_ON's unit dying once
  (the process ends, as when a machine goes away): FOLDER/ray.jsonl.
- ``cut``: a rollouts run on Ray interrupted once ten episodes are done (exit 3 when the
  KeyboardInterrupt came through, the units written stay in FOLDER/cut).
- ``resume``: the same run again, to the end: FOLDER/cut/rollouts.jsonl.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DIES_ON = 1_000_004  # the first seed of the unit whose worker dies once
SEEDS = list(range(1_000_000, 1_000_010))


def units() -> list[tuple]:
    """The killed scenario's units: two seeds each."""
    return [(SEEDS[i : i + 2], "bayes", "in-dist", "") for i in range(0, len(SEEDS), 2)]


def _dies_once(job: tuple[tuple, str]) -> list[str]:
    """The rollouts' unit, except that the worker running seed DIES_ON's unit dies the first
    time (a marker file says it has)."""
    from training.rollouts import _worker

    real, marker = job
    if real[0][0] == DIES_ON and not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)
    return _worker(real)


def cut_args(folder: Path):
    from training.rollouts import Args

    return Args(out=str(folder / "cut"), episodes=25, teacher="heuristic", ray="local")


def main(scenario: str, folder: Path) -> int:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    from training.executors import RayExecutor
    from training.rollouts import main as rollouts
    from training.weeks import write_weeks

    if scenario == "killed":
        marker = folder / "died"
        write_weeks(folder / "ray.jsonl", _dies_once, [(u, str(marker)) for u in units()], 1,
                    "grade", lambda n: None, RayExecutor("local"))
        return 0
    if scenario == "cut":
        def stop_after_a_unit(stage, done, total):
            if done >= 10:
                raise KeyboardInterrupt

        try:
            rollouts(cut_args(folder), stop_after_a_unit)
        except KeyboardInterrupt:
            return 3
        return 0
    if scenario == "resume":
        rollouts(cut_args(folder))
        return 0
    raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[2])
    sys.path.insert(0, root)  # this checkout, for the child and (PYTHONPATH) its Ray workers
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p
    )
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
