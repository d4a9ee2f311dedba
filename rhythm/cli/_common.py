"""What every CLI module shares: consoles, settings from the context, rendering helpers.

The CLI is thin (STYLE rule 12): parse, load settings, call one library function, render.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from rhythm.settings import Settings, load_settings

console = Console()
err_console = Console(stderr=True)


@dataclass
class State:
    settings: Settings


def get_settings(ctx: typer.Context | None = None) -> Settings:
    """Settings of this invocation (set by the root callback), or freshly loaded."""
    c = ctx
    while c is not None:
        if isinstance(c.obj, State):
            return c.obj.settings
        c = c.parent
    return load_settings()


def jsonable(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    return v


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")


def rows_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(str(c), overflow="fold")
    for r in rows:
        table.add_row(*("" if v is None else str(jsonable(v)) for v in r))
    return table


def rows_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if v is None else jsonable(v) for v in r])
    return buf.getvalue()


@contextmanager
def progress_bar(description: str, total: float | None, unit: str = "records") -> Iterator[Any]:
    """A rich progress bar; yields `update(completed)` for the library's callback.

    Drawn only on a terminal: in pipes, cron and CI the output stays clean (no control
    codes, no stray blank line before an error)."""
    if not err_console.is_terminal:
        yield lambda completed, total=None: None
        return
    if unit == "bytes":
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        ]
    else:
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
    with Progress(*columns, console=err_console, transient=True) as progress:
        task = progress.add_task(description, total=total)

        def update(completed: float, total: float | None = None) -> None:
            progress.update(task, completed=completed, **({"total": total} if total else {}))

        yield update
