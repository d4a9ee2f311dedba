"""The writer lock: while the daemon runs it is the only writer.

DuckDB already refuses a second writer while a connection is open, but the daemon opens the
database only during its jobs. `daemon.lock` in RHYTHM_HOME (an advisory `flock`) is held by
the daemon for its whole life and by each writing CLI command for its duration, so a manual
`rhythm import` while the daemon runs gets a clear message instead of racing a job.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import DatabaseBusy

_held: dict[str, int] = {}  # lock path -> fd held by this process


def _lock_path(home: Path) -> Path:
    return home / "daemon.lock"


def _owner(path: Path) -> str:
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def acquire(home: Path, what: str) -> bool:
    """Take the lock for this process. Returns False if this process already holds it."""
    path = _lock_path(home)
    key = str(path)
    if key in _held:
        return False
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DatabaseBusy(
            f"database busy: {_owner(path)} holds the writer lock ({path}); "
            "stop it or wait for it to finish"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{what} (pid {os.getpid()})".encode())
    _held[key] = fd
    return True


def release(home: Path) -> None:
    key = str(_lock_path(home))
    fd = _held.pop(key, None)
    if fd is not None:
        try:
            os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


@contextmanager
def writer_lock(home: Path, what: str = "rhythm") -> Iterator[None]:
    """Hold the writer lock for a block; re-entrant within one process (the daemon)."""
    took = acquire(home, what)
    try:
        yield
    finally:
        if took:
            release(home)
