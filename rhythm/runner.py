"""The runner every unit of work goes through (STYLE rule 16): the writer lock
(``rhythm.lock``: the daemon, or one CLI command, is the only writer), the open (migrated)
database, one transaction that ends with its row in ``runs``; ``record_failure`` notes a
failed run afterwards. It imports no command: the units (``rhythm.jobs``) and the commands
that use them import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from common.errors import RhythmError
from rhythm.lock import writer_lock
from rhythm.settings import Settings
from storage import open_db, runs
from storage.db import Database


@contextmanager
def session(settings: Settings, what: str) -> Iterator[Database]:
    """The writer lock and the open (migrated) database, for one or more units of work."""
    with writer_lock(settings.home, what), open_db(settings.database) as db:
        yield db


@dataclass
class Run:
    """A unit of work in progress: the database, and the summary its `runs` row will carry."""

    db: Database
    kind: str
    source: str | None = None
    target: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)


@contextmanager
def recorded(db: Database, kind: str, source: str | None = None, target: str | None = None) -> Iterator[Run]:
    """One transaction that ends with its row in `runs` (all or nothing)."""
    run = Run(db, kind, source, target)
    started = datetime.now(UTC)
    with db.transaction():
        yield run
        runs.record_run(db, kind, source, target, started, True, run.summary)


@contextmanager
def unit_of_work(
    settings: Settings, kind: str, source: str | None = None, target: str | None = None
) -> Iterator[Run]:
    """Lock, open, one recorded transaction: the whole of a unit of work."""
    what = f"rhythm {kind}" + (f" {source}" if source else "")
    with session(settings, what) as db, recorded(db, kind, source, target) as run:
        yield run


def record_failure(settings: Settings, kind: str, source: str | None, target: str, error: BaseException) -> None:
    """Best effort: note a failed run (after its transaction rolled back). The daemon uses
    this; a failed command line leaves the database exactly as it was."""
    try:
        with open_db(settings.database) as db:
            runs.record_run(db, kind, source, target, datetime.now(UTC), False, {"error": str(error)})
    except RhythmError:
        pass
