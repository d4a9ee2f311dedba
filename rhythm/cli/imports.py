"""`rhythm import SOURCE PATH`: one command per file source of the registry, with a progress
bar and a summary.

The commands are made from the registry when the command line is parsed (``RegistryGroup``),
so a source added to connectors.registry is a command without touching this file."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperGroup

from connectors.registry import FileImport, file_imports
from rhythm.cli._common import console, get_settings, print_json, progress_bar, rows_table


def _run(ctx: typer.Context, desc: FileImport, path: Path, json_out: bool) -> None:
    from rhythm.jobs import import_file  # DuckDB and the writer load only to import

    settings = get_settings(ctx)
    total = _size(path)
    with progress_bar(f"{desc.label} {path.name}", total, unit="bytes") as update:
        summary = import_file(settings, desc.name, path, progress=update)
    d = summary.to_dict()
    if json_out:
        print_json(d)
        return
    rows = [
        (t, c["received"], c["inserted"], c["existing"] + c["duplicates_in_batch"], c["deleted"])
        for t, c in d["tables"].items()
    ]
    console.print(rows_table(["table", "read", "new", "duplicates skipped", "deleted"], rows,
                             title=f"{desc.label}: {path}"))
    span = f"{d['first_day']} .. {d['last_day']}" if d["first_day"] else "no dated rows"
    console.print(f"{d['records']} records, {d['duplicates_skipped']} duplicates skipped, days {span}",
                  highlight=False)
    if d.get("skipped"):  # rows a connector left out (NaN, end before start...), by reason
        console.print("left out: " + ", ".join(f"{n} {reason}" for reason, n in d["skipped"].items()),
                      highlight=False)
    if d.get("rejected"):  # values outside the physical ranges (common/ranges.py), never stored
        console.print(f"rejected as impossible: {sum(d['rejected'].values())} values ("
                      + ", ".join(f"{n} {why}" for why, n in d["rejected"].items()) + ")", highlight=False)


def _size(path: Path) -> int | None:
    p = path.expanduser()
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return None


def _command(desc: FileImport):
    def command(
        ctx: typer.Context,
        path: Path = typer.Argument(..., help=desc.path_help),
        json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        _run(ctx, desc, path, json_out)

    command.__doc__ = desc.help
    return command


class RegistryGroup(TyperGroup):
    """`rhythm import`'s subcommands: one per FileImport in the registry, made on demand."""

    @property
    def commands(self) -> dict:  # type: ignore[override]
        sub = typer.Typer()
        for desc in file_imports().values():
            sub.command(desc.name)(_command(desc))
        return typer.main.get_group(sub).commands

    @commands.setter
    def commands(self, _value: dict) -> None:  # TyperGroup.__init__ assigns it; the registry rules
        pass


app = typer.Typer(
    cls=RegistryGroup,
    help="Import exported files (Apple Health, Garmin, WHOOP, calendar .ics, ...).",
    no_args_is_help=True,
)
