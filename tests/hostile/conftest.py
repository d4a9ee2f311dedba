"""The hostile-input harness: a seeded database, a sealed environment, before/after snapshots.

Every case runs the real entry point (`rhythm.cli.main`) in-process against a copy of a
database seeded with a good import of each source, with the working directory, HOME and
TMPDIR pointed at empty folders, sockets refused, and a watchdog that turns a hang into a
failure. The checks: the exit status, stderr (exactly one `error:` line for a refusal,
nothing for handled input), the database (row counts and a content hash of every table),
and that no file appeared outside RHYTHM_HOME or changed in the input's folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.hostile import inputs

SEEDS = (
    ("healthkit", inputs.good_healthkit),
    ("garmin", inputs.good_garmin),
    ("whoop", inputs.good_whoop),
    ("ics", inputs.good_ics),
)
WATCHDOG_S = 120  # a case that runs longer is a hang


class Hung(BaseException):
    """Raised by the watchdog: not an Exception, so the CLI cannot turn it into a line."""


def snapshot(db_path: Path) -> dict[str, tuple[int, str]]:
    """(rows, content hash) of every table; for `runs`, of the successful runs only (a
    failed run may be noted)."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY table_name").fetchall()]
        out = {}
        for t in tables:
            where = " WHERE ok" if t == "runs" else ""
            n, digest = con.execute(
                f'SELECT count(*), md5(coalesce(string_agg(CAST(x AS VARCHAR), chr(30) ORDER BY CAST(x AS VARCHAR)), \'\')) '
                f'FROM "{t}" AS x{where}'
            ).fetchone()
            out[t] = (n, digest)
        return out
    finally:
        con.close()


def tree(root: Path) -> dict[str, int]:
    """Every path under `root` (relative) with its size (-1 for folders and special files)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            try:
                out[rel] = p.lstat().st_size if p.is_file() and not p.is_symlink() else -1
            except OSError:
                out[rel] = -1
    return out


@pytest.fixture(scope="session")
def seeded_template(tmp_path_factory) -> Path:
    """A RHYTHM_HOME with one good import of each source (built once, copied per case)."""
    from rhythm.cli import main

    home = tmp_path_factory.mktemp("seeded_home")
    src = tmp_path_factory.mktemp("seed_inputs")
    saved = {k: v for k, v in os.environ.items() if k.startswith("RHYTHM_")}
    for k in saved:
        del os.environ[k]
    os.environ["RHYTHM_HOME"] = str(home)
    try:
        for source, build in SEEDS:
            rc = main(["import", source, str(build(src)), "--json"])
            assert rc == 0, f"seeding {source} failed"
    finally:
        os.environ.pop("RHYTHM_HOME", None)
        os.environ.update(saved)
    return home


@dataclass
class Sealed:
    """One case's sealed environment."""

    home: Path
    input: Path  # where the case writes its input
    places: tuple[Path, ...]  # cwd, HOME, TMPDIR: must stay empty
    run_cli: Callable[..., tuple[int, str, str]]

    @property
    def db(self) -> Path:
        return self.home / "rhythm.duckdb"


@pytest.fixture
def sealed(tmp_path, rhythm_home, seeded_template, run_cli, monkeypatch) -> Iterator[Sealed]:
    for p in seeded_template.iterdir():
        if p.is_file():
            shutil.copy2(p, rhythm_home / p.name)
    places = tuple(tmp_path / n for n in ("cwd", "user_home", "tmpdir"))
    for p in places:
        p.mkdir()
    monkeypatch.chdir(places[0])
    monkeypatch.setenv("HOME", str(places[1]))
    monkeypatch.setenv("TMPDIR", str(places[2]))
    monkeypatch.setattr(tempfile, "tempdir", str(places[2]))

    def no_network(*_args, **_kw):
        raise OSError("network access attempted by a hostile-input case")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)

    def expire(*_args):
        raise Hung(f"the case ran longer than {WATCHDOG_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, WATCHDOG_S)
    try:
        folder = tmp_path / "input"
        folder.mkdir()
        yield Sealed(rhythm_home, folder, places, run_cli)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
