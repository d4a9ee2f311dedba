"""Health Auto Export import benchmark: a year of daily JSON files, end to end.

    .venv/bin/python benchmarks/hae.py                    # 365 daily files, 3 fresh imports
    .venv/bin/python benchmarks/hae.py --days 90 --repeat 5
    .venv/bin/python benchmarks/hae.py --parse-only       # the reader alone (no database)

Builds (once, in benchmarks/_data/, git-ignored) what the app's automation writes with the
Default period over a year: one file a day holding the whole previous day and the current
day up to 21:00, so every day is in two files (lab/people/hae.py: heart rate
every 4-6 minutes and every 5 s in workouts, steps, distance and active energy in the active
minutes, basal energy every minute, HRV, resting heart rate, respiratory rate and SpO2 at
night, both devices' sources, the night's aggregated sleep, a workout with per-minute heart
rate on 60 % of days; about 1 MB and 9,000 points a file). Then, each in a subprocess with
a fresh RHYTHM_HOME (wall and CPU time and peak RSS from os.wait4):

1. ``rhythm import hae FOLDER`` of the whole year (``--repeat`` times: min / median / max);
2. the same folder again into that database (every record a duplicate: the re-import);
3. one more day's file into the year's database (what each daily push costs).

Rates: files/s, records/s (every record the reader yields: samples, sleeps, workouts and raw
payload chunks), MB/s of JSON. With ``--parse-only``, the reader alone in a subprocess (best
of ``--repeat``): the same rates without the database. Timings on a shared machine are noisy:
CPU seconds are printed beside wall seconds, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "_data"
FIRST = date(2024, 1, 1)


def build(days: int, seed: int) -> Path:
    """The year's daily files (cached), and one more day's file beside them."""
    folder = DATA / f"hae_{days}d_s{seed}"
    done = folder / ".complete"
    if done.exists():
        return folder
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from lab.people import hae

    t = time.perf_counter()
    hae.daily_files(folder / "year", FIRST, days, seed=seed)
    hae.daily_files(folder / "next", FIRST + timedelta(days=days), 1, seed=seed)
    done.write_text("ok\n")
    print(f"built {folder.relative_to(REPO)}: {days} files in {time.perf_counter() - t:.0f} s")
    return folder


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int, str]:
    """(wall s, cpu s, peak RSS MB, exit code, stdout) of one child process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE, text=True, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code:
            print((proc.stderr.read() if proc.stderr else "")[-2000:], file=sys.stderr)
        out.seek(0)
        text = out.read()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code, text


def rhythm_import(path: Path, home: str) -> tuple[float, float, float, dict]:
    env = {**os.environ, "RHYTHM_HOME": home, "PYTHONPATH": str(REPO)}
    wall, cpu, rss, code, out = run_measured([sys.executable, "-m", "rhythm", "import", "hae", str(path), "--json"], env)
    if code:
        raise SystemExit(f"rhythm import hae failed (exit {code})")
    return wall, cpu, rss, json.loads(out)


def parse_only_child(path: Path, repeat: int) -> None:
    import resource

    sys.path.insert(0, str(REPO))
    from connectors.hae.reader import read_export

    best_cpu = best_wall = float("inf")
    n = 0
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        w0 = time.perf_counter()
        n = sum(len(r) if hasattr(r, "columns") else 1 for r in read_export(path))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    print(json.dumps({"cpu": best_cpu, "wall": best_wall, "records": n}))


def rates(label: str, files: int, mb: float, records: int, wall: float, cpu: float, rss: float | None) -> str:
    line = (f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU; {files / wall:,.1f} files/s, {records / wall:,.0f} records/s, "
            f"{mb / wall:.1f} MB/s ({records / cpu:,.0f} records per CPU-second)")
    return line + (f", peak RSS {rss:.0f} MB" if rss is not None else "")


def spread(xs: list[float]) -> str:
    return f"{min(xs):.1f} / {statistics.median(xs):.1f} / {max(xs):.1f}"


def main(args: argparse.Namespace) -> int:
    if args.parse_only_child:
        parse_only_child(Path(args.parse_only_child), args.repeat)
        return 0
    folder = build(args.days, args.seed)
    year, nxt = folder / "year", folder / "next"
    files = sorted(year.glob("*.json"))
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"input: {len(files)} daily files, {mb:.0f} MB of JSON ({year.relative_to(REPO)}); "
          f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.1f}")

    if args.parse_only:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        wall, cpu, rss, code, out = run_measured(
            [sys.executable, __file__, "--parse-only-child", str(year), "--repeat", str(args.repeat)], env)
        if code:
            return 1
        r = json.loads(out)
        print(rates(f"parse only (best of {args.repeat})", len(files), mb, r["records"], r["wall"], r["cpu"], rss))
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return 0

    walls, cpus, rsss = [], [], []
    summary: dict = {}
    db_size = 0.0
    with tempfile.TemporaryDirectory() as keep:
        for i in range(args.repeat):
            home = keep if i == args.repeat - 1 else tempfile.mkdtemp()
            wall, cpu, rss, summary = rhythm_import(year, home)
            walls.append(wall)
            cpus.append(cpu)
            rsss.append(rss)
            if home != keep:
                subprocess.run(["rm", "-rf", home], check=False)
        db_size = (Path(keep) / "rhythm.duckdb").stat().st_size / 1e6
        n = summary["records"]
        samples = summary["tables"]["samples"]
        print(f"records per import: {n:,} ({samples['received']:,} samples of which "
              f"{samples['existing'] + samples['duplicates_in_batch']:,} repeated by the overlapping files; "
              f"{summary['tables']['raw_hae']['received']:,} raw chunks); stored samples {samples['inserted']:,}; "
              f"database {db_size:.0f} MB")
        best = walls.index(min(walls))
        print(rates(f"first import of the year (best of {args.repeat})", len(files), mb, n, walls[best], cpus[best],
                    rsss[best]))
        print(f"  wall s min / median / max: {spread(walls)}; CPU s: {spread(cpus)}; peak RSS MB: {spread(rsss)}")
        wall, cpu, rss, again = rhythm_import(year, keep)
        assert again["duplicates_skipped"] == again["records"], "a re-import stored something new"
        print(rates("re-import of the year (all duplicates)", len(files), mb, again["records"], wall, cpu, rss))
        nxt_file = next(nxt.glob("*.json"))
        wall, cpu, rss, one = rhythm_import(nxt_file, keep)
        print(rates("one more day into the year's database", 1, nxt_file.stat().st_size / 1e6, one["records"], wall,
                    cpu, rss) + f"; {sum(t['inserted'] for t in one['tables'].values()):,} new rows")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=365, help="daily files (one a day)")
    p.add_argument("--seed", type=int, default=20240203, help="generator seed")
    p.add_argument("--repeat", type=int, default=3, help="fresh imports to time (min / median / max)")
    p.add_argument("--parse-only", action="store_true", help="time the reader alone")
    p.add_argument("--parse-only-child", help=argparse.SUPPRESS)
    sys.exit(main(p.parse_args()))
