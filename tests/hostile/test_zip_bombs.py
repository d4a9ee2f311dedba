"""Real zip bombs (512 MiB of zeros in a ~2 MB zip), each imported in a child process whose
peak memory is measured: a member larger than its cap is refused before it is read, so the
import stays near the interpreter's own footprint (it took 1.2 GB before issue 22)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile import inputs as gen

REPO = Path(__file__).resolve().parents[2]
PEAK_MB = 400  # the CLI with pyarrow and DuckDB loaded is ~150 MB; a member read whole is 512+
# The child's own high-water mark (VmHWM belongs to the address space exec created;
# getrusage's ru_maxrss would carry over the forking test process's size).
CHILD = (
    "import re, sys\n"
    "from rhythm.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
    "print('peak_kb', hwm)\n"
    "sys.exit(rc)\n"
)


def import_in_child(source: str, path: Path, home: Path, cwd: Path) -> tuple[int, str, int]:
    env = {**os.environ, "RHYTHM_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, "import", source, str(path)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)
    peak = int(done.stdout.rsplit("peak_kb", 1)[1].split()[0])
    return done.returncode, done.stderr, peak // 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory read from /proc (Linux)")
@pytest.mark.parametrize(("source", "member", "message"), [
    ("garmin", "DI_CONNECT/DI-Connect-Uploaded-Files/big.fit", "a FIT file (536,870,912 bytes uncompressed) is larger than 64 MiB"),
    ("whoop", "physiological_cycles.csv", "a CSV file (536,870,912 bytes uncompressed) is larger than 64 MiB"),
])
def test_a_512_mib_zip_member_is_refused_without_reading_it(tmp_path, rhythm_home, source, member, message):
    bomb = gen.zeros_member(tmp_path / "bomb.zip", member, 512 << 20)
    assert bomb.stat().st_size < 8 << 20
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    rc, err, peak_mb = import_in_child(source, bomb, rhythm_home, cwd)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and message in lines[0], err
    assert peak_mb < PEAK_MB, f"peak {peak_mb} MB"
    assert not any(cwd.iterdir())
