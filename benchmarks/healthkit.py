"""Apple Health import benchmark: records/s end to end, peak RSS, and healthkit-to-sqlite.

    .venv/bin/python benchmarks/healthkit.py                 # ~3 M Records (~1.2 GB XML)
    .venv/bin/python benchmarks/healthkit.py --records 800000
    .venv/bin/python benchmarks/healthkit.py --records 10000000 --skip-h2s   # ~3.9 GB, the largest exports
    .venv/bin/python benchmarks/healthkit.py --size-gb 1 --h2s-records 400000
    .venv/bin/python benchmarks/healthkit.py --records 200000 --parse-only   # parser alone
    .venv/bin/python benchmarks/healthkit.py --records 1000000 --no-native   # pure-Python parser

Builds a large export.xml in benchmarks/_data/ (git-ignored) by repeating the Records of
the generated test export (lab/people/healthkit.py: 8,038 Records of 28 types
in the shape of a real 2021 export, HRV beat lists, metadata), each copy shifted later by a
whole number of 367-day periods so no natural key repeats. Then:

1. `rhythm import healthkit FILE` in a subprocess with a fresh RHYTHM_HOME: wall time
   (parse + load + commit), CPU time, peak RSS of that process (os.wait4).
2. `healthkit-to-sqlite FILE db --xml` (pip install healthkit-to-sqlite) on the same file,
   or on a leading slice of it (--h2s-records) when the full file would take too long;
   both tools are then compared in Records per second.

With --parse-only, step 1 is replaced by the connector alone (no database, no thread):
the file is read, parsed and converted to records, which are counted and dropped, in a
subprocess; best of --repeat runs; reports Records per CPU-second and per wall-second and
that process's peak RSS.

`--no-native` sets RHYTHM_NO_NATIVE=1 (the pure-Python parser, as without the C extension).
Timings on a shared machine are noisy: CPU seconds are printed beside wall seconds.

Needs: healthkit-to-sqlite (benchmark only). Nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "_data"
DATE = re.compile(rb"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ([+-]\d{4})")
SHIFT = timedelta(days=367)  # > the fixture's span (one year), so copies never collide


def fixture_bytes() -> bytes:
    """The generated test export the copies repeat (the suite's own fixture, one year of 2021)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from lab.people import healthkit

    return healthkit.export_xml()


def split_fixture() -> tuple[bytes, bytes, bytes, int]:
    src = fixture_bytes()
    head_end = src.index(b"\n", src.index(b"<ExportDate")) + 1
    tail_start = src.rindex(b"</HealthData>")
    body = src[head_end:tail_start]
    return src[:head_end], body, src[tail_start:], body.count(b"<Record ")


def synthesise(records: int, out: Path) -> tuple[int, int]:
    """Write an export with at least `records` Records; returns (records, bytes)."""
    head, body, tail, per_copy = split_fixture()
    copies = max(1, -(-records // per_copy))
    with out.open("wb") as f:
        f.write(head)
        for i in range(copies):
            cache: dict[bytes, bytes] = {}
            delta = SHIFT * i

            def sub(m: re.Match[bytes], cache=cache, delta=delta) -> bytes:
                s = m.group(1)
                r = cache.get(s)
                if r is None:
                    dt = datetime.strptime(s.decode(), "%Y-%m-%d %H:%M:%S") + delta  # later: 4-digit years up to ~60 M Records
                    r = cache[s] = dt.strftime("%Y-%m-%d %H:%M:%S").encode()
                return r + b" " + m.group(2)

            f.write(body if i == 0 else DATE.sub(sub, body))
        f.write(tail)
    return copies * per_copy, out.stat().st_size


def slice_export(src: Path, records: int, out: Path) -> int:
    """The first `records` Records of `src` as a well-formed export (for the slow tool)."""
    n = 0
    with src.open("rb") as f, out.open("wb") as g:
        for line in f:
            if line.lstrip().startswith(b"<Record "):
                if n >= records:
                    break
                n += 1
            g.write(line)
        g.write(b"</HealthData>\n")
    return n


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MB, exit code) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        print(err[-2000:], file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def parse_only(xml: Path, repeat: int) -> tuple[float, float, int]:
    """In this process: (best CPU s, best wall s, records out) of parsing `xml` to records."""
    import resource

    sys.path.insert(0, str(REPO))
    from connectors.healthkit import source as source_mod
    from connectors.healthkit.parser import ExportParser

    best_cpu = best_wall = float("inf")
    n_out = 0
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        w0 = time.perf_counter()
        p = ExportParser()
        n_out = 0
        for chunk, _done in source_mod.chunks(source_mod.locate(xml)):
            p.feed(chunk)
            n_out += sum(len(r) if hasattr(r, "columns") else 1 for r in p.drain())
        p.close()
        n_out += sum(len(r) if hasattr(r, "columns") else 1 for r in p.drain(final=True))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return best_cpu, best_wall, n_out


def main(args: argparse.Namespace) -> int:
    if args.parse_only_child:
        cpu, wall, n_out = parse_only(Path(args.parse_only_child), args.repeat)
        print(f"{cpu} {wall} {n_out}")
        return 0
    DATA.mkdir(parents=True, exist_ok=True)
    _, body, _, per_copy = split_fixture()
    records = args.records
    if args.size_gb:
        records = int(args.size_gb * 1e9 / len(body) * per_copy)
    xml = DATA / f"export_{records}.xml"
    if not xml.exists():
        t = time.perf_counter()
        n, size = synthesise(records, xml)
        print(f"built {xml.name}: {n:,} Records, {size / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s")
    n = per_copy * max(1, -(-records // per_copy))
    size = xml.stat().st_size
    print(f"input: {xml} ({size / 1e9:.2f} GB, {n:,} Records); {os.cpu_count()} CPUs; "
          f"load average before: {os.getloadavg()[0]:.1f}")

    base_env = {**os.environ, "RHYTHM_NO_NATIVE": "1" if args.no_native else "0"}
    print(f"parser: {'pure Python (RHYTHM_NO_NATIVE=1)' if args.no_native else 'native scanner where built'}")
    if args.parse_only:
        with tempfile.TemporaryFile("w+") as out:
            cmd = [sys.executable, __file__, "--parse-only-child", str(xml), "--repeat", str(args.repeat)]
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=base_env)
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status):
                print(proc.stderr.read()[-2000:] if proc.stderr else "", file=sys.stderr)
                return 1
            out.seek(0)
            cpu, wall, n_out = (float(x) for x in out.read().split())
        print(f"parse only: {cpu:.2f} s CPU, {wall:.2f} s wall (best of {args.repeat}); "
              f"{n / cpu:,.0f} Records per CPU-second, {n / wall:,.0f} Records per wall-second; "
              f"{int(n_out):,} records out; peak RSS {usage.ru_maxrss / 1024:.0f} MB")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return 0

    rhythm = shutil.which("rhythm", path=str(Path(sys.executable).parent)) or "rhythm"
    with tempfile.TemporaryDirectory() as home:
        env = {**base_env, "RHYTHM_HOME": home}
        wall, cpu, rss, code = run_measured([rhythm, "import", "healthkit", str(xml), "--json"], env)
        db_size = (Path(home) / "rhythm.duckdb").stat().st_size if code == 0 else 0
    if code:
        print(f"rhythm import failed (exit {code})")
        return 1
    ours = n / wall
    print(f"rhythm import healthkit: {wall:.1f} s wall, {cpu:.1f} s CPU, {ours:,.0f} Records/s end to end "
          f"({n / cpu:,.0f} per CPU-second), peak RSS {rss:.0f} MB, database {db_size / 1e6:.0f} MB")

    if args.skip_h2s:
        return 0
    h2s = shutil.which("healthkit-to-sqlite", path=str(Path(sys.executable).parent))
    if h2s is None:
        print("healthkit-to-sqlite not installed (pip install healthkit-to-sqlite): no comparison")
        return 0
    target, h2s_n = xml, n
    if args.h2s_records and args.h2s_records < n:
        target = DATA / f"slice_{args.h2s_records}.xml"
        h2s_n = slice_export(xml, args.h2s_records, target)
    with tempfile.TemporaryDirectory() as tmp:
        wall2, cpu2, rss2, code2 = run_measured([h2s, str(target), f"{tmp}/h.db", "--xml", "--silent"], dict(os.environ))
    if code2:
        print(f"healthkit-to-sqlite failed (exit {code2})")
        return 1
    theirs = h2s_n / wall2
    what = "the same file" if target == xml else f"the first {h2s_n:,} Records (slice)"
    print(f"healthkit-to-sqlite on {what}: {wall2:.1f} s wall, {cpu2:.1f} s CPU, {theirs:,.0f} Records/s, "
          f"peak RSS {rss2:.0f} MB")
    print(f"ratio (Records/s, rhythm / healthkit-to-sqlite): {ours / theirs:.1f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3_000_000, help="Records in the synthetic export")
    ap.add_argument("--size-gb", type=float, default=None, help="size of the export instead of --records")
    ap.add_argument("--h2s-records", type=int, default=500_000,
                    help="run healthkit-to-sqlite on only this many leading Records (0: the whole file)")
    ap.add_argument("--skip-h2s", action="store_true", help="measure rhythm only")
    ap.add_argument("--parse-only", action="store_true", help="time the connector alone (no database)")
    ap.add_argument("--no-native", action="store_true", help="use the pure-Python parser (RHYTHM_NO_NATIVE=1)")
    ap.add_argument("--repeat", type=int, default=3, help="with --parse-only: best of this many runs")
    ap.add_argument("--parse-only-child", default=None, help=argparse.SUPPRESS)
    sys.exit(main(ap.parse_args()))
