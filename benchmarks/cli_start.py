"""How fast the command line starts: the median wall time of `rhythm --help` and of
`rhythm status` (an empty RHYTHM_HOME) over several runs, each in a fresh process.

Run:  python benchmarks/cli_start.py [--runs 9]

The CLI loads the simulator, the agent, numpy and pyarrow only inside the commands that need
them (issue 35: both start in under 0.4 s on a quiet core). Figures include the interpreter's
own start; beside them, that of `python -c pass`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def median_seconds(args: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="runs per command (the median is printed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "RHYTHM_HOME": home, "PYTHONPATH": str(REPO)}
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("rhythm --help", [sys.executable, "-m", "rhythm", "--help"]),
            ("rhythm status", [sys.executable, "-m", "rhythm", "status"]),
        ]
        print(f"median wall time over {args.runs} runs")
        for name, cmd in rows:
            print(f"  {name:<16} {median_seconds(cmd, args.runs, env):.3f} s")


if __name__ == "__main__":
    main()
