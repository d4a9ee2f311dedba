"""`rhythm import SOURCE PATH`: file connectors, with a progress bar and a summary."""

from __future__ import annotations

from pathlib import Path

import typer

from rhythm.cli._common import console, get_settings, print_json, progress_bar, rows_table
from rhythm.pipeline import import_file

app = typer.Typer(help="Import exported files (Apple Health, Garmin, WHOOP, calendar .ics).", no_args_is_help=True)


def _run(ctx: typer.Context, source: str, path: Path, json_out: bool, label: str) -> None:
    settings = get_settings(ctx)
    total = _size(path)
    with progress_bar(f"{label} {path.name}", total, unit="bytes") as update:
        summary = import_file(settings, source, path, progress=update)
    d = summary.to_dict()
    if json_out:
        print_json(d)
        return
    rows = [
        (t, c["received"], c["inserted"], c["existing"] + c["duplicates_in_batch"], c["deleted"])
        for t, c in d["tables"].items()
    ]
    console.print(rows_table(["table", "read", "new", "duplicates skipped", "deleted"], rows, title=f"{label}: {path}"))
    span = f"{d['first_day']} .. {d['last_day']}" if d["first_day"] else "no dated rows"
    console.print(f"{d['records']} records, {d['duplicates_skipped']} duplicates skipped, days {span}")
    if d.get("skipped"):  # rows a connector left out (NaN, end before start...), by reason
        console.print("left out: " + ", ".join(f"{n} {reason}" for reason, n in d["skipped"].items()))


def _size(path: Path) -> int | None:
    p = path.expanduser()
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return None


@app.command("healthkit")
def healthkit(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Apple Health export.zip or export.xml."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Apple Health export.zip or export.xml (streamed; any size)."""
    _run(ctx, "healthkit", path, json_out, "Apple Health")


@app.command("garmin")
def garmin(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A FIT file, a folder of them, or a Garmin Connect data-export zip/folder."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Garmin FIT files, a folder of them, or a Garmin Connect data export."""
    _run(ctx, "garmin", path, json_out, "Garmin")


@app.command("whoop")
def whoop(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="WHOOP app CSV export: the zip or the unzipped folder."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """WHOOP app CSV export (cycles, sleeps, workouts, journal)."""
    _run(ctx, "whoop", path, json_out, "WHOOP")


@app.command("ics")
def ics(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A calendar .ics file (or a folder of them)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Calendar .ics file; recurring events expanded inside the configured window."""
    _run(ctx, "ics", path, json_out, "Calendar")
