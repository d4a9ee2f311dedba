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
from rich.text import Text

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


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}


def plain(value: Any) -> str:
    """A value as terminal-safe text: control characters (ESC, OSC, BEL, C1...) shown as
    \\xNN instead of being sent to the terminal. Use with Text(), never as markup."""
    return ("" if value is None else str(jsonable(value))).translate(_CONTROL)


def cell(value: Any) -> Text:
    """A table cell from data: never parsed as rich markup (imported text is untrusted)."""
    return Text(plain(value))


def rows_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> Table:
    table = Table(title=Text(plain(title)) if title else None, show_lines=False)
    for c in columns:
        table.add_column(cell(c), overflow="fold")
    for r in rows:
        table.add_row(*(cell(v) for v in r))
    return table


def natural_width(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """The width a table would need to show every value on one line (borders included)."""
    widths = [len(plain(c)) for c in columns]
    for r in rows:
        for i, v in enumerate(r):
            widths[i] = max(widths[i], max((len(x) for x in plain(v).splitlines()), default=0))
    return sum(widths) + 3 * len(widths) + 1


def rows_vertical(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Text:
    """One block per row, one `column: value` line per column (psql's \\x), for wide results."""
    pad = max((len(plain(c)) for c in columns), default=0)
    out = Text()
    for i, r in enumerate(rows):
        out.append(f"-[ row {i + 1} ]" + "-" * max(0, pad - 6) + "\n", style="dim")
        for c, v in zip(columns, r, strict=True):
            out.append(plain(c).ljust(pad), style="bold")
            out.append(" | " + plain(v) + "\n")
    return out


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
